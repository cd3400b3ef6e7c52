"""The egress policy: what ops, async dispatches and cancel calls may reach. The refusals are
checked on the address a connection would actually use, so the suite covers literal
addresses in every spelling, names that resolve to a refused address, redirects, and each
kind of outgoing call (http op, mcp+ op, worker dispatch, cancel call)."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from txcl.continuations.cancellations import verdict
from txcl.continuations.worker_client import DispatchClient, post_dispatch
from txcl.egress import EgressDenied, EgressPolicy, guarded_client
from txcl.runtime.config import ConfigError, load_settings
from txcl.runtime.interpreter import Completed
from txcl.store.records import Dispatch

METADATA_SPELLINGS = [
    "169.254.169.254",            # the cloud metadata address
    "[fe80::1]",                  # IPv6 link-local
    "[fd00:ec2::254]",            # AWS metadata over IPv6
    "[::ffff:169.254.169.254]",   # IPv4-mapped IPv6
    "[::ffff:a9fe:a9fe]",         # the same, in hex
    "2852039166",                 # decimal IPv4
    "0251.0376.0251.0376",        # octal IPv4
    "0xa9fea9fe",                 # hex IPv4
    "169.254.1",                  # short form
]


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_metadata_and_link_local_are_refused_by_default_in_every_spelling(host):
    reason = EgressPolicy().literal_refusal(host)
    assert reason == "link-local and cloud metadata addresses are refused"


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "10.1.2.3", "192.168.0.9", "93.184.216.34", "example.com"])
def test_the_default_lets_loopback_private_and_public_addresses_through(host):
    assert EgressPolicy().literal_refusal(host) is None


def test_private_and_loopback_ranges_are_refusable_by_setting():
    private = EgressPolicy.build(private="deny")
    for host in ("10.1.2.3", "172.20.0.1", "192.168.0.9", "100.64.0.1", "[fd12::1]", "[::ffff:10.0.0.1]"):
        assert private.literal_refusal(host) == "private addresses are refused (egress private = deny)", host
    assert private.literal_refusal("127.0.0.1") is None
    loopback = EgressPolicy.build(loopback="deny")
    for host in ("127.0.0.1", "127.9.9.9", "[::1]", "[::ffff:127.0.0.1]", "2130706433"):
        assert loopback.literal_refusal(host) == "loopback addresses are refused (egress loopback = deny)", host


def test_allow_and_deny_lists_by_network_and_host_pattern():
    policy = EgressPolicy.build(allow=["127.0.0.1", "*.corp.example", "169.254.170.2"],
                                deny=["203.0.113.0/24", "bad.example", "*.evil.example", "db.corp.example"],
                                loopback="deny")
    assert policy.literal_refusal("127.0.0.1") is None  # allowed through the loopback refusal
    assert policy.literal_refusal("127.0.0.2") is not None
    assert policy.literal_refusal("169.254.170.2") is None  # an explicit allow opens even link-local
    assert policy.literal_refusal("203.0.113.7") == "the address is on the egress deny list"
    assert policy.literal_refusal("bad.example") == "the host is on the egress deny list"
    assert policy.literal_refusal("x.evil.example") == "the host is on the egress deny list"
    assert policy.literal_refusal("DB.corp.example.") == "the host is on the egress deny list"  # deny wins
    assert policy.host_verdict("api.corp.example") == "allow"


@pytest.mark.parametrize("entry", ["", "http://x", "a b", "10.0.0.0/33"])
def test_a_bad_list_entry_is_an_error_naming_it(entry):
    with pytest.raises(ValueError, match="egress allow"):
        EgressPolicy.build(allow=[entry])


def test_the_egress_table_of_txcl_toml_and_the_environment(tmp_path):
    (tmp_path / "txcl.toml").write_text('[egress]\nallow = ["127.0.0.1", "*.corp.example"]\nprivate = "deny"\n')
    settings = load_settings(tmp_path, env={"TXCL_EGRESS_LOOPBACK": "deny"})
    assert settings.egress_allow == ("127.0.0.1", "*.corp.example") and settings.egress_private == "deny"
    assert settings.egress_loopback == "deny" and settings.egress_deny == ()
    policy = EgressPolicy.from_settings(settings)
    assert policy.literal_refusal("10.0.0.1") and policy.literal_refusal("127.0.0.1") is None
    (tmp_path / "txcl.toml").write_text('[egress]\nalow = ["x"]\n')
    with pytest.raises(ConfigError, match="unknown setting 'alow' in \\[egress\\]"):
        load_settings(tmp_path, env={})
    (tmp_path / "txcl.toml").write_text('[egress]\nprivate = "maybe"\n')
    with pytest.raises(ConfigError, match="egress-private .*must be allow or deny"):
        load_settings(tmp_path, env={})
    (tmp_path / "txcl.toml").write_text('[egress]\ndeny = ["http://x"]\n')
    with pytest.raises(ConfigError, match="egress-deny"):
        load_settings(tmp_path, env={})


# ------------------------------------------------------------------ against real connections

class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"reached": true}'
        self.send_response(202 if self.path == "/job" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _step(store, outcome, name="call"):
    return {s["name"]: s for s in store.get_trace(outcome.rid).steps}[name]


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://2852039166/",
                                 "http://[::ffff:169.254.169.254]/", "https://[fe80::1]:8443/x"])
def test_an_http_op_to_a_metadata_address_is_an_op_error_with_the_code(workspace, run_tree, url):
    ws = workspace({"OPS/s/0100/call.txcl": f'EXEC "{url}"\nEMIT .never = true',
                    "OPS/s/0200/next.txcl": "EMIT .next = true"})
    started = time.monotonic()
    outcome, store = run_tree(ws, {})
    assert time.monotonic() - started < 4  # refused before any connection, not timed out
    assert isinstance(outcome, Completed) and outcome.envelope["next"] is True and "never" not in outcome.envelope
    step = _step(store, outcome)
    assert step["status"] == "error" and step["code"] == "txcl_egress_denied"
    assert step["error"].startswith("txcl_egress_denied: rule s/call: egress to ")
    assert "link-local and cloud metadata addresses are refused" in step["error"]


def test_a_host_name_resolving_to_a_refused_address_is_refused(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": f'EXEC "http://localhost:{server}/json"'})
    outcome, store = run_tree(ws, {}, egress_loopback="deny")
    step = _step(store, outcome)
    assert step["code"] == "txcl_egress_denied" and "egress to localhost (" in step["error"]
    assert "loopback addresses are refused" in step["error"] and "reached" not in outcome.envelope


def test_a_loopback_server_works_through_an_explicit_allow(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": f'EXEC "http://127.0.0.1:{server}/json"'})
    outcome, _ = run_tree(ws, {}, egress_loopback="deny", egress_allow=("127.0.0.1",))
    assert outcome.envelope["reached"] is True
    outcome, store = run_tree(ws, {}, egress_loopback="deny")
    assert _step(store, outcome)["code"] == "txcl_egress_denied"


def test_every_redirect_hop_is_checked(server):
    async def follow():
        async with guarded_client(EgressPolicy(), follow_redirects=True) as client:
            await client.post(f"http://127.0.0.1:{server}/redirect", content=b"{}")

    with pytest.raises(EgressDenied, match="169.254.169.254"):
        asyncio.run(follow())


def test_an_mcp_op_to_a_metadata_address_is_refused(workspace, run_tree):
    pytest.importorskip("mcp")
    ws = workspace({"OPS/s/0100/call.txcl": 'EXEC "mcp+http://169.254.169.254/mcp#lookup"'})
    outcome, store = run_tree(ws, {})
    step = _step(store, outcome)
    assert step["code"] == "txcl_egress_denied" and step["error"].startswith("txcl_egress_denied: rule s/call:")


def _dispatch(url: str) -> Dispatch:
    return Dispatch(opc="opc-1", token="tok", run_id="run-1", unit_id="u-1", op_name="score", op_stack="shop",
                    stage=None, exec_target=url, directives={}, item_index=0, item_count=1, kind="single",
                    input={}, deadline_ms=None, attempts=0)


@pytest.mark.parametrize("lean", [True, False])
def test_an_async_dispatch_is_checked_on_both_client_paths(server, lean):
    """The dispatch client's own keep-alive connections (plain http) and its httpx fallback."""
    async def send(policy: EgressPolicy, url: str):
        client = DispatchClient(policy=policy)
        try:
            target = client if lean else client.httpx_client()
            return await post_dispatch(target, _dispatch(url), base_url="http://127.0.0.1:1", ack_timeout_ms=3000)
        finally:
            await client.aclose()

    refused = asyncio.run(send(EgressPolicy(), "http://169.254.169.254/job"))
    assert not refused.ok and not refused.retryable
    assert refused.error.startswith("txcl_egress_denied: rule shop/score: egress to 169.254.169.254 refused")
    local = f"http://127.0.0.1:{server}/job"
    refused = asyncio.run(send(EgressPolicy.build(loopback="deny"), local))
    assert not refused.ok and "loopback addresses are refused" in refused.error
    acked = asyncio.run(send(EgressPolicy.build(loopback="deny", allow=["127.0.0.0/8"]), local))
    assert acked.ok, acked.error


def test_a_refused_cancel_call_is_not_tried_again():
    assert verdict(None, "txcl_egress_denied: egress to 169.254.169.254 refused: …") == (False, False)
    assert verdict(None, "connection refused") == (False, True)


def test_an_unresolvable_name_is_an_ordinary_connection_error():
    async def go():
        async with guarded_client(EgressPolicy()) as client:
            await client.get("http://no-such-host.invalid/")

    with pytest.raises(httpx.ConnectError, match="cannot resolve no-such-host.invalid"):
        asyncio.run(go())


def test_a_cancel_call_to_a_refused_address_is_refused_with_the_code():
    from txcl.continuations.cancellations import post_cancel
    from txcl.store.records import CancelCall

    async def go():
        async with guarded_client(EgressPolicy()) as client:
            return await post_cancel(client, CancelCall(opc="o", run_id="r", url="http://[::ffff:169.254.169.254]/c",
                                                        token="secret-token", reason="cancelled", attempts=0))

    status, error = asyncio.run(go())
    assert status is None and error.startswith("txcl_egress_denied: egress to ::ffff:169.254.169.254")
    assert "secret-token" not in error and verdict(status, error) == (False, False)
