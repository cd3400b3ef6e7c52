"""Helpers for tests in any folder (importable as `testtools`: tests/ is on sys.path)."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str) -> str:
    """The path of an external tool a test needs.

    Locally a missing tool skips the test; in CI (CI=true) it fails it, because `.ci/run`
    installs every tool the suite uses and a silent skip would hide a broken install.
    """
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI must install it: see .ci/services.sh)")
        pytest.skip(message)
    return found
