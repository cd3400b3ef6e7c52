"""Helpers for the `txcl test` tests: a workspace written from a dict, and the command run
through click (in this process, so the tests are quick)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from txcl.cli.main import cli


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return root


@pytest.fixture
def ws(tmp_path: Path):
    def build(files: dict[str, str]) -> Path:
        return write(tmp_path, files)
    return build


@pytest.fixture
def run_tests(monkeypatch):
    """`run_tests(root, *args)` -> (exit code, stdout, stderr) of `txcl test` run in `root`."""
    def invoke(root: Path, *args: str):
        monkeypatch.chdir(root)
        result = CliRunner().invoke(cli, ["test", "--color", "never", *args])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr
    return invoke


def report(root: Path, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["test", "--output-format", "json", *args])
    return json.loads(result.stdout[: result.stdout.rindex("}") + 1])
