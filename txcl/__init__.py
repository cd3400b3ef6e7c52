"""txcl: the toolkit and runtime for the TXCL rule language.

The public API is re-exported here and imported lazily, so `import txcl` stays cheap for
tools that need only a part of it.
"""

from __future__ import annotations

import importlib
from typing import Any

from txcl.errors import Diagnostic, TxclDepthError, TxclError, TxclEvalError, TxclLoadError, TxclSyntaxError

__version__ = "0.1.0"

_LAZY = {
    "parse_rule": "txcl.syntax.parser",
    "Rule": "txcl.syntax.ast",
    "when_matches": "txcl.evaluate.when",
    "eval_expression": "txcl.evaluate.expression",
    "apply_rule": "txcl.evaluate.rule",
    "RuleResult": "txcl.evaluate.rule",
    "merge": "txcl.values.merge",
    "load_ops": "txcl.ops.tree",
    "OpsTree": "txcl.ops.tree",
    "Interpreter": "txcl.runtime.interpreter",
    "Completed": "txcl.runtime.interpreter",
    "Failed": "txcl.runtime.interpreter",
    "Suspended": "txcl.runtime.interpreter",
    "OpContext": "txcl.runtime.dispatch",
    "Settings": "txcl.runtime.config",
}

__all__ = [
    "Diagnostic", "TxclDepthError", "TxclError", "TxclEvalError", "TxclLoadError", "TxclSyntaxError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'txcl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
