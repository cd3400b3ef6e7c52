"""EXEC classification (load time) and dispatch (run time) for every scheme.

`classify` turns an EXEC string into a `Target`; `Dispatcher.call` runs one sync dispatch
of a prepared op and returns its raw output (or raises OpError). The tail (into, sanitise,
EMIT) is the walker's job.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple

import attrs

STAGE_RE = re.compile(r"^([A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*)/([0-9]{1,9})$")
SCOPE_RE = re.compile(r"^[0-9]{1,9}$")
PY_RE = re.compile(r"^py://([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)$")
SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class OpError(Exception):
    """A dispatch failed; `message` becomes the error step's text (best effort, R4)."""

    def __init__(self, message: str, status: str = "error"):
        self.message = message
        self.status = status  # "error" | "timeout"
        super().__init__(message)


@attrs.frozen
class Target:
    """A classified EXEC string. kind: builtin | http | mcp | py | goto | stage."""

    kind: str
    text: str
    name: str | None = None  # builtin name
    url: str | None = None
    module: str | None = None
    function: str | None = None
    stack: str | None = None  # goto/stage: None for goto://<scope>
    scope: int | None = None
    tool: str | None = None  # mcp: the tool's name

    @property
    def transport(self) -> str:
        if self.kind == "builtin":
            return "mock" if self.name == "mock" else "txco"
        if self.kind == "http":
            return "https" if self.text.lower().startswith("https://") or (self.url or "").lower().startswith("https://") else "http"
        if self.kind in ("goto", "stage"):
            return "goto"
        return self.kind

    @property
    def trusted(self) -> bool:
        if self.kind == "builtin":
            return self.name != "mock"
        return self.kind in ("goto", "stage")

    @property
    def is_jump(self) -> bool:
        return self.kind in ("goto", "stage")

    @property
    def stamped(self) -> bool:
        """Sync dispatches to txco/http/py get the identity stamp."""
        return self.kind in ("builtin", "http", "py")


def classify(text: str) -> tuple[Target | None, str | None, str]:
    """Classify an EXEC string: (Target, None, "") or (None, complete message, code).

    The parser's `classify_exec_target` decides, so load errors read the same everywhere."""
    from txcl.syntax.targets import ExecTarget, classify_exec_target

    result = classify_exec_target(text)
    if not isinstance(result, ExecTarget):
        return None, result.message, result.code
    return Target(result.kind, text, name=result.builtin, url=result.url, module=result.module,
                  function=result.function, stack=result.stack, scope=result.scope, tool=result.tool), None, ""


# ---------------------------------------------------------------- py:// resolution

_PATH_ADDED: set[str] = set()


def add_workspace_to_path(workspace: Path | None) -> None:
    """Prepend the workspace to sys.path once, so `py://` modules shipped beside OPS/ import."""
    if workspace is None:
        return
    text = str(Path(workspace).resolve())
    if text not in _PATH_ADDED:
        _PATH_ADDED.add(text)
        if text not in sys.path:
            sys.path.insert(0, text)


def resolve_py_target(target: Target, workspace: Path | None) -> tuple[Callable[..., Any] | None, str | None]:
    """Import `module` and fetch `function`; (callable, None) or (None, reason)."""
    add_workspace_to_path(workspace)
    assert target.module is not None and target.function is not None
    try:
        module = importlib.import_module(target.module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is the author's
        return None, f'cannot import module "{target.module}": {type(exc).__name__}: {exc}'
    func = getattr(module, target.function, None)
    if func is None:
        return None, f'module "{target.module}" has no attribute "{target.function}"'
    if not callable(func):
        return None, f'"{target.module}:{target.function}" is not callable'
    return func, None


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
