"""Find the files that ship beside the code: the grammar and the stdlib rule packs.

An installed wheel carries them in `txcl/_data/`; a checkout (including an editable
install) has them at the repository top level.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Directory `name` ("grammar" or "stdlib"), from the wheel or the checkout."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"txcl data directory {name!r} not found beside {_PACKAGE}")


def grammar_path() -> Path:
    return data_dir("grammar") / "txcl.lark"


def stdlib_dir() -> Path:
    return data_dir("stdlib")
