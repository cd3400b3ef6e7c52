"""`txcl serve` end to end: a real uvicorn subprocess on 127.0.0.1 and real HTTP (httpx)."""

from __future__ import annotations

import base64
import re

import httpx
import pytest

from serve_helpers import ServeProcess, write_files

ULID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")

MAIN_FILES = {
    "txcl.toml": """
        [serve]
        default_stack = "site"
        web_max_body_bytes = 64
        op_repeat_penalty_ms = 0

        [[serve.routes]]
        host = "api.example.com"
        path = "/v1"
        stack = "api"

        [[serve.routes]]
        host = "*.wild.test"
        stack = "wild"

        [[serve.routes]]
        path = "/admin"
        methods = ["POST"]
        stack = "admin"

        [[serve.routes]]
        path = "/shape"
        stack = "shape"
    """,
    "OPS/site/0100/echo.txcl": """
        EMIT .stack = "site", .req = @web.req, .rid = @rid, .src = @src, .cont = @continuation, ._hidden = 1
    """,
    "OPS/api/0100/a.txcl": 'EMIT .stack = "api"',
    "OPS/wild/0100/a.txcl": 'EMIT .stack = "wild"',
    "OPS/admin/0100/a.txcl": 'EMIT .stack = "admin"',
    "OPS/shape/0100/status.txcl": """
        WHEN @web.req.url.path == "/shape/status"
        EMIT @web.res.status = "201", @web.res.headers.set-cookie = ["a=1; Path=/", "b=2"],
             @web.res.headers.x-one = "1", @web.res.headers.connection = "close",
             @web.res.headers.x-request-id = "evil", .ok = true, ._private = "p"
    """,
    "OPS/shape/0100/body.txcl": """
        WHEN @web.req.url.path == "/shape/body"
        EMIT @web.res.body = &b64encode("plain text"), @web.res.headers.content-type = "text/plain"
    """,
    "OPS/shape/0100/bad.txcl": """
        WHEN @web.req.url.path == "/shape/bad"
        EMIT @web.res.body = "!!not base64!!", .x = 1
    """,
    "OPS/shape/0100/nocontent.txcl": """
        WHEN @web.req.url.path == "/shape/204"
        EMIT @web.res.status = 204, .x = 1
    """,
    "OPS/shape/0100/ctype.txcl": """
        WHEN @web.req.url.path == "/shape/ctype"
        EMIT @web.res.headers.content-type = "application/vnd.x+json", .y = 2
    """,
    "OPS/shape/0100/forbidden.txcl": """
        WHEN @web.req.url.path == "/shape/forbidden"
        EMIT @goto = "_sys/health/0"
    """,
    "OPS/shape/0100/spin.txcl": """
        WHEN @web.req.url.path == "/shape/spin"
        EMIT @goto = "shape/100"
    """,
    "OPS/shape/0100/badstatus.txcl": """
        WHEN @web.req.url.path == "/shape/badstatus"
        EMIT @web.res.status = 700, .z = 3
    """,
}


@pytest.fixture(scope="module")
def main_server(tmp_path_factory):
    ws = write_files(tmp_path_factory.mktemp("main"), MAIN_FILES)
    proc = ServeProcess(ws, []).start()
    yield proc
    assert proc.stop() == 0


@pytest.fixture(scope="module")
def client(main_server):
    with httpx.Client(base_url=main_server.url, timeout=20) as c:
        yield c


# ------------------------------------------------------------------ routing

def test_health_get_and_head(client):
    r = client.get("/_txc/healthz")
    assert r.status_code == 200 and r.text == "ok\n"
    assert r.headers["content-type"].startswith("text/plain")
    h = client.head("/_txc/healthz")
    assert h.status_code == 200 and h.content == b"" and h.headers["content-length"] == "3"


def test_other_txc_paths_and_methods_are_notfound(client):
    for method, path in [("GET", "/_txc/nothing"), ("POST", "/_txc/healthz"), ("GET", "/_txc")]:
        r = client.request(method, path)
        assert r.status_code == 404, (method, path)
        assert r.text == "not found\n"
    # a callback URL with another method than POST: 405, in JSON like every error answer
    r = client.request("GET", "/_txc/continuations/op/opc_x/complete")
    assert r.status_code == 405 and r.json()["error"]["code"] == "txcl_method_not_allowed"


def test_callback_path_without_continuation_support_is_404_json(client):
    r = client.post("/_txc/continuations/op/opc_abc/complete", json={"status": "completed"})
    assert r.status_code == 404 and r.json() == {"error": {"code": "txcl_unknown_op_continuation", "message": "unknown op continuation"}}


def test_continuation_param_goes_to_sys_continuation_on_any_path(client):
    for path in ("/anything?_txc.continuation=rc_abc", "/_txc/zzz?_txc.continuation=", "/v1?_txc.continuation=x"):
        r = client.get(path, headers={"accept": "application/json"})
        # the poll handler answers (404 unknown continuation with continuation support, else
        # the shipped retryable 503); the site stack never sees the request
        assert r.status_code in (404, 503), path
        body = r.json()
        assert "stack" not in body
        if r.status_code == 404:
            assert body["error"]["code"] == "txcl_unknown_continuation"
        else:
            assert body["error"]["code"] == "txcl_store_unavailable"


def test_routes_by_host_path_and_method(client):
    def stack(method: str, path: str, host: str | None = None) -> str:
        headers = {"host": host} if host else {}
        r = client.request(method, path, headers=headers)
        assert r.status_code == 200, r.text
        return r.json()["stack"]

    assert stack("GET", "/v1", "api.example.com") == "api"
    assert stack("GET", "/v1/users?x=1", "API.Example.com:8443") == "api"  # case and port ignored
    assert stack("GET", "/v10", "api.example.com") == "site"  # whole segments only
    assert stack("GET", "/v1", "other.example.com") == "site"
    assert stack("GET", "/", "a.wild.test") == "wild"
    assert stack("DELETE", "/deep/path", "x.y.wild.test") == "wild"
    assert stack("GET", "/", "wild.test") == "site"  # *.suffix needs a sub-domain
    assert stack("POST", "/admin/x") == "admin"
    assert stack("GET", "/admin/x") == "site"  # methods filter
    assert client.get("/shape").json() == {}


# ------------------------------------------------------------------ the envelope

def test_envelope_from_request(client, main_server):
    r = client.post("/some%20where/x?b=2&a=1&a=&c=%C3%A9", content=b"\x00\x01body",
                    headers={"x-multi": "1", "cookie": "s=1; t=2; s=3", "content-type": "application/octet-stream",
                             "x-forwarded-for": "10.9.9.9"})
    assert r.status_code == 200
    out = r.json()
    assert "_hidden" not in out and "_txc" not in out and "_ts" not in out
    req = out["req"]
    assert req["method"] == "POST"
    assert req["proto"] == "HTTP/1.1"
    port = main_server.url.rsplit(":", 1)[1]
    assert req["host"] == f"127.0.0.1:{port}"
    assert req["remote_addr"].startswith("127.0.0.1:")
    assert req["headers"]["x-multi"] == ["1"]
    assert req["cookies"] == {"s": ["1", "3"], "t": ["2"]}
    url = req["url"]
    assert url["path"] == "/some where/x"
    assert url["query"] == {"b": ["2"], "a": ["1", ""], "c": ["é"]}
    assert url["raw_query"] == "b=2&a=1&a=&c=%C3%A9"
    assert url["scheme"] == "http" and url["hostname"] == "127.0.0.1" and url["port"] == port
    assert url["full"] == f"http://127.0.0.1:{port}/some%20where/x?b=2&a=1&a=&c=%C3%A9"
    assert base64.b64decode(req["body"]) == b"\x00\x01body"
    assert out["src"] == "http"
    assert out["rid"] == r.headers["x-request-id"] and ULID_RE.match(out["rid"])


def test_empty_body_is_empty_string(client):
    assert client.get("/").json()["req"]["body"] == ""


def test_request_id_untrusted_by_default(client):
    r = client.get("/", headers={"x-request-id": "client-id-1"})
    assert ULID_RE.match(r.headers["x-request-id"])
    assert r.json()["rid"] == r.headers["x-request-id"]


# ------------------------------------------------------------------ response shaping

def test_status_headers_and_repeated_set_cookie(client):
    r = client.get("/shape/status")
    assert r.status_code == 201
    assert r.headers.get_list("set-cookie") == ["a=1; Path=/", "b=2"]
    assert r.headers["x-one"] == "1"
    assert r.headers["x-request-id"] != "evil" and ULID_RE.match(r.headers["x-request-id"])
    assert r.headers.get("connection") != "close"
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"ok": True}  # top-level "_private" stripped


def test_base64_body_sent_as_is(client):
    r = client.get("/shape/body")
    assert r.status_code == 200 and r.content == b"plain text"
    assert r.headers["content-type"] == "text/plain"


def test_invalid_base64_body_is_500(client):
    r = client.get("/shape/bad")
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "txcl_bad_response_body"
    assert r.headers["cache-control"] == "no-store"


def test_204_and_head_have_no_body(client):
    r = client.get("/shape/204")
    assert r.status_code == 204 and r.content == b"" and "content-length" not in r.headers
    h = client.head("/shape/status")
    assert h.status_code == 201 and h.content == b""
    assert int(h.headers["content-length"]) == len(b'{"ok":true}')


def test_rule_content_type_kept_for_json_body(client):
    r = client.get("/shape/ctype")
    assert r.headers["content-type"] == "application/vnd.x+json" and r.json() == {"y": 2}


def test_out_of_range_status_is_200(client):
    r = client.get("/shape/badstatus")
    assert r.status_code == 200 and r.json() == {"z": 3}


def test_error_outcomes_are_payloads(client):
    r = client.get("/shape/forbidden")
    assert r.status_code == 500 and r.json()["error"]["code"] == "txcl_goto_forbidden"
    assert r.headers["cache-control"] == "no-store"
    r = client.get("/shape/spin")
    assert r.status_code == 500 and r.json()["code"] == "txcl_scope_ttl_exhausted"


# ------------------------------------------------------------------ body cap

def test_body_cap_413_by_content_length(client):
    r = client.post("/", content=b"x" * 65)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "txcl_body_too_large"
    assert ULID_RE.match(r.headers["x-request-id"])


def test_body_cap_413_while_streaming(main_server):
    def chunks():
        for _ in range(10):
            yield b"0123456789"

    with httpx.Client(base_url=main_server.url, timeout=20) as c:
        r = c.post("/", content=chunks())  # chunked: no Content-Length
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "txcl_body_too_large"


def test_body_at_cap_is_accepted(client):
    r = client.post("/", content=b"y" * 64)
    assert r.status_code == 200 and base64.b64decode(r.json()["req"]["body"]) == b"y" * 64


# ------------------------------------------------------------------ other servers

def test_single_stack_default_and_flags(workspace, serve):
    ws = workspace({"OPS/only/0100/a.txcl": "EMIT .a = 1, ._p = 2, .cont = @continuation"})
    srv = serve(ws, "--private", "--trust-request-id")
    with httpx.Client(base_url=srv.url) as c:
        r = c.get("/any/path", headers={"x-request-id": "trace-me.1:2"})
        assert r.status_code == 200
        assert r.headers["x-request-id"] == "trace-me.1:2"
        body = r.json()
        assert body["a"] == 1 and body["_p"] == 2 and body["_txc"]["rid"] == "trace-me.1:2"
        assert body["_txc"]["stack"] == "only"
        assert "ttl" not in body["_txc"] and "fuel_used" not in body["_txc"]
        bad = c.get("/", headers={"x-request-id": "bad id with spaces"})
        assert ULID_RE.match(bad.headers["x-request-id"])


def test_several_stacks_without_default_are_notfound(workspace, serve):
    ws = workspace({"OPS/a/0100/a.txcl": "EMIT .a = 1", "OPS/b/0100/b.txcl": "EMIT .b = 1"})
    srv = serve(ws)
    with httpx.Client(base_url=srv.url) as c:
        r = c.get("/")
        assert r.status_code == 404 and r.text == "not found\n"


def test_workspace_overrides_and_extends_system_stacks(workspace, serve):
    ws = workspace({
        "OPS/site/0100/a.txcl": "EMIT .a = 1",
        "OPS/_sys/health/0000/ok.txcl": 'WITH status = 200, body = "custom\\n"\nEXEC "txco://web-render"',
        "OPS/_sys/notfound/0000/extra.txcl": 'EMIT @web.res.headers.x-extra = "yes"',
    })
    srv = serve(ws)
    with httpx.Client(base_url=srv.url) as c:
        assert c.get("/_txc/healthz").text == "custom\n"
        r = c.get("/_txc/nope")
        assert r.status_code == 404 and r.headers["x-extra"] == "yes" and r.text == "not found\n"


def test_env_and_flag_precedence(workspace, serve):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "txcl.toml": "[serve]\nweb_max_body_bytes = 10\n"})
    srv = serve(ws, env={"TXCL_WEB_MAX_BODY_BYTES": "20"})
    with httpx.Client(base_url=srv.url) as c:
        assert c.post("/", content=b"x" * 15).status_code == 200  # env beats file
        assert c.post("/", content=b"x" * 21).status_code == 413
    srv2 = serve(ws, "--web-max-body-bytes", "5", env={"TXCL_WEB_MAX_BODY_BYTES": "20"})
    with httpx.Client(base_url=srv2.url) as c:
        assert c.post("/", content=b"x" * 6).status_code == 413  # flag beats env


def test_request_deadline_is_503(workspace, serve):
    ws = workspace({
        "OPS/s/0100/slow.txcl": 'EXEC "py://serve_slow_mod:fn"',
        "serve_slow_mod.py": """
            import asyncio
            async def fn(inp, ctx):
                await asyncio.sleep(30)
                return {}
        """,
    })
    srv = serve(ws, "--request-deadline", "300ms", "--op-timeout", "200ms")
    with httpx.Client(base_url=srv.url, timeout=20) as c:
        r = c.get("/")
        assert r.status_code == 200  # the op timed out (best effort), the request completed
    srv2 = serve(ws, "--request-deadline", "300ms", "--op-timeout", "5s")
    with httpx.Client(base_url=srv2.url, timeout=20) as c:
        r = c.get("/")
        assert r.status_code == 503 and r.json()["error"]["code"] == "txcl_request_deadline"
        assert r.headers["cache-control"] == "no-store"
