"""The workspace's data folder `.txcl-data/`: a name no `*.txcl` glob matches, a `.gitignore`
inside, and an older `.txcl/` folder taken over on first use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TXCL = str(Path(sys.executable).parent / "txcl")


def txcl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, *args], capture_output=True, text=True, timeout=60)


def _ws(tmp_path: Path) -> Path:
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    return tmp_path


def test_the_first_run_creates_the_data_folder_with_its_gitignore(tmp_path):
    ws = _ws(tmp_path)
    assert txcl("run", str(ws), "--input", "{}").returncode == 0
    data = ws / ".txcl-data"
    assert (data / "txcl.db").is_file()
    assert (data / ".gitignore").read_text().splitlines()[-1] == "*"
    assert not (ws / ".txcl").exists()
    assert [p for p in ws.rglob("*.txcl") if not p.is_file()] == []  # nothing but rules matches


def test_an_older_txcl_folder_is_taken_over_with_its_data(tmp_path):
    ws = _ws(tmp_path)
    assert txcl("run", str(ws), "--input", "{}").returncode == 0
    (ws / ".txcl-data").rename(ws / ".txcl")  # what an older txcl left behind
    (ws / ".txcl" / ".gitignore").unlink()
    shown = txcl("trace", "last", "--workspace", str(ws), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["request"]["status"] == "completed"  # the old trace is still there
    assert not (ws / ".txcl").exists() and (ws / ".txcl-data" / "txcl.db").is_file()
    assert (ws / ".txcl-data" / ".gitignore").exists()


def test_check_keeps_its_cache_in_the_data_folder(tmp_path):
    ws = _ws(tmp_path)
    assert txcl("check", str(ws)).returncode == 0
    assert (ws / ".txcl-data" / "cache").is_dir() and (ws / ".txcl-data" / ".gitignore").exists()


def test_read_only_commands_create_no_database(tmp_path):
    ws = _ws(tmp_path / "ws")
    typo = tmp_path / "typo"
    for args in (["runs", "list", "--workspace", str(typo)], ["sweep", "--workspace", str(typo)],
                 ["runs", "list", "--workspace", str(ws)], ["sweep", "--workspace", str(ws)],
                 ["complete", "run_x", "--workspace", str(ws), "--output", "{}"],
                 ["db", "status", "--workspace", str(ws)], ["trace", "last", "--workspace", str(ws)]):
        done = txcl(*args)
        assert done.returncode in (1, 2), (args, done.returncode, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, (args, done.stderr)
    assert not typo.exists()
    assert not (ws / ".txcl-data").exists() and not (ws / ".txcl").exists()


def test_a_tree_that_fails_to_load_creates_no_database(tmp_path):
    ws = _ws(tmp_path)
    (ws / "OPS" / "s" / "100" / "bad.txcl").write_text("WHEN .a ==\n")
    done = txcl("run", str(ws), "--input", "{}")
    assert done.returncode == 2 and "TX0" in done.stderr
    assert not (ws / ".txcl-data").exists()
