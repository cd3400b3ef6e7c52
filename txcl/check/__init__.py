"""`txcl check`: the linter as a library.

    from txcl.check import check_paths, check_source
    check_paths(["OPS"])                      # every finding of a tree, sorted
    check_source(text, "rule.txcl")           # one buffer (LSP, REPL)
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_paths", "check_source", "run_check", "CheckConfig", "load_config"]


def __getattr__(name: str) -> Any:
    if name in ("check_paths", "check_source", "run_check"):
        from txcl.check import engine
        return getattr(engine, name)
    if name in ("CheckConfig", "load_config"):
        from txcl.check import config
        return getattr(config, name)
    raise AttributeError(name)
