"""Fine-grained tests of the serve modules (pure functions and the app in-process)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path

import pytest
from starlette.responses import JSONResponse
from starlette.testclient import TestClient

from txcl.runtime.config import ConfigError, Settings
from txcl.runtime.interpreter import Suspended
from txcl.serve import extensions
from txcl.serve.app import build_state, create_app
from txcl.serve.inlet import BodyTooLarge, parse_cookies, parse_query, read_body, request_id, split_host
from txcl.serve.mount import load_serve_tree
from txcl.serve.routing import Router, parse_routes, path_has_prefix
from txcl.serve.shaping import (bodyless, finish, response_status, rule_headers, shape_completed,
                                suspended_answer)

# ------------------------------------------------------------------ routing


class _Tree:
    def __init__(self, stacks):
        self._stacks = stacks

    def has_stack(self, s):
        return s in self._stacks or s.startswith("_sys/")

    def user_stacks(self):
        return [s for s in self._stacks if not s.startswith("_sys/")]


def test_route_order_first_match_wins():
    routes = parse_routes([{"path": "/a", "stack": "one"}, {"path": "/", "stack": "two"}])
    r = Router.for_tree(_Tree(["one", "two"]), routes)
    assert r.resolve("GET", "h", "/a/b", False).stack == "one"
    assert r.resolve("GET", "h", "/b", False).stack == "two"
    # the fixed steps come before the table
    assert r.resolve("POST", "h", "/_txc/continuations/op/opc_1/complete", True).kind == "callback"
    assert r.resolve("POST", "h", "/_txc/continuations/op/opc_1/complete", False).opc == "opc_1"
    assert r.resolve("GET", "h", "/_txc/healthz", True).stack == "_sys/health"
    assert r.resolve("HEAD", "h", "/_txc/healthz", False).stack == "_sys/health"
    assert r.resolve("GET", "h", "/a", True).stack == "_sys/continuation"
    assert r.resolve("GET", "h", "/_txc/x", True).stack == "_sys/continuation"
    assert r.resolve("GET", "h", "/_txc/x", False).stack == "_sys/notfound"
    assert r.resolve("PUT", "h", "/_txc/healthz", False).stack == "_sys/notfound"


def test_default_and_single_stack_fallback():
    assert Router.for_tree(_Tree(["only"])).resolve("GET", "h", "/", False).stack == "only"
    assert Router.for_tree(_Tree(["a", "b"])).resolve("GET", "h", "/", False).stack == "_sys/notfound"
    assert Router.for_tree(_Tree(["a", "b"]), default_stack="b").resolve("GET", "h", "/", False).stack == "b"


def test_host_matching():
    route = parse_routes([{"host": "*.example.com", "stack": "s"}])[0]
    assert route.matches("GET", "a.example.com", "/")
    assert route.matches("GET", "a.b.example.com", "/")
    assert not route.matches("GET", "example.com", "/")
    assert not route.matches("GET", "badexample.com", "/")
    exact = parse_routes([{"host": "API.Example.com:80", "stack": "s"}])[0]
    assert exact.host == "api.example.com" and exact.matches("GET", "api.example.com", "/")


def test_path_prefix_on_whole_segments():
    assert path_has_prefix("/v1", "/v1") and path_has_prefix("/v1/x", "/v1") and path_has_prefix("/v1/", "/v1/")
    assert not path_has_prefix("/v10", "/v1") and path_has_prefix("/anything", "/")


def test_methods_filter_is_case_insensitive():
    route = parse_routes([{"methods": ["post", "Put"], "stack": "s"}])[0]
    assert route.matches("POST", "h", "/") and route.matches("PUT", "h", "/") and not route.matches("GET", "h", "/")


@pytest.mark.parametrize("raw, fragment", [
    ({"path": "/"}, "'stack' is required"),
    ({"stack": "s", "path": "v1"}, "must start with '/'"),
    ({"stack": "s", "methods": "GET"}, "'methods'"),
    ({"stack": "s", "hots": "x"}, "unknown key 'hots'"),
    ("s", "must be a table"),
])
def test_route_validation(raw, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace("'", "'")):
        parse_routes([raw], "txcl.toml")


def test_unknown_stacks_are_reported_together():
    routes = parse_routes([{"stack": "x"}, {"stack": "ok"}, {"stack": "y"}])
    with pytest.raises(ConfigError) as info:
        Router.for_tree(_Tree(["ok"]), routes, default_stack="z")
    text = str(info.value)
    assert '"x"' in text and '"y"' in text and '"z"' in text and "stacks: ok" in text


# ------------------------------------------------------------------ shaping

@pytest.mark.parametrize("status, expected", [
    (201, 201), ("404", 404), (99, 200), (600, 200), ("abc", 200), (True, 200), (None, 200), (204.0, 200),
    (100, 100), (599, 599),
])
def test_response_status(status, expected):
    assert response_status({"status": status}) == expected


def test_rule_headers_filtering():
    res = {"headers": {"Set-Cookie": ["a=1", "b=2"], "X-N": 5, "Transfer-Encoding": "chunked",
                       "content-length": "9", "X-Evil": "a\r\nInjected: 1", "bad name": "x",
                       "X-Request-ID": "mine", "X-Obj": {"a": 1}}}
    headers = rule_headers(res)
    assert headers == [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2"), (b"x-n", b"5")]


def test_bodyless_rules():
    assert bodyless(204, "GET") and bodyless(304, "GET") and bodyless(101, "GET") and bodyless(200, "HEAD")
    assert not bodyless(200, "GET") and not bodyless(404, "POST")


def test_shape_json_strips_top_level_underscore_keys_only():
    env = {"a": {"_inner": 1}, "_x": 1, "_txc": {"rid": "r"}, "_ts": "t"}
    answer = shape_completed(env)
    assert answer.body == b'{"a":{"_inner":1}}' and answer.status == 200
    assert answer.header("content-type") == "application/json"
    private = shape_completed(env, private=True)
    assert b'"_x":1' in private.body and b'"_txc"' in private.body


def test_shape_body_base64_and_invalid():
    ok = shape_completed({"_txc": {"web": {"res": {"body": base64.b64encode(b"\xff\x00").decode()}}}})
    assert ok.body == b"\xff\x00" and ok.header("content-type") is None
    for bad in ("not base64!", 12, None, "YQ"):
        answer = shape_completed({"_txc": {"web": {"res": {"body": bad}}}})
        assert answer.status == 500 and b"txcl_bad_response_body" in answer.body


def test_finish_sets_request_id_and_length():
    a = finish(shape_completed({"k": 1}), "GET", "RID")
    assert a.header("x-request-id") == "RID" and a.header("content-length") == str(len(a.body))
    h = finish(shape_completed({"k": 1}), "HEAD", "RID")
    assert h.body == b"" and h.header("content-length") == "7"
    n = finish(shape_completed({"_txc": {"web": {"res": {"status": 304}}}, "k": 1}), "GET", "RID")
    assert n.body == b"" and n.header("content-length") is None


def test_suspended_answer_json_and_browser():
    outcome = Suspended("run_1", "rc_abc", "rid")
    a = suspended_answer(outcome, path="/p", accept="application/json", query={}, retry_after_ms=2500)
    assert a.status == 202 and a.header("location") == "/p?_txc.continuation=rc_abc"
    assert a.header("retry-after") == "3" and a.header("cache-control") == "no-store"
    assert b'"continuation":"rc_abc"' in a.body and b'"status":"running"' in a.body
    b = suspended_answer(outcome, path="/p", accept="text/html,*/*", query={}, retry_after_ms=3000)
    assert b.status == 303 and b.header("location") == "/p?_txc.continuation=rc_abc"
    c = suspended_answer(outcome, path="/p", accept="text/html", query={"format": ["json"]}, retry_after_ms=3000)
    assert c.status == 202


# ------------------------------------------------------------------ inlet

def test_query_and_cookie_parsing():
    assert parse_query("a=1&a=&b=%20x+y&c") == {"a": ["1", ""], "b": [" x y"], "c": [""]}
    assert parse_cookies(['s=1; t="q"', "s=2;bad;=x"]) == {"s": ["1", "2"], "t": ["q"]}
    assert split_host("h:80") == ("h", "80") and split_host("h") == ("h", "") and split_host("[::1]:9") == ("::1", "9")


def test_request_id_trust_rules():
    assert len(request_id([(b"x-request-id", b"abc")], False)) == 26
    assert request_id([(b"x-request-id", b"abc")], True) == "abc"
    assert len(request_id([(b"x-request-id", b"a b")], True)) == 26
    assert len(request_id([(b"x-request-id", b"x" * 129)], True)) == 26


def test_minted_request_ids_are_ulids_of_now():
    """A request id the server mints is a ULID: this millisecond's timestamp in its first ten
    characters, then 80 random bits (from the pooled random bytes)."""
    import time

    from txcl.ids import RUN_ID_RE
    from txcl.ids import new_request_id

    before = time.time_ns() // 1_000_000
    minted = [new_request_id() for _ in range(500)]
    after = time.time_ns() // 1_000_000
    crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    for rid in minted:
        assert RUN_ID_RE.match("run_" + rid), rid
        stamp = 0
        for ch in rid[:10]:
            stamp = stamp * 32 + crockford.index(ch)
        assert before <= stamp <= after
    assert len({rid[10:] for rid in minted}) == 500


def test_read_body_counts_while_streaming():
    async def go(chunks, cap, declared=None):
        it = iter(chunks)

        async def receive():
            body, more = next(it)
            return {"type": "http.request", "body": body, "more_body": more}

        return await read_body(receive, cap, declared)

    assert asyncio.run(go([(b"ab", True), (b"cd", False)], 4)) == b"abcd"
    with pytest.raises(BodyTooLarge):
        asyncio.run(go([(b"ab", True), (b"cde", False)], 4))
    with pytest.raises(BodyTooLarge):
        asyncio.run(go([(b"", False)], 4, declared=5))


# ------------------------------------------------------------------ mount

def test_mount_adds_system_stacks_and_workspace_overrides(tmp_path: Path):
    (tmp_path / "OPS/s/0100").mkdir(parents=True)
    (tmp_path / "OPS/s/0100/a.txcl").write_text("EMIT .a = 1")
    (tmp_path / "OPS/_sys/health/0000").mkdir(parents=True)
    (tmp_path / "OPS/_sys/health/0000/ok.txcl").write_text("EMIT .mine = 1")
    (tmp_path / "OPS/_sys/health/0000/more.txcl").write_text("EMIT .more = 1")
    tree = load_serve_tree(tmp_path)
    assert tree.has_stack("_sys/notfound") and tree.has_stack("_sys/continuation")
    health = {op.name: op.source for op in tree.rules_at("_sys/health", 0)}
    assert set(health) == {"ok", "more"} and health["ok"] == "EMIT .mine = 1"
    assert tree.user_stacks() == ["s"]


# ------------------------------------------------------------------ app in-process with extensions

@pytest.fixture
def small_ws(tmp_path: Path) -> Path:
    (tmp_path / "OPS/s/0100").mkdir(parents=True)
    (tmp_path / "OPS/s/0100/a.txcl").write_text("EMIT .a = 1")
    return tmp_path


class FakeExtension:
    def __init__(self):
        self.events: list[str] = []

    async def startup(self, state):
        self.events.append("startup")

    async def shutdown(self, state, grace):
        self.events.append("shutdown")

    async def callback(self, request, opc, state):
        body = await request.json()
        return JSONResponse({"opc": opc, "got": body})


def test_extension_callback_and_lifespan(small_ws: Path):
    ext = FakeExtension()
    state = build_state(small_ws, Settings(trace_mode="off"), extensions=[ext])
    with TestClient(create_app(state)) as c:
        r = c.post("/_txc/continuations/op/opc_9/complete", json={"status": "completed"})
        assert r.status_code == 200 and r.json() == {"opc": "opc_9", "got": {"status": "completed"}}
        assert len(r.headers["x-request-id"]) == 26
        assert c.get("/").json() == {"a": 1}
    assert ext.events == ["startup", "shutdown"]


def test_install_tree_swaps_for_new_requests(small_ws: Path):
    state = build_state(small_ws, Settings(trace_mode="off"), extensions=[])
    with TestClient(create_app(state)) as c:
        assert c.get("/").json() == {"a": 1}
        (small_ws / "OPS/s/0100/a.txcl").write_text("EMIT .a = 2")
        state.install_tree(load_serve_tree(small_ws))
        assert c.get("/").json() == {"a": 2} and state.generation == 2


def test_traces_are_written_in_the_background(small_ws: Path):
    state = build_state(small_ws, Settings(), extensions=[])
    with TestClient(create_app(state)) as c:
        rid = c.get("/").headers["x-request-id"]
        state.trace_writer.flush(10)
        record = state.store.get_trace(rid)
        assert record is not None and record.request["src"] == "http" and record.request["http_status"] == 200


def test_the_trace_records_the_status_the_answer_was_sent_with(tmp_path: Path):
    """A status the answer cannot use (201.5) is sent as 200, and the trace says 200 too;
    a usable one is recorded as sent."""
    (tmp_path / "OPS/s/0100").mkdir(parents=True)
    (tmp_path / "OPS/s/0100/a.txcl").write_text('WHEN @web.req.url.path == "/odd"\nEMIT @web.res.status = 201.5')
    (tmp_path / "OPS/s/0100/b.txcl").write_text('WHEN @web.req.url.path == "/ok"\nEMIT @web.res.status = 202')
    state = build_state(tmp_path, Settings(), extensions=[])
    with TestClient(create_app(state)) as c:
        odd, ok = (c.get(path) for path in ("/odd", "/ok"))
        assert (odd.status_code, ok.status_code) == (200, 202)
        state.trace_writer.flush(10)
        recorded = [state.store.get_trace(r.headers["x-request-id"]).request["http_status"] for r in (odd, ok)]
    assert recorded == [200, 202]


def test_a_completed_answer_is_encoded_once_and_the_trace_counts_the_bytes_sent(small_ws: Path, monkeypatch):
    """The answer is shaped during the walk: the trace's bytes_out is the body sent (private
    `_` keys left out), bytes_in the request body received, and neither is measured by
    encoding an envelope again."""
    from txcl.serve import shaping
    from txcl.trace import recorder

    (small_ws / "OPS/s/0100/a.txcl").write_text('EMIT .a = 1, .name = "Zoë", ._private = "not sent"')
    encoded = []
    real_dumps = shaping.dumps_utf8
    monkeypatch.setattr(shaping, "dumps_utf8", lambda value: encoded.append(value) or real_dumps(value))
    monkeypatch.setattr(recorder, "_json_size", lambda value: pytest.fail(f"encoded again to be measured: {value!r}"))
    state = build_state(small_ws, Settings(), extensions=[])
    with TestClient(create_app(state)) as c:
        r = c.post("/", content=b'{"order": 12}', headers={"content-type": "application/json"})
        # the JSON body is the envelope's root (merged), so the answer holds it too
        assert r.status_code == 200 and r.json() == {"order": 12, "a": 1, "name": "Zoë"}
        state.trace_writer.flush(10)
        record = state.store.get_trace(r.headers["x-request-id"])
    assert len(encoded) == 1  # the response body, once
    assert record.request["bytes_out"] == len(r.content) == len('{"order":12,"a":1,"name":"Zoë"}'.encode())
    assert record.request["bytes_in"] == len(b'{"order": 12}')
    usage = [e for e in record.events if e["kind"] == "request.usage"]
    assert usage and usage[0]["data"]["bytes_out"] == len(r.content)


def test_extension_modules_that_do_not_exist_are_skipped(small_ws: Path, monkeypatch):
    monkeypatch.setattr(extensions, "EXTENSION_MODULES", ("txcl.no_such_module_here",))
    assert extensions.load_extensions(Settings(), small_ws) == []
    calls = []

    def factory(settings, ws):
        calls.append(ws)
        return FakeExtension()

    extensions.register(factory)
    try:
        assert len(extensions.load_extensions(Settings(), small_ws)) == 1 and calls == [small_ws]
    finally:
        extensions.unregister(factory)


def test_poll_fallback_when_continuation_result_fails(small_ws: Path, monkeypatch):
    from txcl.runtime.dispatch import OpError
    from txcl.runtime.schemes import txco

    def broken(op_input, directives, ctx):
        raise OpError("store unavailable")

    monkeypatch.setitem(txco.BUILTINS, "continuation-result", broken)
    state = build_state(small_ws, Settings(trace_mode="off"), extensions=[])
    with TestClient(create_app(state)) as c:
        r = c.get("/x?_txc.continuation=rc_zz")
        assert r.status_code == 503 and r.json()["error"]["code"] == "txcl_store_unavailable"
        assert r.headers["retry-after"] == "3"


def test_informational_status_cannot_be_final():
    answer = shape_completed({"_txc": {"web": {"res": {"status": 103}}}, "a": 1})
    assert answer.status == 500 and b"txcl_bad_response_status" in answer.body


def test_tree_installed_hook_sees_reloads(small_ws: Path):
    seen = []

    class Ext:
        def tree_installed(self, state, tree):
            seen.append(len(tree))

    state = build_state(small_ws, Settings(trace_mode="off"), extensions=[Ext()])
    state.install_tree(load_serve_tree(small_ws))
    assert seen == [len(state.tree)]
    state.interp.close()


def test_loopback_detection_and_base_url():
    from txcl.serve.server import base_url, bind_socket, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")
    assert base_url("::1", 80) == "http://[::1]:80" and base_url("127.0.0.1", 8) == "http://127.0.0.1:8"
    import socket

    sock = bind_socket("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY only then
        assert sock.getsockname()[1] > 0
    finally:
        sock.close()


@pytest.mark.parametrize("http_impl, loop", [("h11", "asyncio"), ("httptools", "uvloop")])
def test_serve_works_on_the_pure_python_stack_and_the_fast_one(small_ws: Path, http_impl: str, loop: str):
    """uvicorn picks httptools and uvloop when they are installed (the `serve` extra brings
    them); the pure-Python h11 and asyncio stay a working fallback. Real HTTP on loopback."""
    import http.client
    import threading

    import uvicorn

    from txcl.serve.server import bind_socket, uvicorn_config

    state = build_state(small_ws, Settings(trace_mode="off"), extensions=[])
    config = uvicorn_config(create_app(state), grace_s=1.0, log_level="warning")
    config.http, config.loop = http_impl, loop
    server = uvicorn.Server(config)
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(2):  # twice on one kept-alive connection
            conn.request("POST", "/", body=b'{"b": 2}', headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 200 and json.loads(response.read()) == {"b": 2, "a": 1}  # body merged
        conn.close()
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.mark.parametrize("watch", [False, True])
def test_txcl_serve_freezes_the_heap_it_starts_with_unless_watching(tmp_path, monkeypatch, watch):
    """`run_server` (the process `txcl serve` runs) moves what is alive once the app is built
    out of the collector's reach, before serving; not under --watch, whose reloads leave the
    old tree to be collected. And `freeze_startup_heap` does freeze."""
    import gc
    import socket

    from txcl.serve import server

    (tmp_path / "OPS" / "s" / "0100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "0100" / "a.txcl").write_text("EMIT .a = 1\n")
    state = build_state(tmp_path, Settings(watch=watch))
    frozen: list[bool] = []
    monkeypatch.setattr(server, "freeze_startup_heap", lambda: frozen.append(True))
    monkeypatch.setattr(server.TxclServer, "run", lambda self, sockets=None: None)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        assert server.run_server(state, sock) is True
    finally:
        sock.close()
        asyncio.run(state.aclose())
    assert frozen == ([] if watch else [True])

    before = gc.get_freeze_count()
    from txcl.serve.app import freeze_startup_heap

    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()


def test_a_walk_that_never_waits_starts_no_disconnect_watch(tmp_path: Path, monkeypatch):
    """The disconnect watcher's timer is set only for a walk that waits (an op awaiting
    something); a walk of in-process rules only finishes without one, and both answer."""
    (tmp_path / "OPS/s/0100").mkdir(parents=True)
    (tmp_path / "OPS/s/0100/a.txcl").write_text('EMIT .a = 1')
    (tmp_path / "OPS/s/0200").mkdir(parents=True)
    (tmp_path / "OPS/s/0200/nap.txcl").write_text('WHEN @web.req.url.path == "/nap"\nEXEC "py://naps:nap"')
    (tmp_path / "naps.py").write_text("import asyncio\n\nasync def nap(inp, ctx):\n"
                                      "    await asyncio.sleep(0.01)\n    return {'napped': True}\n")
    state = build_state(tmp_path, Settings(trace_mode="off"), extensions=[])
    app = create_app(state)
    watches: list[str] = []
    real_call_later = asyncio.BaseEventLoop.call_later

    def counting_call_later(self, delay, callback, *args, **kwargs):
        if getattr(callback, "__name__", "") == "start_watch":
            watches.append(callback.__name__)
        return real_call_later(self, delay, callback, *args, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "call_later", counting_call_later)

    async def get(path: str) -> bytes:
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "root_path": "", "headers": [(b"host", b"127.0.0.1:8000")],
                 "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}
        await app(scope, receive, send)
        assert sent[0]["status"] == 200
        return sent[1]["body"]

    async def both() -> tuple[bytes, int, bytes, int]:
        quick = await get("/")
        after_quick = len(watches)
        napped = await get("/nap")
        return quick, after_quick, napped, len(watches)

    try:
        quick, after_quick, napped, after_nap = asyncio.run(both())
    finally:
        state.interp.close()
        state.store.close()
    assert quick == b'{"a":1}' and after_quick == 0
    assert napped == b'{"a":1,"napped":true}' and after_nap == 1
