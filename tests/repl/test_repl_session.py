"""ReplSession: rules, expressions, conditions and meta-commands without a terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txcl.repl.render import diff_values, path_text, render_diff
from txcl.repl.session import ReplSession


@pytest.fixture
def session() -> ReplSession:
    return ReplSession({"user": {"id": 7, "tier": "gold"}, "order": {"total": 120}})


def test_expressions_and_conditions(session: ReplSession) -> None:
    assert session.submit(".user.id").text == "7"
    assert session.submit(".missing").text == "null"
    assert session.submit("&add(.order.total, 5)").text == "125"
    assert session.submit('&concat(.user.tier, "!")').text == '"gold!"'
    assert session.submit('.order.total >= 100 && .user.tier == "gold"').text == "true"
    assert session.submit(".order.total < 100").text == "false"


def test_eval_errors_are_messages_not_tracebacks(session: ReplSession) -> None:
    reply = session.submit("&div(1, 0)")
    assert not reply.ok
    assert reply.text == "error: &div: division by zero"


def test_syntax_errors_show_a_caret(session: ReplSession) -> None:
    reply = session.submit("&nope(1)")
    assert not reply.ok
    assert "TX101" in reply.text
    lines = reply.text.splitlines()
    assert lines[-1].strip().startswith("|") and "^" in lines[-1]
    reply = session.submit("WHEN .a == 1 .b == 2")
    assert "TX010" in reply.text and "^^" in reply.text
    reply = session.submit(".a == ")
    assert not reply.ok and "^" in reply.text


def test_matching_rule_changes_the_envelope(session: ReplSession) -> None:
    reply = session.submit(
        'WHEN .order.total >= 100\nSET .order.currency = "EUR"\n'
        'SELECT .order.total AS .amount, .order.currency AS .currency\n'
        'WITH timeout = "3s"\nEXEC "https://pricing.example.net/x"\n'
        "EMIT .pricing.checked = true")
    assert reply.ok
    text = reply.text
    assert text.startswith("WHEN matches")
    assert '"amount": 120' in text and '"currency": "EUR"' in text  # what the op receives
    assert 'WITH: {"timeout":"3s"}' in text
    assert "+ .pricing.checked = true" in text
    assert session.envelope["pricing"] == {"checked": True}
    assert session.envelope["amount"] == 120  # synthetic SELECT emits merge too


def test_non_matching_rule_shows_but_does_not_apply(session: ReplSession) -> None:
    reply = session.submit("WHEN .order.total > 1000\nEMIT .big = true")
    assert reply.text.startswith("WHEN does not match")
    assert "+ .big = true" in reply.text
    assert "big" not in session.envelope


def test_op_output_and_colour() -> None:
    session = ReplSession({"a": 1}, colour=True)
    session.submit('.output {"price": 9}')
    reply = session.submit('EXEC "txco://x"\nEMIT .seen = .price')
    assert "\x1b[32m+ .price = 9\x1b[0m" in reply.text
    assert "+ .seen = 9" in reply.text
    assert session.envelope == {"a": 1, "price": 9, "seen": 9}


def test_set_unset_env_reset(session: ReplSession) -> None:
    assert session.submit('.set .a.b "x"').text == '+ .a.b = "x"'
    assert session.submit(".set .user.id &add(.user.id, 1)").text == "~ .user.id: 7 → 8"
    assert session.submit('.set .obj {"k": null}').ok
    assert session.envelope["obj"] == {"k": None}
    assert session.submit(".set @trace.id 5").ok
    assert session.envelope["_txc"] == {"trace": {"id": 5}}
    assert session.submit(".env .a").text == '{\n  "b": "x"\n}'
    assert session.submit(".unset .a").text == '- .a.b = "x"'
    assert not session.submit(".set .a").ok
    assert not session.submit('.set "x" 1').ok
    reply = session.submit(".reset")
    assert session.envelope == {"user": {"id": 7, "tier": "gold"}, "order": {"total": 120}}
    assert reply.text.startswith("envelope reset")
    assert json.loads(session.submit(".env").text) == session.envelope


def test_save_and_load(session: ReplSession, tmp_path: Path) -> None:
    target = tmp_path / "env.json"
    assert session.submit(f".save {target}").ok
    assert json.loads(target.read_text()) == session.envelope
    other = ReplSession()
    assert other.submit(f".load {target}").ok
    assert other.envelope == session.envelope
    rule = tmp_path / "r.txcl"
    rule.write_text("WHEN .user.id == 7\nEMIT .hit = true\n")
    assert "WHEN matches" in other.submit(f".load {rule}").text
    assert other.envelope["hit"] is True
    (tmp_path / "list.json").write_text("[1]")
    assert not other.submit(f".load {tmp_path / 'list.json'}").ok
    assert not other.submit(f".load {tmp_path / 'missing.json'}").ok
    bad = tmp_path / "bad.txcl"
    bad.write_text("WHEN .a ==\n")
    reply = other.submit(f".load {bad}")
    assert not reply.ok and str(bad) in reply.text and "^" in reply.text


def test_help_quit_and_forced_expression(session: ReplSession) -> None:
    text = session.submit(".help").text
    for command in (".help", ".env", ".set", ".load", ".save", ".run", ".reset", ".quit"):
        assert command in text
    assert session.submit(".quit").quit
    assert session.submit(".exit").quit
    session.submit(".set .env 3")
    assert session.submit("= .env").text == "3"


def test_run_without_ops_tree(session: ReplSession) -> None:
    reply = session.submit(".run main")
    assert not reply.ok and "no OPS tree" in reply.text


def test_diff_rendering() -> None:
    old = {"a": 1, "b": {"c": [1]}, "gone": True}
    new = {"a": 2, "b": {"c": [1, 2], "d": {"e": None}}, "_txc": {"halt": True}}
    changes = list(diff_values(old, new))
    assert ("~", ("a",), 1, 2) in changes
    assert ("-", ("gone",), True, None) in changes
    assert ("+", ("b", "d", "e"), None, None) in changes
    text = render_diff(old, new, colour=False)
    assert "+ @halt = true" in text
    assert "~ .b.c: [1] → [1,2]" in text
    assert render_diff({"a": 1}, {"a": 1}, colour=False) == "(no change)"
    assert path_text(("labels", "app.kubernetes.io/name")) == '.labels."app.kubernetes.io/name"'
    assert path_text(("items", "0")) == ".items.0"


def test_run_walks_a_stack_of_the_ops_tree(tmp_path: Path) -> None:
    pytest.importorskip("txcl.runtime.interpreter")
    ops = tmp_path / "OPS" / "main"
    (ops / "0100").mkdir(parents=True)
    (ops / "0200").mkdir()
    (ops / "0100" / "a.txcl").write_text("WHEN .n > 0\nEMIT .first = true\n")
    (ops / "0200" / "b.txcl").write_text("EMIT .second = &add(.n, 1)\n")
    session = ReplSession({"n": 1}, ops_dir=tmp_path)
    assert session.stacks() == ["main"]
    reply = session.submit(".run main")
    assert reply.ok, reply.text
    assert "+ .first = true" in reply.text and "+ .second = 2" in reply.text
    assert session.envelope["second"] == 2
    reply = session.submit(".run nope")
    assert not reply.ok and 'unknown stack "nope"' in reply.text


def test_broken_ops_tree_is_reported_not_raised(tmp_path: Path) -> None:
    pytest.importorskip("txcl.ops.tree")
    rule = tmp_path / "OPS" / "main" / "0100" / "bad.txcl"
    rule.parent.mkdir(parents=True)
    rule.write_text("WHEN .a ==\n")
    session = ReplSession({}, ops_dir=tmp_path)
    assert session.ops is None and session.ops_error and "TX0" in session.ops_error
    reply = session.submit(".run main")
    assert not reply.ok and "TX0" in reply.text


def test_run_refuses_a_stack_with_async_ops_and_says_what_to_use(tmp_path):
    """Async ops need a store and a callback endpoint: `.run` refuses clearly instead of posting
    to the worker as if it were a sync op and calling the 202 the answer."""
    from txcl.repl.session import ReplSession

    (tmp_path / "OPS/s/0100").mkdir(parents=True)
    (tmp_path / "OPS/s/0100/job.txcl").write_text('WITH mode = "async"\nEXEC "https://w.example.net/job"\n')
    (tmp_path / "OPS/t/0100").mkdir(parents=True)
    (tmp_path / "OPS/t/0100/a.txcl").write_text("EMIT .a = 1\n")
    session = ReplSession({}, tmp_path)
    reply = session.submit(".run s")
    assert not reply.ok and "wait for a worker" in reply.text and "s/100/job" in reply.text
    assert "txcl test" in reply.text
    ok = session.submit(".run t")
    assert ok.ok and session.envelope["a"] == 1
