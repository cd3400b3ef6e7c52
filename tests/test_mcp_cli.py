"""`txcl mcp doctor` and `txcl check --mcp-schemas` against a real MCP server (FastMCP)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


from txcl.safecache import seal, unseal
from txcl.testing.mcp_server import McpServerProcess

TXCL = str(Path(sys.executable).parent / "txcl")


@pytest.fixture(scope="module")
def mcp_server():
    with McpServerProcess() as server:
        yield server


def txcl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_doctor_prints_server_protocol_and_tools(mcp_server):
    done = txcl("mcp", "doctor", mcp_server.url)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "server     txcl-test-tools" in out
    assert "protocol   20" in out  # a dated protocol version, e.g. 2025-11-25
    assert "  add — Add two integers." in out and "    a: integer (required)" in out
    assert f'EXEC "mcp+{mcp_server.url}#add"' in out


def test_doctor_json_and_an_exec_target_as_url(mcp_server):
    done = txcl("mcp", "doctor", f"mcp+{mcp_server.url}#add", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["endpoint"] == mcp_server.url and data["server"]["name"] == "txcl-test-tools"
    tools = {t["name"]: t for t in data["tools"]}
    assert set(tools) >= {"add", "slow", "fail", "shout", "double", "echo"}
    assert tools["add"]["input_schema"]["required"] == ["a", "b"]


def test_doctor_fails_clearly(mcp_server):
    down = txcl("mcp", "doctor", "http://127.0.0.1:9/mcp", "--timeout", "3s")
    assert down.returncode == 1 and "cannot connect" in down.stderr and "Traceback" not in down.stderr
    wrong = txcl("mcp", "doctor", mcp_server.url.rsplit("/", 1)[0] + "/nothing-here")
    assert wrong.returncode == 1 and "404" in wrong.stderr and "MCP endpoint" in wrong.stderr
    usage = txcl("mcp", "doctor", "ftp://example.net/x")
    assert usage.returncode == 2 and "http(s)://" in usage.stderr
    bad_header = txcl("mcp", "doctor", mcp_server.url, "-H", "no-colon")
    assert bad_header.returncode == 2 and "NAME:VALUE" in bad_header.stderr


def _tree(tmp_path: Path, url: str) -> Path:
    rules = {
        "missing.txcl": f'SELECT .x AS .a\nEXEC "mcp+{url}#add"',
        "typo.txcl": f'EXEC "mcp+{url}#ad"',
        "fine.txcl": f'SELECT .a, .b\nEXEC "mcp+{url}#add"',
        "whole.txcl": f'EXEC "mcp+{url}#add"',  # no SELECT: the whole envelope, not checked
        "down.txcl": 'EXEC "mcp+http://127.0.0.1:9/mcp#add"',
    }
    scope = tmp_path / "OPS" / "s" / "0100"
    scope.mkdir(parents=True)
    for name, text in rules.items():
        (scope / name).write_text(text + "\n", encoding="utf-8")
    return tmp_path


def test_check_mcp_schemas_reports_unknown_tools_and_missing_arguments(tmp_path, mcp_server):
    ws = _tree(tmp_path, mcp_server.url)
    plain = txcl("check", "--output-format", "json", cwd=ws)
    assert plain.returncode == 0 and json.loads(plain.stdout) == []  # opt-in: nothing without the flag
    done = txcl("check", "--mcp-schemas", "--output-format", "json", cwd=ws)
    found = {(Path(d["file"]).name, d["code"]) for d in json.loads(done.stdout)}
    assert found == {("missing.txcl", "TX251"), ("typo.txcl", "TX250"), ("down.txcl", "TX252")}
    assert done.returncode == 1
    messages = {d["code"]: d["message"] for d in json.loads(done.stdout)}
    assert 'no "b"' in messages["TX251"] and '"ad"' in messages["TX250"]
    # the answers are cached for the next run
    cache = ws / ".txcl-data" / "cache" / "mcp-schemas.json"
    stored = json.loads(unseal(cache.read_bytes(), b"txcl mcp schemas"))
    assert "a" in stored[mcp_server.url]["tools"]["add"]["input"]["properties"]


def test_check_mcp_schemas_uses_the_cache_and_refresh_asks_again(tmp_path, mcp_server):
    ws = _tree(tmp_path, mcp_server.url)
    (ws / "OPS/s/0100/down.txcl").unlink()
    assert txcl("check", "--mcp-schemas", cwd=ws).returncode == 1
    cache = ws / ".txcl-data" / "cache" / "mcp-schemas.json"
    data = json.loads(unseal(cache.read_bytes(), b"txcl mcp schemas"))
    data[mcp_server.url]["tools"]["ad"] = {"input": {"type": "object"}}  # as if the server had listed it
    cache.write_bytes(seal(json.dumps(data).encode(), b"txcl mcp schemas"))
    cached = txcl("check", "--mcp-schemas", "--output-format", "json", cwd=ws)
    assert "TX250" not in {d["code"] for d in json.loads(cached.stdout)}
    fresh = txcl("check", "--mcp-schemas-refresh", "--output-format", "json", cwd=ws)
    assert "TX250" in {d["code"] for d in json.loads(fresh.stdout)}


def test_a_typed_stack_checks_mcp_ops_against_the_cached_tool_schemas(tmp_path, mcp_server):
    """With the tools cached by --mcp-schemas, a typed stack's plain `txcl check` (nothing is
    asked) checks each mcp+ op's SELECT against the tool's inputSchema (TX266)."""
    ws = _tree(tmp_path, mcp_server.url)
    (ws / "OPS/s/0100/down.txcl").unlink()
    (ws / "OPS/s/0100/typo.txcl").unlink()
    (ws / "OPS/s/schema.json").write_text(json.dumps({"$defs": {"input": {"type": "object", "properties": {
        "x": {"type": "integer"}, "a": {"type": "integer"}, "b": {"type": "integer"}}}}}))
    before = txcl("check", "--output-format", "json", cwd=ws)
    assert "TX266" not in {d["code"] for d in json.loads(before.stdout)}  # no cache yet: nothing known
    txcl("check", "--mcp-schemas", cwd=ws)
    after = txcl("check", "--output-format", "json", cwd=ws)
    found = {(Path(d["file"]).name, d["code"]) for d in json.loads(after.stdout)}
    assert ("missing.txcl", "TX266") in found and ("fine.txcl", "TX266") not in found


def test_a_cache_file_someone_else_wrote_is_ignored(tmp_path, mcp_server):
    """A repository can ship `.txcl-data/cache/mcp-schemas.json`: unsealed, or of the wrong
    shape, it is ignored (the server is asked) and never crashes the check."""
    ws = _tree(tmp_path, mcp_server.url)
    (ws / "OPS/s/0100/down.txcl").unlink()
    cache = ws / ".txcl-data" / "cache" / "mcp-schemas.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    forged = {mcp_server.url: {"tools": {"ad": {"input": {}}}, "at": 9e18}}
    for text in (json.dumps(forged).encode(),  # plain JSON: no seal
                 seal(json.dumps({mcp_server.url: {"tools": ["ad"], "at": 1}}).encode(), b"txcl mcp schemas")):
        cache.write_bytes(text)
        done = txcl("check", "--mcp-schemas", "--output-format", "json", cwd=ws)
        assert "Traceback" not in done.stderr
        assert "TX250" in {d["code"] for d in json.loads(done.stdout)}  # "ad" is not a tool: the server said so
        assert json.loads(unseal(cache.read_bytes(), b"txcl mcp schemas"))[mcp_server.url]["tools"].keys() >= {"add"}


def test_noqa_for_an_mcp_code_is_not_unused_without_the_flag(tmp_path, mcp_server):
    scope = tmp_path / "OPS" / "s" / "0100"
    scope.mkdir(parents=True)
    (scope / "a.txcl").write_text(f'SELECT .q  # noqa: TX251\nEXEC "mcp+{mcp_server.url}#add"\n')
    assert txcl("check", cwd=tmp_path).returncode == 0
    done = txcl("check", "--mcp-schemas", "--output-format", "json", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout) == []


def test_doctor_says_a_plain_json_service_is_not_an_mcp_endpoint():
    import http.server
    import threading

    class Plain(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server naming
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = txcl("mcp", "doctor", f"http://127.0.0.1:{server.server_address[1]}/mcp", "--timeout", "20s")
    finally:
        server.shutdown()
    assert done.returncode == 1
    assert "not an MCP endpoint" in done.stderr and "Traceback" not in done.stderr
    assert "ValidationError" not in done.stderr and "within" not in done.stderr
