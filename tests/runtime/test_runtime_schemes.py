"""`txco://` builtins, `py://` ops and mocks."""

from __future__ import annotations

import base64
import hashlib
import hmac

from txcl.runtime.interpreter import Completed


def _steps(store, outcome):
    return {s["name"]: s for s in store.get_trace(outcome.rid).steps}


def test_kv_round_trip_persists_in_store(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/set.txcl": 'WITH key = "cart:1", value = .items, into = "set"\nEXEC "txco://kv/set"',
        "OPS/s/0200/get.txcl": 'WITH key = "cart:1", into = "got"\nEXEC "txco://kv/get"',
        "OPS/s/0300/incr.txcl": 'WITH key = "hits", by = 5, ns = "stats", into = "hits"\nEXEC "txco://kv/incr"',
    })
    env = run_tree(ws, {"items": [1, 2]})[0].envelope
    assert env["set"] == {"key": "cart:1", "version": 1}
    assert env["got"] == {"key": "cart:1", "found": True, "value": [1, 2], "version": 1}
    assert env["hits"] == {"key": "hits", "value": 5, "version": 1}
    # a second request (new interpreter, same database file) sees the stored values
    env = run_tree(ws, {"items": [3]})[0].envelope
    assert env["got"]["value"] == [3] and env["got"]["version"] == 2
    assert env["hits"]["value"] == 10


def test_kv_cas_delete_list(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'WITH key = "k", value = 1, expect_version = 0, into = "c1"\nEXEC "txco://kv/cas"',
        "OPS/s/0200/a.txcl": 'WITH key = "k", value = 2, expect_version = 0, into = "c2"\nEXEC "txco://kv/cas"',
        "OPS/s/0300/a.txcl": 'WITH key = "k2", value = "v", into = "s"\nEXEC "txco://kv/set"',
        "OPS/s/0400/a.txcl": 'WITH prefix = "k", limit = 1, into = "l"\nEXEC "txco://kv/list"',
        "OPS/s/0500/a.txcl": 'WITH key = "k", into = "d"\nEXEC "txco://kv/delete"',
        "OPS/s/0600/a.txcl": 'WITH key = "k", into = "g"\nEXEC "txco://kv/get"',
    })
    env = run_tree(ws, {})[0].envelope
    assert env["c1"] == {"key": "k", "ok": True, "version": 1, "value": 1}
    assert env["c2"] == {"key": "k", "ok": False, "version": 1, "value": 1}
    assert env["l"] == {"items": [{"key": "k", "value": 1, "version": 1}], "truncated": True}
    assert env["d"] == {"key": "k", "deleted": True}
    assert env["g"]["found"] is False and env["g"]["value"] is None


def test_kv_incr_on_non_integer_fails_op(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'WITH key = "t", value = "text"\nEXEC "txco://kv/set"',
        "OPS/s/0200/b.txcl": 'WITH key = "t"\nEXEC "txco://kv/incr"',
    })
    outcome, store = run_tree(ws, {})
    assert _steps(store, outcome)["b"]["status"] == "error"


def test_copy_builtin(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": 'WITH from = "a.b", to = "c.d"\nEXEC "txco://copy"'})
    env = run_tree(ws, {"a": {"b": [1]}})[0].envelope
    assert env["c"] == {"d": [1]}


def test_copy_builtin_path_forms_and_errors(workspace, run_tree):
    """`from`/`to` may start with `.` or `@` (for `_txc.`); an empty segment is an op error,
    the second time as the first (the parsed paths are cached)."""
    ws = workspace({
        "OPS/s/0100/a.txcl": 'WITH from = " .a.b ", to = "@kept.v"\nEXEC "txco://copy"',
        "OPS/s/0200/b.txcl": 'WITH from = "a..b", to = "x"\nEXEC "txco://copy"',
    })
    for _ in range(2):
        outcome, store = run_tree(ws, {"a": {"b": 7}})
        assert outcome.envelope["_txc"]["kept"] == {"v": 7}
        step = _steps(store, outcome)["b"]
        assert step["status"] == "error" and "WITH from is not a valid path" in step["error"]


def test_hmac_sign_and_verify(workspace, run_tree, monkeypatch):
    monkeypatch.setenv("TXCL_SECRET_K", "s3cret")
    ws = workspace({
        "OPS/s/0100/sign.txcl": 'WITH message = .msg, key_env = "TXCL_SECRET_K", encoding = "base64"\nEXEC "txco://hmac-sign"',
        "OPS/s/0200/verify.txcl": ('WITH message = .msg, key = "s3cret", encoding = "base64", '
                                   'signature = @computed.hmac\nEXEC "txco://hmac-verify"'),
    })
    env = run_tree(ws, {"msg": "hello"})[0].envelope
    expected = base64.b64encode(hmac.new(b"s3cret", b"hello", hashlib.sha256).digest()).decode()
    assert env["_txc"]["computed"]["hmac"] == expected
    assert env["_txc"]["computed"]["hmac_valid"] is True


def test_web_render_sets_response_and_halts(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'WITH status = 201, body = "<p>hi</p>", headers.x-a = "1"\nEXEC "txco://web-render"',
        "OPS/s/0200/b.txcl": "EMIT .b = true",
    })
    outcome, _ = run_tree(ws, {})
    res = outcome.envelope["_txc"]["web"]["res"]
    assert outcome.halted and "b" not in outcome.envelope
    assert res["status"] == 201 and base64.b64decode(res["body"]) == b"<p>hi</p>"
    assert res["headers"]["content-type"] == ["text/html; charset=utf-8"] and res["headers"]["x-a"] == ["1"]


def test_unknown_builtin_is_op_error(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": 'EXEC "txco://nope"'})
    outcome, store = run_tree(ws, {})
    assert _steps(store, outcome)["a"]["error"] == "op not found: txco://nope"


def test_mock_builtin_and_mock_globs(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'EXEC "txco://mock"',
        "OPS/s/0100/mock-response.json": '{"mocked": "a", "_txc": {"rid": "x"}}',
        "OPS/s/0200/sub/b.txcl": 'EXEC "py://mod_never_imported_elsewhere:fn"',
        "OPS/s/0200/sub/mock-response.json": '{"mocked_b": true}',
        "OPS/s/0300/c.txcl": 'EXEC "txco://mock"',
        "mod_never_imported_elsewhere.py": "def fn(inp, ctx):\n    return {'real_b': True}\n",
    })
    outcome, store = run_tree(ws, {})
    env = outcome.envelope
    assert env["mocked"] == "a" and env["_txc"]["rid"] == outcome.rid  # mock output is untrusted
    assert env["real_b"] is True
    steps = _steps(store, outcome)
    assert steps["c"]["error"] == "txco://mock: no mock-response.json for s/300/c"
    outcome, store = run_tree(ws, {}, mocks=["s/*/sub_*", "!s/100/*"])
    assert outcome.envelope["mocked_b"] is True and "real_b" not in outcome.envelope
    assert _steps(store, outcome)["sub_b"]["transport"] == "mock"


def test_py_async_function_and_context(workspace, run_tree):
    ws = workspace({
        "mod_async_ctx.py": """
            async def fn(inp, ctx):
                got = ctx.kv.set("k", {"v": 1})
                return {"ctx": {"rid": ctx.rid, "name": ctx.name, "dir": ctx.directives, "kv": got}}
        """,
        "OPS/s/0100/a.txcl": 'WITH flavour.name = "x"\nEXEC "py://mod_async_ctx:fn"',
    })
    outcome, _ = run_tree(ws, {})
    ctx = outcome.envelope["ctx"]
    assert ctx == {"rid": outcome.rid, "name": "a", "dir": {"flavour": {"name": "x"}}, "kv": {"key": "k", "version": 1}}


def test_py_result_not_serialisable(workspace, run_tree):
    ws = workspace({
        "mod_bad_result.py": "def fn(inp, ctx):\n    return {'x': object()}\n",
        "OPS/s/0100/a.txcl": 'EXEC "py://mod_bad_result:fn"',
    })
    outcome, store = run_tree(ws, {})
    assert isinstance(outcome, Completed) and "x" not in outcome.envelope
    assert "not JSON-serialisable" in _steps(store, outcome)["a"]["error"]


def test_py_input_is_a_copy(workspace, run_tree):
    ws = workspace({
        "mod_mutates.py": "def fn(inp, ctx):\n    inp['list'].append(99)\n    return None\n",
        "OPS/s/0100/a.txcl": 'EXEC "py://mod_mutates:fn"',
    })
    env = run_tree(ws, {"list": [1]})[0].envelope
    assert env["list"] == [1]


def _web_env(path: str, method: str = "GET", inm: str | None = None) -> dict:
    headers = {"if-none-match": [inm]} if inm else {}
    return {"_txc": {"web": {"req": {"method": method, "url": {"path": path, "full": f"http://x{path}"},
                                     "headers": headers}}}}


def test_static_files(workspace):
    import asyncio

    from txcl.ops.tree import load_ops
    from txcl.runtime.interpreter import Interpreter

    ws = workspace({
        "OPS/site/0100/files.txcl": 'WITH prefix = "/static/"\nEXEC "txco://static"',
        "OPS/site/0200/fallback.txcl": "EMIT .fell_through = true",
        "OPS/site/FILES/app.css": "body { color: red; }",
        "OPS/site/FILES/_private/x.txt": "secret",
        "FILES/docs/index.html": "<h1>docs</h1>",
    })
    interp = Interpreter(load_ops(ws))

    def run(env, src="http"):
        return asyncio.run(interp.run(env, "site", src=src))

    hit = run(_web_env("/static/app.css"))
    res = hit.envelope["_txc"]["web"]["res"]
    assert hit.halted and res["status"] == 200
    assert base64.b64decode(res["body"]) == b"body { color: red; }\n"
    assert res["headers"]["content-type"] == ["text/css; charset=utf-8"]
    etag = res["headers"]["etag"][0]
    assert etag == '"' + hashlib.sha256(b"body { color: red; }\n").hexdigest() + '"'
    again = run(_web_env("/static/app.css", inm=etag))
    assert again.envelope["_txc"]["web"]["res"]["status"] == 304
    index = run(_web_env("/static/docs/"))  # workspace-wide FILES/, directory index
    assert base64.b64decode(index.envelope["_txc"]["web"]["res"]["body"]) == b"<h1>docs</h1>\n"
    for miss in (_web_env("/static/_private/x.txt"), _web_env("/static/../OPS/site/0100/files.txcl"),
                 _web_env("/static/app.css", method="POST"), _web_env("/other/app.css")):
        out = run(miss)
        assert out.envelope.get("fell_through") is True and "res" not in out.envelope["_txc"].get("web", {})
    cli = run(_web_env("/static/app.css"), src="cli")
    assert cli.envelope.get("fell_through") is True
    interp.close()


def test_request_deadline(workspace, run_tree):
    ws = workspace({
        "mod_deadline.py": "import asyncio\nasync def fn(inp, ctx):\n    await asyncio.sleep(5)\n",
        "OPS/s/0100/a.txcl": 'EXEC "py://mod_deadline:fn"',
    })
    outcome, store = run_tree(ws, {}, request_deadline=50)
    assert outcome.status == "failed" and outcome.http_status == 503
    assert outcome.payload["error"]["code"] == "txcl_request_deadline"
    trace = store.get_trace(outcome.rid)
    assert trace.request["status"] == "deadline"
    assert trace.steps[0]["status"] == "cancelled"


def test_async_mode_without_continuations_runs_sync(workspace, run_tree):
    ws = workspace({
        "mod_mode.py": "def fn(inp, ctx):\n    return {'ran': ctx.directives.get('mode')}\n",
        "OPS/s/0100/a.txcl": 'WITH mode = .m\nEXEC "py://mod_mode:fn"',
    })
    outcome, _ = run_tree(ws, {"m": "async"})
    assert outcome.envelope["ran"] == "async"


def test_a_builtin_that_waits_is_awaited_under_its_timeout(workspace, run_tree, monkeypatch):
    """Builtins are called directly; one that hands back an awaitable is awaited, and the
    op's timeout ends a wait that outlasts it (a builtin that never waits cannot overrun)."""
    import asyncio

    from txcl.runtime.schemes import txco

    async def _nap(op_input, directives, ctx):
        await asyncio.sleep(float(directives.get("seconds", 0)))
        return {"slept": directives.get("seconds")}

    monkeypatch.setitem(txco.BUILTINS, "test-nap", _nap)
    ws = workspace({
        "OPS/s/0100/quick.txcl": 'WITH seconds = 0.01, into = "quick"\nEXEC "txco://test-nap"',
        "OPS/s/0200/slow.txcl": 'WITH seconds = 5, timeout = "100ms", into = "slow"\nEXEC "txco://test-nap"',
    })
    outcome, store = run_tree(ws, {})
    assert isinstance(outcome, Completed)
    assert outcome.envelope["quick"] == {"slept": 0.01}
    assert "slow" not in outcome.envelope
    slow = _steps(store, outcome)["slow"]
    assert slow["status"] == "timeout" and slow["error"] == "timeout after 100ms"
    assert slow["duration_ms"] < 2000


def test_an_op_context_is_read_only_and_owns_its_fixtures():
    """A builtin or `py://` function reads its call's context but cannot change it; contexts
    made without fixtures never share one dict."""
    import logging

    import pytest

    from txcl.runtime.dispatch import OpContext

    args = ("r1", "s", 100, "op", {"timeout": "1s"}, 5.0, logging.getLogger("t"), None)
    ctx, other = OpContext(*args), OpContext(*args, src="api", web_req={"method": "GET"})
    assert (ctx.rid, ctx.scope, ctx.name, ctx.src, ctx.op_stack, ctx.workspace) == ("r1", 100, "op", "cli", "", None)
    assert other.src == "api" and other.web_req == {"method": "GET"} and other.directives["timeout"] == "1s"
    with pytest.raises(AttributeError):
        ctx.name = "forged"
    assert ctx.fixtures == {} and ctx.fixtures is not other.fixtures
    assert repr(ctx).startswith("OpContext(rid='r1', stack='s', scope=100, name='op'")
