"""EXEC classification (load time) and dispatch (run time) for every scheme (RUNTIME.md §5).

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
from typing import Any, Callable

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
    """A classified EXEC string. kind: builtin | http | py | goto | stage."""

    kind: str
    text: str
    name: str | None = None  # builtin name
    url: str | None = None
    module: str | None = None
    function: str | None = None
    stack: str | None = None  # goto/stage: None for goto://<scope>
    scope: int | None = None

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
        """Sync dispatches to txco/http/py get the identity stamp (§3.5)."""
        return self.kind in ("builtin", "http", "py")


def classify(text: str) -> tuple[Target | None, str | None]:
    """Classify an EXEC string: (Target, None) or (None, reason). Uses the parser's
    classifier for validation when present, so load errors read the same everywhere."""
    try:
        from txcl.syntax.targets import classify_exec_target  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - the parser module ships with txcl
        classify_exec_target = None
    if classify_exec_target is not None:
        try:
            result = classify_exec_target(text)
        except Exception as exc:  # the classifier reports a malformed target
            return None, getattr(exc, "message", None) or str(exc)
        kind = getattr(result, "kind", None)
        if kind is None or getattr(result, "error", None):
            return None, _error_text(result)
        if kind == "reserved":
            return None, "this EXEC scheme is not supported yet"
    return _local_classify(text)


def _error_text(result: Any) -> str:
    for attr in ("error", "message", "reason"):
        value = getattr(result, attr, None)
        if isinstance(value, str) and value:
            return value
    return str(result)


def _local_classify(text: str) -> tuple[Target | None, str | None]:
    if text.startswith("txco://"):
        name = text[len("txco://"):]
        if not name or any(ch.isspace() for ch in name):
            return None, "a builtin target is txco://<name>"
        return Target("builtin", text, name=name), None
    lowered = text.lower()
    if lowered.startswith("http://") or lowered.startswith("https://"):
        return Target("http", text, url=text), None
    if text.startswith("py://"):
        m = PY_RE.match(text)
        if m is None:
            return None, "a Python target is py://<module.path>:<function>"
        return Target("py", text, module=m.group(1), function=m.group(2)), None
    if text.startswith("goto://"):
        rest = text[len("goto://"):]
        if SCOPE_RE.match(rest):
            return Target("goto", text, scope=int(rest)), None
        m = STAGE_RE.match(rest)
        if m is None:
            return None, "a goto target is goto://<scope> or goto://<stack>/<scope>"
        return Target("goto", text, stack=m.group(1), scope=int(m.group(2))), None
    m = STAGE_RE.match(text)
    if m is not None and len(m.group(1)) <= 128:
        return Target("stage", text, stack=m.group(1), scope=int(m.group(2))), None
    scheme = SCHEME_RE.match(text)
    if scheme is not None:
        return None, f"EXEC scheme '{scheme.group(1)}://' is not supported"
    return None, "not a known EXEC target"


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
    """Import `module` and fetch `function` (§5.4); (callable, None) or (None, reason)."""
    add_workspace_to_path(workspace)
    assert target.module is not None and target.function is not None
    try:
        module = importlib.import_module(target.module)
    except BaseException as exc:  # noqa: BLE001 - any import failure is the author's
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) and not isinstance(exc, SystemExit):
            raise
        return None, f'cannot import module "{target.module}": {type(exc).__name__}: {exc}'
    func = getattr(module, target.function, None)
    if func is None:
        return None, f'module "{target.module}" has no attribute "{target.function}"'
    if not callable(func):
        return None, f'"{target.module}:{target.function}" is not callable'
    return func, None


# ---------------------------------------------------------------- op context

@attrs.frozen
class OpContext:
    """What a builtin or `py://` function may read about its call (read-only)."""

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
    fixtures: dict = attrs.field(factory=dict)
    envelope_stack: str = ""  # `_txc.stack`
    web_req: dict | None = None
