"""The grammar and stdlib ship with the package: found from a checkout and from a wheel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import txcl
from txcl.resources import grammar_path, stdlib_dir


def test_grammar_and_stdlib_are_found() -> None:
    assert grammar_path().is_file()
    assert grammar_path().read_text(encoding="utf-8").strip()
    assert stdlib_dir().is_dir()


def test_ci_runs_against_the_installed_wheel() -> None:
    """In CI (.ci/run installs non-editable), txcl must come from site-packages with its data."""
    if os.environ.get("CI") != "true":
        # Outside CI a checkout or editable install is fine; the data must still resolve.
        assert grammar_path().name == "txcl.lark"
        return
    package_dir = Path(txcl.__file__).resolve().parent
    assert "site-packages" in str(package_dir)
    assert grammar_path().resolve().is_relative_to(package_dir / "_data")
    assert stdlib_dir().resolve().is_relative_to(package_dir / "_data")


def test_console_script_parses_a_rule(tmp_path: Path) -> None:
    rule = tmp_path / "r.txcl"
    rule.write_text('WHEN .a == 1\nEMIT .b = "x"\n', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "txcl", "parse", str(rule)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
