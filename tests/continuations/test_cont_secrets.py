"""Secrets never leak: a served run that uses one secret in a sync http op (a header and a
body field, against a server that echoes both back), in an async dispatch that fails, is
retried and resumes, and in an op whose secret is missing. Then every place txcl writes is
searched for the secret's bytes — the database files and their WAL (or, on PostgreSQL, every
row of every table), the serve log (JSON, with the access log), the HTTP answers, the dashboard
pages, the metrics, `txcl runs show` and `txcl trace` — and none holds them. The worker did
receive the secret, so the search looks for bytes that really travelled."""

from __future__ import annotations

import json
import secrets as pysecrets
import subprocess
from pathlib import Path

import pytest
from cont_support import TXCL, db_of, http_get, wait_until
from contworker import TestWorker
from testtools import EchoServer


@pytest.fixture
def echo():
    server = EchoServer()
    yield server.url
    server.close()


def _database_bytes(ws: Path, backend: str) -> bytes:
    if backend == "sqlite":
        data = ws / ".txcl-data"
        return b"".join(p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file())
    import psycopg

    with psycopg.connect(db_of(ws / ".txcl-data" / "txcl.db")) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()]
        assert len(tables) > 5
        rows = [str(conn.execute(f'SELECT json_agg(t)::text FROM "{t}" t').fetchone()[0]) for t in tables]
    return "\n".join(rows).encode()


def test_a_secret_reaches_the_request_and_nothing_else(serve, workspace, echo, backend):
    secret = "sk_live_" + pysecrets.token_hex(16)
    with TestWorker() as worker:
        ws = workspace({
            "OPS/shop/100/echo.txcl": (
                'WITH secrets.headers.authorization.secret = "API_KEY",\n'
                '     secrets.headers.authorization.format = "Bearer {}",\n'
                '     secrets.body.auth.token.secret = "API_KEY", into = "echo"\n'
                f'EXEC "{echo}/echo"'),
            "OPS/shop/200/job.txcl": (
                'WITH mode = "async", timeout = "1h", into = "job", retries = 1, retry_backoff = "100ms",\n'
                '     secrets.headers.x-worker-key.secret = "API_KEY"\n'
                f'EXEC "{worker.url()}"'),
            "OPS/shop/300/missing.txcl": f'WITH secrets.headers.x-other.secret = "NOT_SET_ANYWHERE"\nEXEC "{echo}/echo"',
            "OPS/shop/400/done.txcl": "EMIT .done = true",
        })
        srv = serve(ws, "--ui", "--trace-mode", "full", "--access-log", "--metrics", "--log-format", "json",
                    env={"TXCL_SECRET_API_KEY": secret})
        status, headers, body = http_get(srv.url + "/go")
        assert status == 202, body
        first = worker.wait_job()
        assert first.headers["x-worker-key"] == secret  # the secret travelled, in the dispatch only
        assert secret not in json.dumps(first.body)
        assert worker.callback(first, status="failed", error="busy", retryable=True)[0] == 200
        again = worker.wait_job()
        assert again.headers["x-worker-key"] == secret and again.token != first.token
        assert worker.callback(again, {"ok": 1})[0] == 200

        def finished():
            answer = http_get(srv.url + headers["location"])
            return answer if answer[0] == 200 else None

        _, _, final = wait_until(finished, timeout=20)
        envelope = json.loads(final)
        assert envelope["done"] is True and envelope["job"] == {"ok": 1}
        # the echo server sent the credential back: it reaches the envelope masked
        assert envelope["echo"]["headers"]["authorization"] == "Bearer [secret]"
        assert envelope["echo"]["body"]["auth"] == {"token": "[secret]"}
        run_id = first.body["_txc"]["run_id"]
        rid = headers["x-request-id"]

        seen = [final, body]
        for path in ("/_txc/ui/", f"/_txc/ui/runs/{run_id}", "/_txc/ui/traces", f"/_txc/ui/traces/{rid}",
                     headers["location"], "/_txc/metrics"):
            page_status, _, page = http_get(srv.url + path, accept="text/html")
            assert page_status == 200, path
            seen.append(page)
        db = ["--db", db_of(ws / ".txcl-data" / "txcl.db"), "--workspace", str(ws)]
        shown = subprocess.run([TXCL, "runs", "show", run_id, *db], capture_output=True, timeout=60)
        traced = subprocess.run([TXCL, "trace", "--run", run_id, "--json", *db], capture_output=True, timeout=60)
        assert shown.returncode == 0 and traced.returncode == 0, shown.stderr + traced.stderr
        steps = [s for trace in json.loads(traced.stdout) for s in trace["steps"]]
        missing = [s for s in steps if s["name"] == "missing"][0]
        assert missing["status"] == "error"
        assert "secret NOT_SET_ANYWHERE (WITH secrets.headers.x-other) is not set" in missing["error"]
        assert "TXCL_SECRET_NOT_SET_ANYWHERE" in missing["error"]
        seen += [shown.stdout, shown.stderr, traced.stdout]
        srv.stop()
        assert '"path": "/go"' in srv.log  # the JSON access log was written (and is searched)
        seen.append(srv.log.encode())
        seen.append(_database_bytes(ws, backend))

    needle = secret.encode()
    leaks = [i for i, blob in enumerate(seen) if needle in blob]
    assert leaks == [], f"the secret's bytes were found in {leaks}"
    assert b"API_KEY" in seen[-1]  # the database keeps the secret's name, which is not the secret


def test_a_secret_name_computed_from_the_envelope_is_refused_at_load(tmp_path):
    ops = tmp_path / "OPS" / "shop" / "100"
    ops.mkdir(parents=True)
    (ops / "charge.txcl").write_text('WITH secrets.headers.authorization.secret = .which\n'
                                     'EXEC "https://api.example.com/charge"\n')
    out = subprocess.run([TXCL, "check", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "TX114" in out.stdout
    assert "must be a literal: a secret reference is never computed from the envelope" in out.stdout
    run = subprocess.run([TXCL, "run", str(tmp_path), "--input", "{}"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "TX114" in run.stderr + run.stdout and "Traceback" not in run.stderr
