"""Output formats of `txcl check`: one module per format, each `render(result, color) -> str`."""

from __future__ import annotations

from typing import Callable

FORMATS = ("full", "concise", "json", "github", "sarif")


def renderer(name: str) -> Callable:
    import importlib
    if name not in FORMATS:
        raise ValueError(f"unknown output format {name!r}")
    module = importlib.import_module(f"txcl.check.formats.{'json_' if name == 'json' else name}")
    return module.render
