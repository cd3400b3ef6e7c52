"""Helpers for tests in any folder (importable as `testtools`: tests/ is on sys.path)."""

from __future__ import annotations

import shutil

import pytest


def require_tool(name: str) -> str:
    """The path of an external tool a test needs; a missing tool fails the test.

    `.ci/run` (through `.ci/services.sh`) installs every tool the suite uses; a test that
    skipped when a tool is missing would hide a broken install.
    """
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install it as .ci/services.sh does")
    return found
