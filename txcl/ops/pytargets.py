"""`py://module:function` targets: import the module (the workspace beside OPS/ first on the
path) and fetch the function, at load time and again when a rule is dispatched."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Callable


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


def resolve_py_target(target: Any, workspace: Path | None) -> tuple[Callable[..., Any] | None, str | None]:
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


__all__ = ["add_workspace_to_path", "resolve_py_target"]
