"""Secrets in sync http(s) ops, against a real server that echoes what it received: the value
goes into the request (header or body field), never into the op's input view, and an answer
that echoes it back carries `[secret]` instead."""

from __future__ import annotations

import json

import pytest
from testtools import EchoServer

from txcl.secrets import SecretProvider, mask

SECRET = "sk_test_4f9a1c77e0b2"


@pytest.fixture(scope="module")
def echo_server():
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def echo(echo_server):
    echo_server.received.clear()
    return echo_server.url


def _step(store, outcome, name="call"):
    return {s["name"]: s for s in store.get_trace(outcome.rid).steps}[name]


def test_a_header_and_a_body_field_from_the_environment(workspace, run_tree, echo, monkeypatch, echo_server):
    monkeypatch.setenv("TXCL_SECRET_API_KEY", SECRET)
    ws = workspace({"OPS/s/0100/call.txcl": (
        'SELECT .order\n'
        'WITH secrets.headers.authorization.secret = "API_KEY", secrets.headers.authorization.format = "Bearer {}",\n'
        '     secrets.body.auth.token.secret = "API_KEY", into = "echo"\n'
        f'EXEC "{echo}/x"')})
    outcome, store = run_tree(ws, {"order": {"id": 7}}, trace_mode="full")
    headers, raw = echo_server.received[-1]
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert json.loads(raw)["auth"] == {"token": SECRET} and json.loads(raw)["order"] == {"id": 7}
    echoed = outcome.envelope["echo"]
    assert echoed["headers"]["authorization"] == "Bearer [secret]" and echoed["body"]["auth"]["token"] == "[secret]"
    step = _step(store, outcome)
    assert step["status"] == "ok" and SECRET not in json.dumps(step)
    assert "auth" not in json.dumps(step.get("input", {}))  # the input view is what the rule selected
    assert SECRET not in json.dumps(outcome.envelope)


def test_files_in_a_secrets_directory(workspace, run_tree, echo, tmp_path, echo_server):
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "VENDOR").write_text("from-a-file\n")
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH secrets.headers.x-api-key.secret = "VENDOR"\nEXEC "{echo}/x"'})
    run_tree(ws, {}, secrets_provider="dir", secrets_dir=str(folder))
    assert echo_server.received[-1][0]["x-api-key"] == "from-a-file"  # one trailing newline removed


def test_a_missing_secret_is_an_op_error_naming_it(workspace, run_tree, echo, monkeypatch, echo_server):
    monkeypatch.delenv("TXCL_SECRET_NOPE", raising=False)
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH secrets.headers.x-key.secret = "NOPE"\nEXEC "{echo}/x"',
                    "OPS/s/0200/next.txcl": "EMIT .next = true"})
    outcome, store = run_tree(ws, {})
    step = _step(store, outcome)
    assert step["status"] == "error"
    assert step["error"] == ("secret NOPE (WITH secrets.headers.x-key) is not set: txcl looked for the environment "
                             "variable TXCL_SECRET_NOPE")
    assert outcome.envelope["next"] is True and echo_server.received == []  # nothing was sent


def test_an_optional_secret_that_is_missing_is_left_out(workspace, run_tree, echo, monkeypatch, echo_server):
    monkeypatch.delenv("TXCL_SECRET_MAYBE", raising=False)
    ws = workspace({"OPS/s/0100/call.txcl": (
        'WITH secrets.headers.x-key.secret = "MAYBE", secrets.headers.x-key.optional = true\n'
        f'EXEC "{echo}/x"')})
    outcome, _ = run_tree(ws, {})
    assert "x-key" not in echo_server.received[-1][0] and outcome.envelope["headers"]


def test_a_value_a_header_cannot_carry_is_refused_without_showing_it(workspace, run_tree, echo, monkeypatch):
    monkeypatch.setenv("TXCL_SECRET_BROKEN", "abc\r\nInjected: 1")
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH secrets.headers.x-key.secret = "BROKEN"\nEXEC "{echo}/x"'})
    outcome, store = run_tree(ws, {})
    error = _step(store, outcome)["error"]
    assert error == "secret BROKEN (WITH secrets.headers.x-key) holds a line break or NUL, which a header cannot carry"


def test_a_form_body_gets_the_field_too(workspace, run_tree, echo, monkeypatch, echo_server):
    monkeypatch.setenv("TXCL_SECRET_PW", SECRET)
    ws = workspace({"OPS/s/0100/call.txcl": (
        'WITH body_encoding = "urlencoded", body_path = "form", secrets.body.password.secret = "PW"\n'
        f'EXEC "{echo}/x"')})
    run_tree(ws, {"form": {"user": "ann"}})
    assert echo_server.received[-1][1].decode() == f"user=ann&password={SECRET}"


def test_mask_replaces_every_occurrence_in_keys_and_values():
    value = {"a": f"x{SECRET}y{SECRET}", SECRET: [SECRET, 1, None], "n": 5}
    assert mask(value, (SECRET,)) == {"a": "x[secret]y[secret]", "[secret]": ["[secret]", 1, None], "n": 5}


def test_the_dir_provider_reads_only_plain_names(tmp_path):
    (tmp_path / "OK").write_text("v")
    provider = SecretProvider("dir", str(tmp_path / "sub"))
    assert provider.lookup("../OK") is None and provider.lookup("OK") is None
    assert SecretProvider("dir", str(tmp_path)).lookup("OK") == "v"
