"""Helpers for the function tests (imported by name; not a conftest)."""

from __future__ import annotations

import pytest

from txcl.errors import TxclEvalError
from txcl.functions.registry import call


def fails(name: str, *args, match: str | None = None) -> str:
    """Call &name(args) expecting an error; return its message (checked to start `&name: `)."""
    with pytest.raises(TxclEvalError) as info:
        call(name, list(args))
    message = str(info.value)
    assert message.startswith(f"&{name}: ")
    if match is not None:
        assert match in message, message
    return message
