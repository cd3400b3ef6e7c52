"""Helpers for tests in any folder (importable as `testtools`: tests/ is on sys.path)."""

from __future__ import annotations

import shutil
from typing import Any

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


class RawDb:
    """Direct SQL on a store's database for tests that simulate crashes and corruption
    (through the backend's test hook; ``?`` placeholders on every backend)."""

    def __init__(self, store) -> None:
        self.store = store

    def execute(self, sql: str, params: tuple = ()) -> list:
        return self.store.backend.execute_for_tests(sql, params)

    def everything(self) -> bytes:
        """Every byte the database holds (files for SQLite; every row as text for PostgreSQL)."""
        backend = self.store.backend
        if backend.kind == "sqlite":
            from pathlib import Path

            path = Path(backend.path)
            return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
        tables = [r[0] for r in self.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]
        rows = [r[0] for t in tables for r in self.execute(f"SELECT CAST(x AS TEXT) FROM {t} x")]
        return "\n".join(rows).encode()

    def __enter__(self) -> "RawDb":
        return self

    def __exit__(self, *exc) -> bool:
        return False


def reopened_after_downgrade(open_store, path, component: str, version: int, *statements: str):
    """A new database at `path` taken back to `version` of `component` by `statements` (SQL
    undoing what later versions added), then opened again so the upgrade runs: (store, RawDb)."""
    store = open_store(path)
    raw = RawDb(store)
    for sql in statements:
        raw.execute(sql)
    raw.execute("UPDATE txcl_schema SET version = ? WHERE component = ?", (version, component))
    store.close()
    store = open_store(path)
    return store, RawDb(store)


def rule_files(root, pattern: str = "*.txcl") -> list:
    """The rule files below `root`, sorted: regular files only (a folder or a dangling link
    whose name ends in `.txcl` is not a rule)."""
    from pathlib import Path

    return sorted(p for p in Path(root).rglob(pattern) if p.is_file() and not p.is_symlink())


STEP_TIMES = ("started_ms", "finished_ms", "duration_ms")


def walk_observed(outcome: Any, record: Any) -> tuple:
    """What two walks of one envelope must agree on, whatever path each took: the outcome
    (envelope, halt and fuel, or the failure) and the trace's steps and timeline events,
    their times left out."""
    from txcl.runtime.interpreter import Completed, Failed

    if isinstance(outcome, Completed):
        seen: tuple = ("completed", outcome.envelope, outcome.halted, outcome.fuel_used)
    else:
        assert isinstance(outcome, Failed)
        seen = ("failed", outcome.payload, outcome.http_status)
    steps = [{k: v for k, v in step.items() if k not in STEP_TIMES} for step in record.steps]
    events = [(seq, kind, data) for seq, _at, kind, data in record.events]
    return seen, steps, events


def start_http_server(handler: Any) -> tuple[Any, str]:
    """A ThreadingHTTPServer of `handler` on 127.0.0.1, serving in a daemon thread: (server, its
    base URL). Stop it with `server.shutdown(); server.server_close()`."""
    import threading
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class EchoServer:
    """An HTTP server on 127.0.0.1 that answers each POST with what it received:
    `{"headers": {…lower-case…}, "body": …}` (a JSON body, or a form body as an object); every
    request is kept in `received` as (headers, raw body)."""

    def __init__(self) -> None:
        import json
        from http.server import BaseHTTPRequestHandler
        from urllib.parse import parse_qs

        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                received.append((headers, raw))
                if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
                    body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                else:
                    body = json.loads(raw or b"{}")
                answer = json.dumps({"headers": headers, "body": body}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server, self.url = start_http_server(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
