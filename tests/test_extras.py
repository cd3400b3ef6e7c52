"""Dependencies by need: the core (what `pip install txcl` and the pre-commit hooks install)
parses, checks, formats and runs rules; the web server, the REPL, the language server and the
PostgreSQL driver are extras, and a command whose extra is missing says what to install."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = ("starlette", "uvicorn", "prompt_toolkit", "pygments", "pygls", "lsprotocol", "psycopg", "psycopg_pool",
            "mcp")

# run txcl's CLI in a fresh interpreter where the optional packages cannot be imported
BLOCKED = f"""
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {OPTIONAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
import importlib.util
_find = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.split('.')[0] in {OPTIONAL!r} else _find(name, *a)
from txcl.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def core(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run from outside the checkout, as the `txcl` command would (`python -c` puts the working
    directory first on the path: from the checkout it would import the source tree and read its
    build metadata instead of the installed txcl's)."""
    return subprocess.run([sys.executable, "-c", BLOCKED, *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd or tempfile.gettempdir())


def hint(extra: str, cwd: Path | None = None) -> str:
    """The install hint as the txcl that `core` runs computes it (the test process may import
    the source tree instead: `python -m pytest` from the checkout does)."""
    code = f"from txcl.install import install_command; print(install_command({extra!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=cwd or tempfile.gettempdir(), check=True).stdout.strip()


def test_the_core_dependencies_hold_no_optional_part():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core_names = {d.split(">")[0].split("[")[0].split("=")[0].strip().lower() for d in project["dependencies"]}
    assert not core_names & {"starlette", "uvicorn", "prompt-toolkit", "pygments", "pygls", "psycopg",
                             "psycopg-pool", "sqlite-utils"}
    extras = project["optional-dependencies"]
    assert {"serve", "repl", "lsp", "postgres", "all"} <= set(extras)


def test_check_fmt_and_run_work_without_the_extras(tmp_path):
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    rule = tmp_path / "OPS" / "s" / "100" / "a.txcl"
    rule.write_text("EMIT .a = 1\n")
    assert core("check", str(tmp_path)).returncode == 0
    assert core("fmt", "--check", str(tmp_path)).returncode == 0
    ran = core("run", str(tmp_path), "--compact")
    assert ran.returncode == 0 and ran.stdout.strip() == '{"a":1}', ran.stderr


@pytest.mark.parametrize("args, extra", [(["serve", "."], "serve"), (["repl"], "repl"), (["lsp"], "lsp"),
                                         (["db", "status", "--db", "postgresql://x@127.0.0.1/y"], "postgres"),
                                         (["mcp", "doctor", "http://127.0.0.1:9/mcp"], "mcp")])
def test_a_command_whose_extra_is_missing_says_what_to_install(tmp_path, args, extra):
    done = core(*args, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert hint(extra, tmp_path) in done.stderr  # a command that works where this txcl came from


def test_an_mcp_op_without_the_extra_is_an_op_error_that_says_what_to_install(tmp_path):
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "100" / "a.txcl").write_text('EXEC "mcp+http://127.0.0.1:9/mcp#add"\nEMIT .ran = 1\n')
    assert core("check", str(tmp_path)).returncode == 0  # the scheme is known without the SDK
    ran = core("run", str(tmp_path), "--compact", "--trace")
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
    assert hint("mcp") in ran.stderr  # the op's error step in the printed trace


@pytest.mark.parametrize("direct_url, expected", [
    ('{"url": "file:///src/txcl", "dir_info": {}}', "pip install '/src/txcl[serve]'"),
    ('{"url": "file:///src/txcl", "dir_info": {"editable": true}}', "pip install -e '/src/txcl[serve]'"),
    ('{"url": "file:///dl/txcl-0.1.0-py3-none-any.whl", "archive_info": {}}',
     "pip install 'txcl[serve] @ file:///dl/txcl-0.1.0-py3-none-any.whl'"),
])
def test_the_install_hint_names_where_this_txcl_came_from(monkeypatch, direct_url, expected):
    """txcl is not on an index: the hint installs the extra from the checkout or wheel pip
    recorded, never `pip install 'txcl[…]'` that would fail."""
    from importlib import metadata

    from txcl.install import install_command

    class Dist:
        def read_text(self, name):
            return direct_url if name == "direct_url.json" else None

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist())
    assert install_command("serve") == expected
