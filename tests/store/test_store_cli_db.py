"""`txcl db status|upgrade`, `--db URL` on every command, and the one-line errors for a
database that cannot be opened (no traceback, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TXCL = str(Path(sys.executable).parent / "txcl")


def txcl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, *args], capture_output=True, text=True, timeout=60, env=env)


def test_db_upgrade_then_status_on_each_backend(db_url):
    up = txcl("db", "upgrade", "--db", db_url, "--json")
    assert up.returncode == 0, up.stderr
    shown = json.loads(up.stdout)
    assert shown["backend"] in ("sqlite", "postgresql")
    assert {c["name"]: (c["version"], c["state"]) for c in shown["components"]} == {
        "traces": (3, "current"), "kv": (1, "current"), "continuations": (3, "current")}
    status = txcl("db", "status", "--db", db_url)
    assert status.returncode == 0 and "continuations  version  3 of 3  current" in status.stdout


def test_db_status_reports_a_missing_schema_with_exit_1(new_pg_database):
    url = new_pg_database()
    status = txcl("db", "status", "--db", url, "--json")
    assert status.returncode == 1
    assert {c["state"] for c in json.loads(status.stdout)["components"]} == {"missing"}


def test_db_status_of_a_missing_sqlite_file_creates_nothing(tmp_path):
    path = tmp_path / "nope.db"
    status = txcl("db", "status", "--db", str(path))
    assert status.returncode == 2 and f"no database at {path}" in status.stderr
    assert not path.exists()


@pytest.mark.parametrize("command", [["db", "status"], ["runs", "list"], ["trace", "last"], ["sweep"]])
def test_unreachable_postgresql_is_one_line_and_exit_2(tmp_path, command):
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    done = txcl(*command, "--db", "postgresql://postgres@127.0.0.1:1/nowhere", "--workspace", str(tmp_path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "127.0.0.1:1" in lines[0] and "refused" in lines[0].lower()


def test_serve_with_unreachable_postgresql_exits_2_with_host_port_and_reason(tmp_path):
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    done = txcl("serve", str(tmp_path), "--port", "0", "--db", "postgresql://postgres@127.0.0.1:1/nowhere")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "PostgreSQL at 127.0.0.1:1/nowhere" in errors[0] and "refused" in errors[0]


def test_serve_refuses_a_login_the_server_rejects(tmp_path, pg_server):
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    url = pg_server.url_for("postgres").replace("postgres@", "nobody@")
    done = txcl("serve", str(tmp_path), "--port", "0", "--db", url)
    assert done.returncode == 2 and 'role "nobody" does not exist' in done.stderr and "Traceback" not in done.stderr


def test_unknown_url_scheme_is_a_usage_error(tmp_path):
    done = txcl("db", "status", "--db", "mysql://x/y")
    assert done.returncode == 2 and "unknown database URL scheme 'mysql'" in done.stderr


def test_txcl_db_environment_variable_names_the_database(tmp_path, new_pg_database):
    import os

    url = new_pg_database()
    ws = tmp_path / "ws"
    (ws / "OPS" / "s" / "100").mkdir(parents=True)
    (ws / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    env = {**os.environ, "TXCL_DB": url}
    ran = txcl("run", str(ws), "--input", "{}", env=env)
    assert ran.returncode == 0, ran.stderr
    assert not (ws / ".txcl-data" / "txcl.db").exists()  # the trace went to PostgreSQL
    trace = txcl("trace", "last", "--workspace", str(ws), "--json", env=env)
    assert trace.returncode == 0 and json.loads(trace.stdout)["request"]["status"] == "completed"
