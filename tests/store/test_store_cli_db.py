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
        "traces": (8, "current"), "kv": (1, "current"), "continuations": (9, "current"), "clock": (2, "current"), "mail": (1, "current"),
        "queues": (1, "current")}
    status = txcl("db", "status", "--db", db_url)
    assert status.returncode == 0 and "continuations  version  9 of 9  current" in status.stdout


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


def _fill_and_purge(db_url: str, runs: int = 40) -> None:
    """Park and finish `runs` runs with large outputs, then purge them all."""
    from contstore_util import FakeClock, complete, open_store, park_barrier

    from txcl.store.records import Fence

    clock = FakeClock()
    store = open_store(db_url, clock)
    try:
        for i in range(runs):
            park = park_barrier(store, f"rid-v{i}")
            rel = complete(store, park.dispatches[0], output={"blob": "x" * 20_000, "i": i})[1]
            store.finish_segment(park.run.run_id, Fence(rel.claim.segment_id, rel.claim.claim_token),
                                 status="completed")
        clock.advance(1_000)
        assert len(store.purge_finished(retention_ms=10, limit=1_000)) == runs
    finally:
        store.close()


def test_db_vacuum_gives_purged_space_back(db_url):
    _fill_and_purge(db_url)
    done = txcl("db", "vacuum", "--db", db_url)
    assert done.returncode == 0, done.stderr
    if db_url.startswith("postgresql"):
        assert "postgresql" in done.stdout and "vacuumed" in done.stdout
        return
    before, after = (int(n.replace(",", "")) for n in done.stdout.split(":")[-1].replace("bytes", "").split("→"))
    assert after < before / 2, done.stdout
    assert Path(db_url).stat().st_size == after
    wal = Path(db_url + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # the WAL was folded in and truncated


def test_checkpoint_truncates_the_sqlite_wal(tmp_path):
    db = tmp_path / "txcl.db"
    _fill_and_purge(str(db), runs=10)
    from txcl.store.backends.sqlite import SqliteBackend

    backend = SqliteBackend(str(db))
    try:
        backend.connection().execute("CREATE TABLE IF NOT EXISTS filler (b BLOB)")
        backend.connection().execute("INSERT INTO filler VALUES (zeroblob(2000000))")
        wal = Path(str(db) + "-wal")
        assert wal.stat().st_size > 1_000_000
        backend.checkpoint()
        assert wal.stat().st_size == 0
    finally:
        backend.close()


def test_db_vacuum_of_a_missing_file_creates_nothing(tmp_path):
    path = tmp_path / "nope.db"
    done = txcl("db", "vacuum", "--db", str(path))
    assert done.returncode == 2 and f"no database at {path}" in done.stderr
    assert not path.exists()


def test_a_standby_serves_status_and_refuses_serve_with_its_reason(tmp_path, new_pg_database):
    """`txcl db status` reads a server that accepts no writes (a standby); `txcl serve`, which
    must write, stops at start with one line naming the reason and what to do."""
    import psycopg

    url = new_pg_database()
    assert txcl("db", "upgrade", "--db", url).returncode == 0
    name = url.rsplit("/", 1)[1].split("?")[0]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    status = txcl("db", "status", "--db", url)
    assert status.returncode == 0 and "continuations  version  9 of 9  current" in status.stdout, status.stderr
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    done = txcl("serve", str(tmp_path), "--port", "0", "--db", url)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "accepts no writes" in errors[0] and "target_session_attrs" in errors[0], errors
