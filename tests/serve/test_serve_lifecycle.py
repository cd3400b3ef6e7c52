"""`txcl serve` startup failures, --watch reloads, graceful shutdown and disconnects."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from serve_helpers import ServeProcess, run_serve_expect_exit


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text, text


# ------------------------------------------------------------------ startup failures

def test_bad_config_value_exits_2(workspace):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "txcl.toml": '[serve]\nop_timeout = "fast"\n'})
    res = run_serve_expect_exit(ws)
    assert res.returncode == 2
    assert "op-timeout" in res.stderr and "txcl.toml" in res.stderr
    _no_traceback(res.stderr)


def test_bad_env_and_flag_values_exit_2(workspace):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    res = run_serve_expect_exit(ws, env={"TXCL_WEB_MAX_BODY_BYTES": "lots"})
    assert res.returncode == 2 and "TXCL_WEB_MAX_BODY_BYTES" in res.stderr
    res = run_serve_expect_exit(ws, "--op-timeout", "20m")
    assert res.returncode == 2 and "op-timeout" in res.stderr and "op-timeout-max" in res.stderr
    _no_traceback(res.stderr)


def test_failed_load_reports_every_diagnostic(workspace):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT .a = ",
        "OPS/s/0200/b.txcl": "WHEN .x ==",
        "OPS/s/0300/c.txcl": "EMIT .c = 1",
    })
    res = run_serve_expect_exit(ws)
    assert res.returncode == 2
    assert "a.txcl" in res.stderr and "b.txcl" in res.stderr
    assert "failed to load (2 errors)" in res.stderr
    _no_traceback(res.stderr)


def test_routes_naming_unknown_stacks_exit_2(workspace):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT .a = 1",
        "txcl.toml": '[serve]\n[[serve.routes]]\npath = "/x"\nstack = "nope"\n',
    })
    res = run_serve_expect_exit(ws)
    assert res.returncode == 2 and 'unknown stack "nope"' in res.stderr
    _no_traceback(res.stderr)
    res = run_serve_expect_exit(ws, "--default-stack", "missing")
    assert res.returncode == 2 and '"missing"' in res.stderr


def test_malformed_routes_exit_2(workspace):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT .a = 1",
        "txcl.toml": '[serve]\n[[serve.routes]]\npath = "x"\nstack = "s"\n',
    })
    res = run_serve_expect_exit(ws)
    assert res.returncode == 2 and "routes entry 1" in res.stderr and "'/'" in res.stderr


def test_no_workspace_and_busy_port_exit_2(tmp_path, workspace):
    res = run_serve_expect_exit(tmp_path)
    assert res.returncode == 2 and "no OPS/ directory" in res.stderr
    import socket

    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = run_serve_expect_exit(ws, "--port", str(port))
    assert res.returncode == 2 and "cannot listen on 127.0.0.1" in res.stderr
    _no_traceback(res.stderr)
    res = run_serve_expect_exit(ws, "--port", "70000")
    assert res.returncode == 2 and "port must be 0-65535" in res.stderr
    _no_traceback(res.stderr)


# ------------------------------------------------------------------ --watch

def test_watch_reloads_changed_rules_and_keeps_tree_on_broken_edit(workspace, serve):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .v = 1"})
    srv = serve(ws, "--watch")
    srv.wait_for("watching")
    rule = ws / "OPS/s/0100/a.txcl"
    with httpx.Client(base_url=srv.url) as c:
        assert c.get("/").json() == {"v": 1}
        mark = len(srv.lines)
        rule.write_text("EMIT .v = 2, .w = true", encoding="utf-8")
        srv.wait_for(r"reloaded the OPS tree", start=mark)
        assert c.get("/").json() == {"v": 2, "w": True}

        mark = len(srv.lines)
        rule.write_text("EMIT .v = = 3", encoding="utf-8")
        srv.wait_for(r"reload failed", start=mark)
        assert any("a.txcl" in line for line in srv.lines[mark:])
        assert c.get("/").json() == {"v": 2, "w": True}  # the previous tree stays

        mark = len(srv.lines)
        (ws / "OPS/s/0200").mkdir()
        (ws / "OPS/s/0200/b.txcl").write_text("EMIT .b = 1", encoding="utf-8")
        rule.write_text("EMIT .v = 4", encoding="utf-8")
        srv.wait_for(r"reloaded the OPS tree", start=mark)
        assert c.get("/").json() == {"v": 4, "b": 1}
    assert srv.stop() == 0


def test_watch_keeps_tree_when_routes_break(workspace, serve):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT .v = 1",
        "OPS/t/0100/a.txcl": "EMIT .t = 1",
        "txcl.toml": '[serve]\ndefault_stack = "s"\n',
    })
    srv = serve(ws, "--watch")
    srv.wait_for("watching")
    with httpx.Client(base_url=srv.url) as c:
        mark = len(srv.lines)
        os.remove(ws / "OPS/s/0100/a.txcl")
        srv.wait_for(r"reload failed.*unknown stack", start=mark)
        assert c.get("/").json() == {"v": 1}


# ------------------------------------------------------------------ shutdown and disconnects

SLOW_FILES = {
    "OPS/s/0100/slow.txcl": 'EXEC "py://serve_slow_ops:slow"',
    "serve_slow_ops.py": """
        import asyncio
        from pathlib import Path

        async def slow(inp, ctx):
            marks = Path(__file__).parent / "marks"
            marks.mkdir(exist_ok=True)
            (marks / "started").write_text("1")
            try:
                while not (marks / "release").exists():
                    await asyncio.sleep(0.02)
            except asyncio.CancelledError:
                (marks / "cancelled").write_text("1")
                raise
            return {"done": True}
    """,
}


def _wait_file(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear")
        time.sleep(0.02)


def test_sigterm_drains_in_flight_requests(workspace):
    ws = workspace(SLOW_FILES)
    srv = ServeProcess(ws, ["--shutdown-grace", "20s"]).start()
    result: dict = {}

    def call() -> None:
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            result["r"] = c.get("/")

    t = threading.Thread(target=call)
    t.start()
    _wait_file(ws / "marks" / "started")
    srv.proc.send_signal(signal.SIGTERM)
    srv.wait_for("shutting down")
    try:  # new requests: refused once the listener is closed, 503 until then
        late = httpx.get(srv.url + "/_txc/healthz", timeout=5)
    except httpx.TransportError:
        pass
    else:
        assert late.status_code == 503 and late.json()["error"]["code"] == "txcl_shutting_down"
    assert "r" not in result  # the in-flight request is still waiting
    (ws / "marks" / "release").write_text("1")
    t.join(30)
    assert result["r"].status_code == 200 and result["r"].json() == {"done": True}
    assert srv.proc.wait(30) == 0


def test_client_disconnect_cancels_in_flight_ops(workspace, serve):
    ws = workspace(SLOW_FILES)
    srv = serve(ws)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(srv.url + "/", timeout=httpx.Timeout(10, read=0.5))
    _wait_file(ws / "marks" / "cancelled")
    srv.wait_for("cancelled: the client disconnected")
    r = httpx.get(srv.url + "/_txc/healthz", timeout=5)
    assert r.status_code == 200


def test_extension_startup_failure_exits_2_without_traceback(workspace, tmp_path):
    import subprocess
    import sys

    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    script = tmp_path / "bad_ext_serve.py"
    script.write_text(
        "import sys\n"
        "from txcl.serve import extensions\n"
        "class Bad:\n"
        "    async def startup(self, state):\n"
        "        raise RuntimeError('sweeper cannot start')\n"
        "extensions.register(lambda settings, ws: Bad())\n"
        "from txcl.cli.main import main\n"
        "sys.exit(main(['serve', sys.argv[1], '--port', '0']))\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXCL_")}
    res = subprocess.run([sys.executable, str(script), str(ws)], capture_output=True, text=True, timeout=60,
                         env=env, cwd=ws)
    assert res.returncode == 2
    assert "startup failed: RuntimeError: sweeper cannot start" in res.stderr
    _no_traceback(res.stderr)


def test_watch_reload_leaves_in_flight_requests_on_their_tree(workspace, serve):
    files = dict(SLOW_FILES)
    files["OPS/s/0200/v.txcl"] = "EMIT .v = 1"
    ws = workspace(files)
    srv = serve(ws, "--watch")
    srv.wait_for("watching")
    result: dict = {}

    def call() -> None:
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            result["r"] = c.get("/")

    t = threading.Thread(target=call)
    t.start()
    _wait_file(ws / "marks" / "started")
    mark = len(srv.lines)
    (ws / "OPS/s/0200/v.txcl").write_text("EMIT .v = 22", encoding="utf-8")
    srv.wait_for(r"reloaded the OPS tree", start=mark)
    (ws / "marks" / "release").write_text("1")
    t.join(30)
    assert result["r"].json() == {"done": True, "v": 1}  # started on the old tree, finished on it
    assert httpx.get(srv.url + "/", timeout=30).json() == {"done": True, "v": 22}
