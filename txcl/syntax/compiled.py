"""Compiled twins of the parser's hottest modules, used when they were built.

`pip install .` compiles `txcl/syntax/lexer.py` and `txcl/syntax/parser.py` with Cython
when it can (Cython comes with the build; a C compiler must be on the machine) into
`txcl.syntax._lexer_c` and `txcl.syntax._parser_c`: the same source, run as C, which
parses a rule in about six sevenths of the time. Without a compiler the install goes on
without them and everything runs as plain Python, with the same results.

A twin carries the SHA-256 of the source it was compiled from; it is used only while that
source is unchanged, so an edited `lexer.py` takes effect at once instead of hiding behind
an old build. `TXCL_PURE_PYTHON=1` turns the twins off (for debugging, or to compare).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path
from types import ModuleType

# module → its compiled twin (setup.py reads this to build them; standard library only here)
TWINS = {
    "txcl.syntax.lexer": "txcl.syntax._lexer_c",
    "txcl.syntax.parser": "txcl.syntax._parser_c",
}
DIGEST_NAME = "__txcl_source_sha256__"  # set in a twin by the build: its source's digest

# module → why its twin is not used (None: it is), for `txcl --version` and the tests
status: dict[str, str | None] = {}


def source_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _import_compiled(name: str, compiled: str) -> ModuleType | None:
    """Module `compiled` (standing in for `name`), unless compiled modules are turned off or
    it was not built; then None, the reason kept in `status[name]`."""
    if os.environ.get("TXCL_PURE_PYTHON", "") not in ("", "0"):
        status[name] = "turned off (TXCL_PURE_PYTHON)"
        return None
    try:
        return importlib.import_module(compiled)
    except ImportError:
        status[name] = "not built (no C compiler at install)"
        return None


def twin(name: str, source: str) -> ModuleType | None:
    """The compiled twin of module `name` (whose file is `source`) when one was built from
    that very file and twins are not turned off; else None, the reason kept in `status`."""
    compiled = TWINS.get(name)
    if compiled is None:  # a twin itself, or a module without one
        return None
    module = _import_compiled(name, compiled)
    if module is None:
        return None
    try:
        current = source_digest(source)
    except OSError:
        current = None
    if current is None or getattr(module, DIGEST_NAME, None) != current:
        status[name] = "built from another version of the source"
        return None
    status[name] = None
    return module


def native(name: str, source_name: str) -> ModuleType | None:
    """A module written for C (`source_name`: its .pyx, in the package beside it) when it was
    built from that very file (or the .pyx is not installed, as in a wheel) and compiled modules
    are not turned off; else None, the reason kept in `status`."""
    module = _import_compiled(name, name)
    if module is None:
        return None
    source = Path(module.__file__).with_name(source_name)
    if source.is_file() and getattr(module, DIGEST_NAME, None) != source_digest(source):
        status[name] = "built from another version of the source"
        return None
    status[name] = None
    return module


def summary() -> str:
    """One phrase on the parser's speed-up: "compiled", or plain Python and why."""
    import txcl.syntax.parser  # noqa: F401 - importing decides (and records) the twins

    parser = {name: reason for name, reason in status.items() if name in TWINS}
    reasons = [reason for reason in parser.values() if reason is not None]
    if len(parser) == len(TWINS) and not reasons:
        return "parser compiled"
    return f"parser in plain Python: {reasons[0] if reasons else 'not built'}"
