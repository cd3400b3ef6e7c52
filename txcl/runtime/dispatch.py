"""EXEC classification (load time) and dispatch (run time) for every scheme.

`exec_target_of` turns an EXEC string into its target; `Dispatcher.call` runs one sync dispatch
of a prepared op and returns its raw output (or raises OpError). The tail (into, sanitise,
EMIT) is the walker's job.
"""

from __future__ import annotations

from txcl.ops.pytargets import add_workspace_to_path, resolve_py_target  # noqa: F401 - dispatch uses them
from txcl.syntax.targets import ExecTarget, classify_exec_target

import logging
import re
from pathlib import Path
from typing import Any, NamedTuple


STAGE_RE = re.compile(r"^([A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*)/([0-9]{1,9})$")
SCOPE_RE = re.compile(r"^[0-9]{1,9}$")
PY_RE = re.compile(r"^py://([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)$")
SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class OpError(Exception):
    """A dispatch failed; `message` becomes the error step's text (best effort, R4)."""

    def __init__(self, message: str, status: str = "error", code: str | None = None):
        self.message = message
        self.status = status  # "error" | "timeout"
        self.code = code  # a txcl_* runtime code when the error has one (recorded in the trace step)
        super().__init__(message)


def exec_target_of(text: str) -> tuple[ExecTarget | None, str | None, str]:
    """An EXEC string's target: (target, None, "") or (None, complete message, code). The
    parser's `classify_exec_target` decides, so load errors read the same everywhere."""
    result = classify_exec_target(text)
    if not isinstance(result, ExecTarget):
        return None, result.message, result.code
    return result, None, ""


# ---------------------------------------------------------------- op context

class _OpContextFields(NamedTuple):
    rid: str
    stack: str
    scope: int
    name: str
    directives: dict
    deadline: float  # time.monotonic() value
    logger: logging.Logger
    kv: Any  # txcl.runtime.schemes.kvapi.Kv or None
    src: str = "cli"
    op_stack: str = ""  # the rule's own stack (may differ from `stack` under overlay)
    workspace: Path | None = None
    tree: Any = None
    fixtures: dict | None = None  # a fresh {} when not given
    envelope_stack: str = ""  # `_txc.stack`
    web_req: dict | None = None


_tuple_new = tuple.__new__


class OpContext(_OpContextFields):
    """What a builtin or `py://` function may read about its call (read-only: its fields
    cannot be set). A named tuple, as one is made for every dispatch: it is built in one
    call (~1 µs), a frozen attrs class field by field (~3 µs)."""

    __slots__ = ()

    def __new__(cls, rid: str, stack: str, scope: int, name: str, directives: dict, deadline: float,
                logger: logging.Logger, kv: Any, src: str = "cli", op_stack: str = "", workspace: Path | None = None,
                tree: Any = None, fixtures: dict | None = None, envelope_stack: str = "",
                web_req: dict | None = None) -> "OpContext":
        return _tuple_new(cls, (rid, stack, scope, name, directives, deadline, logger, kv, src, op_stack, workspace,
                                tree, {} if fixtures is None else fixtures, envelope_stack, web_req))
