"""The rules of `txcl check`, one module per family; each registers its rule functions with
``@file_rule`` / ``@tree_rule`` (:mod:`txcl.check.rules.base`) naming the codes they report.
A new module here is found by :func:`load_rule_modules`: nothing else lists them."""

from __future__ import annotations

import importlib
import pkgutil


def load_rule_modules() -> list[str]:
    """Import every module of this package (each registers its rules once); their names."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return names


__all__ = ["load_rule_modules"]
