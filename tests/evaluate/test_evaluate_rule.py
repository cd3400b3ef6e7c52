"""One rule's data steps: SET PRE, WITH, SELECT, EMIT, SET POST, merge."""

from __future__ import annotations

import pytest

import txcl
from txcl.evaluate.rule import apply_set_post, finish_output, prepare


def rule(text: str) -> txcl.Rule:
    return txcl.parse_rule(text)


def test_set_pre_is_set_if_absent_and_chains() -> None:
    result = txcl.apply_rule(rule('SET .region = "eu", .zone = .region, .lang = "en"'), {"lang": "de"})
    assert result.op_input == {"region": "eu", "zone": "eu", "lang": "de"}


def test_set_pre_present_null_counts_as_present() -> None:
    result = txcl.apply_rule(rule("SET .x = 1"), {"x": None})
    assert result.op_input == {"x": None}


def test_set_pre_never_reaches_the_envelope() -> None:
    result = txcl.apply_rule(rule("SET .x = 1, @halt = true"), {})
    assert result.op_input == {"x": 1, "_txc": {"halt": True}}
    assert result.envelope == {}


def test_set_pre_failure_replaces_input_and_skips_the_rest() -> None:
    result = txcl.apply_rule(rule("SET .a = 1, .total = &div(1, 0), .b = 2"), {"keep": 1})
    assert result.op_input == {"error": {"message": "decorate .total: &div: division by zero"}}


def test_with_dotted_keys_nest_and_later_wins() -> None:
    result = txcl.apply_rule(
        rule('WITH secrets.token.name = "x", timeout = 2000, timeout = "3s", every = 1'), {}
    )
    assert result.directives == {"secrets": {"token": {"name": "x"}}, "timeout": "3s", "every": 1}


def test_with_reads_input_before_select() -> None:
    result = txcl.apply_rule(rule("SELECT .a WITH label = .hidden"), {"a": 1, "hidden": "h"})
    assert result.directives == {"label": "h"}
    assert result.dispatched == {"a": 1}


def test_with_failure_replaces_input_and_drops_directives() -> None:
    prepared = prepare(rule('WITH timeout = 5, x = &json("{")'), {"a": 1})
    assert prepared.directives == {}
    assert prepared.input["error"]["message"].startswith("WITH x: &json:")


def test_select_projection_defaults_and_ts() -> None:
    r = rule('SELECT .body AS .payload DEFAULT "none", .q, .z DEFAULT .q, .e DEFAULT &div(1, 0)')
    env = {"_ts": "2026-01-01T00:00:00.000Z", "q": 0, "other": 1, "e": ""}
    result = txcl.apply_rule(r, env)
    assert result.dispatched == {"payload": "none", "q": 0, "z": 0, "e": "", "_ts": env["_ts"]}
    # synthetic EMIT entries bring selected values into the envelope
    assert result.envelope["payload"] == "none"
    assert result.envelope["z"] == 0


def test_select_copies_null_zero_false_but_defaults_empty_string() -> None:
    r = rule('SELECT .a DEFAULT 1, .b DEFAULT 1, .c DEFAULT 1, .d DEFAULT 1')
    result = txcl.apply_rule(r, {"a": None, "b": 0, "c": False, "d": ""})
    assert result.dispatched == {"a": None, "b": 0, "c": False, "d": 1}


def test_select_star_and_no_select_dispatch_whole_input() -> None:
    for text in ("SELECT *", "EMIT .x = 1"):
        result = txcl.apply_rule(rule(text), {"a": 1})
        assert result.dispatched == {"a": 1}


def test_emit_reads_state_before_emit() -> None:
    result = txcl.apply_rule(rule("EMIT .total = 10, .copy = .total"), {})
    assert result.output == {"total": 10, "copy": None}
    result = txcl.apply_rule(rule("EMIT .total = 10, .copy = .total"), {"total": 3})
    assert result.output == {"total": 10, "copy": 3}


def test_emit_reads_output_first_then_input() -> None:
    result = txcl.apply_rule(rule("EMIT .a = .x, .b = .y"), {"x": "in", "y": "in"}, output={"x": "out"})
    assert result.output == {"x": "out", "a": "out", "b": "in"}


def test_author_emit_wins_over_select_entry() -> None:
    result = txcl.apply_rule(rule('SELECT .a EMIT .a = "author"'), {"a": "sel"})
    assert result.output == {"a": "author"}


def test_emit_drops_reserved_targets_and_keeps_writable_ones() -> None:
    result = txcl.apply_rule(
        rule('EMIT @rid = "x", @web.res.status = 201, @halt = true, .ok = 1'), {}
    )
    assert result.output == {"_txc": {"web": {"res": {"status": 201}}, "halt": True}, "ok": 1}
    assert result.dropped == ("._txc.rid",)


def test_emit_failure_replaces_output() -> None:
    result = txcl.apply_rule(rule('EMIT .a = 1, .b = &json("")'), {})
    assert result.output == {"error": {"message": "overlay .b: &json: empty input"}}


def test_ttl_only_lowers() -> None:
    r = rule("EMIT @ttl = 400")
    prepared = prepare(r, {})
    finished = finish_output(r, prepared, {}, ttl=100)
    assert finished.ttl == 100
    finished = finish_output(rule("EMIT @ttl = 7"), prepare(rule("EMIT @ttl = 7"), {}), {}, ttl=100)
    assert finished.ttl == 7 and finished.output == {"_txc": {"ttl": 7}}
    finished = finish_output(rule('EMIT @ttl = "x"'), prepare(rule('EMIT @ttl = "x"'), {}), {}, ttl=100)
    assert finished.ttl is None and finished.output == {}


def test_into_nests_output_before_emit() -> None:
    r = rule('WITH into = "pricing.result" EMIT .seen = .pricing.result.v')
    result = txcl.apply_rule(r, {}, output={"v": 5})
    assert result.output == {"pricing": {"result": {"v": 5}}, "seen": 5}


def test_into_nests_non_object_output() -> None:
    result = txcl.apply_rule(rule('WITH into = "list"'), {}, output=[1, 2])
    assert result.output == {"list": [1, 2]}


def test_non_object_output_is_an_op_error() -> None:
    result = txcl.apply_rule(rule("EMIT .x = 1"), {"a": 1}, output=[1])
    assert result.output is None
    assert "not a JSON object" in result.error
    assert result.envelope == {"a": 1}


def test_null_output_counts_as_empty() -> None:
    r = rule("EMIT .x = 1")
    assert finish_output(r, prepare(r, {}), None).output == {"x": 1}


def test_merge_into_envelope_and_set_post() -> None:
    r = rule('SELECT * SET .status = "new", .tags = .list EMIT .list = ["b"]')
    result = txcl.apply_rule(r, {"list": ["a"], "status": "old"})
    assert result.envelope == {"list": ["a", "b"], "status": "old", "tags": ["a", "b"]}


def test_set_post_drops_reserved_and_fails_whole_envelope() -> None:
    post = apply_set_post([rule("SELECT * SET @rid = 1, .a = 1")], {})
    assert post.envelope == {"a": 1} and post.dropped == ["._txc.rid"]
    post = apply_set_post([rule("SELECT * SET .a = &div(1, 0), .b = 2")], {"x": 1})
    assert post.envelope == {"error": {"message": "decorate .a: &div: division by zero"}}


def test_merge_public_api_does_not_touch_inputs() -> None:
    env = {"a": {"b": 1}, "l": [1]}
    out = {"a": {"c": 2}, "l": [2]}
    merged = txcl.merge(env, out)
    assert merged == {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert env == {"a": {"b": 1}, "l": [1]} and out == {"a": {"c": 2}, "l": [2]}


def test_apply_rule_reports_matched() -> None:
    assert txcl.apply_rule(rule("WHEN .a == 1"), {"a": 1}).matched
    assert not txcl.apply_rule(rule("WHEN .a == 1"), {"a": 2}).matched


def test_integers_stay_exact() -> None:
    big = 2**62 + 1
    result = txcl.apply_rule(rule("EMIT .n = .big"), {"big": big})
    assert result.output["n"] == big and isinstance(result.output["n"], int)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("&add(4, 5)", 9),
        ('&concat("a", .x)', "a7"),
        (".missing", None),
        ("[1, [2, \"x\"], true]", [1, [2, "x"], True]),
        ('b64"ok\\n"', "b2sK"),
    ],
)
def test_eval_expression(text: str, expected: object) -> None:
    assert txcl.eval_expression(text, {"x": 7}) == expected


def test_eval_expression_strict_failure() -> None:
    with pytest.raises(txcl.TxclEvalError, match="division by zero"):
        txcl.eval_expression("&div(1, 0)")


def test_eval_expression_syntax_error_points_into_the_expression() -> None:
    with pytest.raises(txcl.TxclSyntaxError) as info:
        txcl.eval_expression("&add(1, ")
    diag = info.value.diagnostics[0]
    assert diag.line == 1 and diag.column <= 9


def test_with_still_applies_after_a_set_pre_error():
    """The op continues after a SET PRE error, so its WITH directives are kept (as the
    reference does): the input reports the error, the directives are resolved on it."""
    import txcl

    rule = txcl.parse_rule('SET .a = &div(1, 0)\nWITH k = 1, timeout = "5s"\nEXEC "txco://noop"')
    result = txcl.apply_rule(rule, {"x": 5})
    assert result.directives == {"k": 1, "timeout": "5s"}
    assert result.op_input["error"]["message"].startswith("decorate .a:")
    both = txcl.apply_rule(txcl.parse_rule("SET .a = &div(1, 0)\nWITH k = &div(2, 0)\nEXEC \"txco://noop\""), {})
    assert both.op_input["error"]["message"].startswith("decorate .a:")  # the first error is reported


def _containers(value, found=None):
    """The ids of every dict and list in `value`."""
    found = set() if found is None else found
    if isinstance(value, (dict, list)):
        found.add(id(value))
        for child in value.values() if isinstance(value, dict) else value:
            _containers(child, found)
    return found


@pytest.mark.parametrize("text", [
    'SET .a.b.c = 1, .n.m = .a.b\nSELECT .a AS .x.y, .deep\nEMIT .out = .x, .keep = .deep',  # writes deep inside
    "SELECT *\nEMIT .o = .deep",  # no writes into the input at all
    "EMIT .o = .deep",
    'SET .x = 1\nEXEC "https://example.com/x"\nLOOP MAX 2 SET .i = 1 UNTIL .i == 1\nEMIT .o = .deep',  # LOOP: a whole copy
])
def test_apply_rule_leaves_the_envelope_untouched_and_shares_nothing_with_it(text):
    import copy
    import json

    envelope = {"a": {"b": {"z": [1, {"q": 2}]}, "s": [3]}, "deep": {"k": [{"v": 1}]}, "n": {}}
    before = json.dumps(envelope, sort_keys=True)
    result = txcl.apply_rule(rule(text), envelope)
    assert json.dumps(envelope, sort_keys=True) == before
    mine = _containers(envelope)
    for part in (result.op_input, result.dispatched, result.output, result.envelope, result.directives):
        assert not _containers(part) & mine, text
    # and changing a result changes nothing else
    snapshot = copy.deepcopy(result.envelope)
    result.op_input.setdefault("a", {})["changed"] = True
    assert result.envelope == snapshot and json.dumps(envelope, sort_keys=True) == before


def test_a_write_the_output_cannot_take_is_the_rules_error_not_an_exception():
    """Only txcl's own errors leave the API: an op output whose `_txc` is an array cannot take
    the TTL an EMIT lowers; the EMIT fails as an overlay error (what the playground shows)."""
    import txcl
    from txcl.values.paths import PathError

    result = txcl.apply_rule(txcl.parse_rule("EMIT @ttl = 5"), {}, {"_txc": [1]})
    assert result.output["error"]["message"].startswith("overlay ._txc.ttl: cannot use key")
    assert issubclass(PathError, txcl.TxclError)


def test_the_playground_answers_the_same_shape_without_raising():
    from txcl.ui.playground import evaluate_rule

    answer = evaluate_rule("EMIT @ttl = 5", "{}", '{"_txc": [1]}')
    assert "cannot use key" in answer["envelope"]["error"]["message"]
