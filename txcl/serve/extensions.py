"""The places where the continuation layer plugs into `txcl serve`.

The synchronous server works without any extension. An extension is any object with some of
these methods (all optional; missing ones fall back to the defaults described):

    open_run_store(settings, workspace) -> store | None
        The store serve uses (e.g. a SqliteStore with the continuation mixin). The first
        extension that returns one wins; default: `SqliteStore(settings.db_path(workspace))`.
    walk_hooks(store, settings) -> WalkHooks | None
        Given to the Interpreter (suspend/resume support). First non-None wins.
    async startup(state) / async shutdown(state, grace_s)
        Lifespan: start/stop background work (sweeper, resumes). `shutdown` is awaited after
        uvicorn has drained in-flight requests; it should finish within `grace_s`.
    tree_installed(state, tree)
        Called after a --watch reload put `tree` in use for new requests (e.g. to freeze
        its ops snapshot).
    async callback(request, opc, state) -> starlette Response | Answer
        `POST /_txc/continuations/op/<opc>/complete`. The body is
        unread: the handler reads it under --callback-max-bytes. Default: 404
        {"error": {"code": "txcl_unknown_op_continuation", ...}}.
    async suspended(request, outcome, state) -> Answer | None
        The answer to a request whose walk returned `Suspended`.
        Default: `shaping.suspended_answer` (303 for browsers, 202 + Location otherwise).

Polls (`?_txc.continuation=`) need no hook here: the router sends them to `_sys/continuation`,
whose shipped rule calls `txco://continuation-result` (registered by the continuation layer).

Extensions are found by importing the modules named in `EXTENSION_MODULES` (missing ones
are skipped) and calling their `serve_extension(settings, workspace)`, or added with
`register(factory)`.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("txcl.serve")

EXTENSION_MODULES: tuple[str, ...] = ("txcl.serve.continuations",)
_FACTORIES: list[Callable[[Any, Path], Any]] = []


def register(factory: Callable[[Any, Path], Any]) -> None:
    """Add `factory(settings, workspace) -> extension` (used by tests and plugins)."""
    if factory not in _FACTORIES:
        _FACTORIES.append(factory)


def unregister(factory: Callable[[Any, Path], Any]) -> None:
    if factory in _FACTORIES:
        _FACTORIES.remove(factory)


def load_extensions(settings: Any, workspace: Path) -> list[Any]:
    factories = list(_FACTORIES)
    for name in EXTENSION_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                continue
            raise
        factory = getattr(module, "serve_extension", None)
        if callable(factory) and factory not in factories:
            factories.append(factory)
    out = []
    for factory in factories:
        ext = factory(settings, workspace)
        if ext is not None:
            out.append(ext)
    return out


def first(extensions: list[Any], method: str) -> Callable[..., Any] | None:
    """The bound `method` of the first extension that defines it."""
    for ext in extensions:
        fn = getattr(ext, method, None)
        if callable(fn):
            return fn
    return None
