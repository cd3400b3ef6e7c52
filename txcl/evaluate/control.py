"""`@delete`, `@halt` and `@goto` after a scope's merge."""

from __future__ import annotations

import re
from typing import Any

import attrs

from txcl.values.coerce import bool_form, text_form
from txcl.values.paths import MISSING, delete, delete_target
from txcl.values.reserved import is_deletable

_FULL_STAGE = re.compile(r"^(.+)/([0-9]+)$")
_SCOPE_ONLY = re.compile(r"^[0-9]+$")


def apply_delete(envelope: dict) -> list[str]:
    """Delete every target named by `_txc.delete`, then `_txc.delete` itself.

    Returns the targets that were refused (reserved `_txc` paths).
    """
    txc = envelope.get("_txc")
    if not isinstance(txc, dict) or "delete" not in txc:
        return []
    spec = txc.pop("delete")
    targets = [spec] if isinstance(spec, str) else spec if isinstance(spec, list) else []
    refused: list[str] = []
    for target in targets:
        if not isinstance(target, str):
            continue
        segments = delete_target(target)
        if not segments or any(seg == "" for seg in segments):
            continue
        if is_deletable(segments):
            delete(envelope, segments)
        else:
            refused.append(target)
    return refused


@attrs.frozen
class Control:
    """What the walk does next: halt, jump to (stack, scope), or fail with `error`."""

    halt: bool = False
    goto: tuple[str, int] | None = None
    error: str | None = None


def read_control(envelope: dict, current_stack: str) -> Control:
    """Read `@halt` and `@goto`; strip halt/goto/route when either applies. Halt wins."""
    txc = envelope.get("_txc")
    if not isinstance(txc, dict):
        return Control()
    halt = bool_form(txc.get("halt", MISSING)) if "halt" in txc else False
    raw_goto: Any = txc.get("goto", MISSING)
    goto: tuple[str, int] | None = None
    error: str | None = None
    if raw_goto is not MISSING and raw_goto is not None and raw_goto != "":
        text = text_form(raw_goto)
        full = _FULL_STAGE.match(text)
        if full:
            goto = (full.group(1), int(full.group(2)))
        elif _SCOPE_ONLY.match(text):
            goto = (current_stack, int(text))
        else:
            error = f'invalid @goto target "{text}"'
    if halt or goto is not None or error is not None:
        for key in ("halt", "goto", "route"):
            txc.pop(key, None)
    if halt:
        return Control(halt=True)
    return Control(goto=goto, error=error)

