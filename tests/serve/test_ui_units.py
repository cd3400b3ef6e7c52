"""The dashboard's parts without a browser: who may see it, the envelope diff of full traces,
the playground's evaluation, and `txcl playground` as a command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


from txcl.trace.recorder import envelope_diff
from txcl.ui import access
from txcl.ui.playground import evaluate_rule

TOKEN = "a-long-enough-admin-token"


def _scope(client: str, headers: dict[str, str] | None = None) -> dict:
    return {"type": "http", "client": (client, 5555),
            "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}


@pytest.mark.parametrize("client, headers, token, verdict", [
    ("127.0.0.1", {}, None, "ok"),
    ("::1", {}, None, "ok"),
    ("10.1.2.3", {}, None, "loopback-only"),
    ("10.1.2.3", {"Authorization": f"Bearer {TOKEN}"}, None, "loopback-only"),  # no token set: loopback only
    ("127.0.0.1", {}, TOKEN, "login"),  # with a token, loopback is not enough
    ("10.1.2.3", {"Authorization": f"Bearer {TOKEN}"}, TOKEN, "ok"),
    ("10.1.2.3", {"Authorization": f"bearer {TOKEN}"}, TOKEN, "ok"),
    ("10.1.2.3", {"Authorization": "Bearer a-long-enough-admin-tokeX"}, TOKEN, "login"),
    ("10.1.2.3", {"Cookie": f"other=1; {access.COOKIE}={access.session_value(TOKEN)}"}, TOKEN, "ok"),
    ("10.1.2.3", {"Cookie": f"{access.COOKIE}={TOKEN}"}, TOKEN, "login"),  # the token itself is not a session
    ("10.1.2.3", {"Cookie": f"{access.COOKIE}={access.session_value('another-token-entirely')}"}, TOKEN, "login"),
])
def test_who_may_see_the_dashboard(client, headers, token, verdict):
    assert access.decide(_scope(client, headers), token) == verdict


def test_the_session_cookie_is_strict_and_never_the_token():
    header = access.cookie_header(TOKEN, secure=True)
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Secure" in header
    assert "Path=/_txc/ui" in header and TOKEN not in header


def test_a_client_that_is_not_on_loopback_gets_403_and_no_data(tmp_path):
    import httpx

    from txcl.runtime.config import Settings
    from txcl.ui.app import Dashboard

    dashboard = Dashboard(settings=Settings(ui=True), tree=None)

    async def go(client: tuple[str, int]) -> httpx.Response:
        transport = httpx.ASGITransport(app=dashboard, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            return await http.get("/_txc/ui/playground")

    import asyncio

    far = asyncio.run(go(("192.0.2.7", 1234)))
    assert far.status_code == 403 and "Playground" not in far.text
    near = asyncio.run(go(("127.0.0.1", 1234)))
    assert near.status_code == 200 and "Playground" in near.text


def test_admin_token_must_be_long_enough():
    from txcl.runtime.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match="at least 16 characters"):
        load_settings(None, {"admin_token": "short"}, env={})
    settings = load_settings(None, {"admin_token": TOKEN}, env={})
    assert TOKEN not in repr(settings)


def test_envelope_diff_reports_added_changed_and_removed_paths():
    before = {"a": 1, "order": {"total": 10, "lines": [1]}, "gone": True, "same": {"x": 1}}
    after = {"a": 1, "order": {"total": 12, "lines": [1, 2], "id": "A"}, "same": {"x": 1}, "new": None}
    assert envelope_diff(before, after) == [
        {"op": "removed", "path": ".gone", "before": True},
        {"op": "added", "path": ".new", "after": None},
        {"op": "added", "path": ".order.id", "after": "A"},
        {"op": "changed", "path": ".order.lines", "before": [1], "after": [1, 2]},
        {"op": "changed", "path": ".order.total", "before": 10, "after": 12},
    ]
    assert envelope_diff({"a": 1}, {"a": 1.0}) == [{"op": "changed", "path": ".a", "before": 1, "after": 1.0}]
    # subtrees Python calls equal are still told apart where their JSON differs
    assert envelope_diff({"o": {"n": 1, "f": True, "k": [1]}}, {"o": {"n": 1.0, "f": 1, "k": [1]}}) == [
        {"op": "changed", "path": ".o.f", "before": True, "after": 1},
        {"op": "changed", "path": ".o.n", "before": 1, "after": 1.0}]


def test_full_traces_keep_each_scope_diff_redacted(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'EMIT .total = 5, .authorization = "Bearer xyz", .card = "4111"',
        "OPS/s/0200/b.txcl": 'WITH redact = ".card"\nEMIT .total = 6, @delete = ".gone"',
    })
    outcome, store = run_tree(ws, {"gone": 1}, trace_mode="full")
    diffs = {e["data"]["stage"]: e["data"]["changes"] for e in store.get_trace(outcome.rid).events
             if e["kind"] == "stage.diff"}
    first = {c["path"]: c for c in diffs["s/100"]}
    assert first[".total"] == {"op": "added", "path": ".total", "after": 5}
    assert first[".authorization"]["after"] == "[redacted]"  # a secret key, always masked
    assert first[".card"]["after"] == "[redacted]"  # the stack's WITH redact applies to the diff
    assert {(c["op"], c["path"]) for c in diffs["s/200"]} == {("changed", ".total"), ("removed", ".gone")}
    # a key that is always masked is masked whatever its case, with no WITH redact anywhere
    secret = workspace({"OPS/s/0100/a.txcl": 'EMIT .hdr.Cookie = "sid=2"', "OPS/s/0200/b.txcl": "EMIT .n = 2"})
    outcome, store = run_tree(secret, {"hdr": {"x": 1}}, trace_mode="full")
    changes = [c for e in store.get_trace(outcome.rid).events if e["kind"] == "stage.diff"
               for c in e["data"]["changes"]]
    assert {"op": "added", "path": ".hdr.Cookie", "after": "[redacted]"} in changes
    assert "sid=2" not in json.dumps(changes)
    outcome, store = run_tree(ws, {"gone": 1}, trace_mode="summary")
    assert not [e for e in store.get_trace(outcome.rid).events if e["kind"] == "stage.diff"]


def test_playground_rule_evaluation():
    answer = evaluate_rule('WHEN .a > 1 && (.b == "x" || !.c == true)\nSELECT .a\nEMIT .seen = true',
                           '{"a": 2, "b": "y", "c": false}', '{"ok": 1}')
    assert answer["matched"] is True
    texts = {c["text"]: c["value"] for c in answer["conditions"]}
    assert texts[".a > 1"] is True and texts['.b == "x"'] is False and texts["!.c == true"] is True
    assert answer["op_input"] == {"a": 2}
    assert answer["output"] == {"ok": 1, "a": 2, "seen": True}  # SELECT copies into the output
    assert answer["envelope"]["seen"] is True and answer["envelope"]["ok"] == 1
    assert answer["diagnostics"] == [] and 'class="tx-k"' in answer["highlighted"]


def test_playground_reports_diagnostics_and_bad_json_without_raising():
    answer = evaluate_rule("WHEN .a == 1 .b == 2", "{", "")
    assert [d["code"] for d in answer["diagnostics"]] == ["TX010"]
    assert answer["diagnostics"][0]["line"] == 1
    assert answer["input_errors"] and answer["input_errors"][0].startswith("envelope:")
    assert "matched" not in answer
    answer = evaluate_rule("EMIT .x = 1", "[1, 2]", "")
    assert answer["input_errors"] == ["envelope: a JSON object is needed"]


def test_txcl_playground_serves_the_playground_alone(tmp_path):
    (tmp_path / "OPS/s/0100").mkdir(parents=True)
    (tmp_path / "OPS/s/0100/a.txcl").write_text('EXEC "https://pricing.example.net/x"\nEMIT .done = true\n')
    txcl = str(Path(sys.executable).parent / "txcl")
    proc = subprocess.Popen([txcl, "playground", str(tmp_path), "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+)", line).group(1)
        for _ in range(100):  # the line comes as the server starts
            try:
                with urllib.request.urlopen(url + "/", timeout=10) as resp:  # / leads to the playground
                    page = resp.read().decode()
                break
            except urllib.error.URLError:
                time.sleep(0.1)
        assert "Playground" in page
        req = urllib.request.Request(url + "/_txc/ui/playground/stack", method="POST",
                                     data=json.dumps({"stack": "s", "envelope": '{"n": 1}'}).encode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            data = json.loads(resp.read())
        assert data["status"] == "completed" and data["envelope"]["done"] is True
        assert data["mocked_calls"] == ["https://pricing.example.net/x"]  # answered {}, never sent
        with urllib.request.urlopen(url + "/_txc/ui/", timeout=10) as resp:  # no store: no runs pages
            assert resp.url.endswith("/_txc/ui/playground")
    finally:
        proc.terminate()
        proc.wait(10)


def _request(url: str, path: str, host: str | None, method: str = "GET", data: bytes | None = None,
             headers: dict | None = None) -> tuple[int, str]:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    all_headers = {"X-Txcl-UI": "1", "Content-Type": "application/json", **(headers or {})}
    if host is not None:
        all_headers["Host"] = host
    conn.request(method, path, body=data, headers=all_headers)
    response = conn.getresponse()
    body = response.read().decode("utf-8", "replace")
    conn.close()
    return response.status, body


PAGES = [("GET", "/_txc/ui/", None), ("GET", "/_txc/ui/runs/run_01M951964H4FCNH28J6P3MJX20", None),
         ("GET", "/_txc/ui/traces/01M951964H4FCNH28J6P3MJX20", None), ("GET", "/_txc/ui/playground", None),
         ("GET", "/_txc/ui/stacks", None), ("GET", "/_txc/ui/playground/paths?stack=s", None),
         ("POST", "/_txc/ui/runs/run_01M951964H4FCNH28J6P3MJX20/cancel", b""),
         ("POST", "/_txc/ui/runs/run_01M951964H4FCNH28J6P3MJX20/retry", b""),
         ("POST", "/_txc/ui/playground/rule", b'{"rule": "EMIT .a = 1", "envelope": "{}"}'),
         ("POST", "/_txc/ui/playground/stack", b'{"stack": "s", "envelope": "{}"}')]


def test_a_host_that_is_not_this_server_is_refused_421(workspace, serve):
    """DNS rebinding: a page on evil.example that resolves to 127.0.0.1 sends Host: evil.example;
    without --admin-token every page and action answers 421 and shows nothing."""
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    server = serve(ws, "--ui")
    port = server.url.rsplit(":", 1)[1]
    for method, path, data in PAGES:
        status, body = _request(server.url, path, f"evil.example:{port}", method, data)
        assert status == 421, (path, status)
        assert "txcl_misdirected_request" in body and "Playground" not in body
    for host in (None, f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        status, _ = _request(server.url, "/_txc/ui/playground", host)
        assert status == 200, host
    status, _ = _request(server.url, "/_txc/ui/logout", None)  # a link cannot log anyone out
    assert status == 405
    allowed = serve(ws, "--ui", "--ui-allowed-hosts", "txcl.internal")
    assert _request(allowed.url, "/_txc/ui/playground", "txcl.internal")[0] == 200
    assert _request(allowed.url, "/_txc/ui/playground", "evil.example")[0] == 421
    token = serve(ws, "--ui", "--admin-token", TOKEN)  # the token protects: any name, then the login form
    assert _request(token.url, "/_txc/ui/", "dash.example.com")[0] == 401


def test_the_playground_alone_refuses_another_host(tmp_path):
    (tmp_path / "OPS/s/0100").mkdir(parents=True)
    (tmp_path / "OPS/s/0100/a.txcl").write_text('EXEC "https://pricing.example.net/x"\n')
    txcl = str(Path(sys.executable).parent / "txcl")
    proc = subprocess.Popen([txcl, "playground", str(tmp_path), "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"(http://127\.0\.0\.1:\d+)", proc.stderr.readline()).group(1)
        for _ in range(100):
            try:
                status, _ = _request(url, "/_txc/ui/playground", None)
                break
            except OSError:
                time.sleep(0.1)
        assert status == 200
        status, body = _request(url, "/_txc/ui/playground/stack", "rebound.example", "POST",
                                b'{"stack": "s", "envelope": "{}"}')
        assert status == 421 and "pricing.example.net" not in body
    finally:
        proc.terminate()
        proc.wait(10)


def test_debug_this_request_says_why_a_request_cannot_be_walked_again():
    from types import SimpleNamespace

    from txcl.ui.views import debug_launch

    summary_only = SimpleNamespace(request={"rid": "r1", "status": "completed", "in_json": None})
    found = debug_launch(summary_only)
    assert "recorded without op answers" in found["problem"] and '"trace": "r1"' in found["launch"]
    durable = SimpleNamespace(request={"rid": "r2", "status": "completed", "in_json": "{}", "run_id": "run-1"})
    assert "durable run" in debug_launch(durable)["problem"]
    recorded = SimpleNamespace(request={"rid": "r3", "status": "completed", "in_json": "{}"})
    assert debug_launch(recorded)["problem"] is None
