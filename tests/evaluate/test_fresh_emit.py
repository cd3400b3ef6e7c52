"""EMIT onto an empty output as one generated function (`RulePlan.emit_fresh`) against the
writes one by one (`_emit_plain`): for every rule of the test corpus and for hand-picked
awkward target sets, over envelopes with every JSON kind at the paths read, both give the
same output — values, key order (compared as JSON text) and errors."""

from __future__ import annotations

import json
import random

import attrs
import pytest
from corpus import corpus_rules, deterministic, envelopes_for, paths_read

from txcl.evaluate import rule as rule_module
from txcl.evaluate.plan import rule_plan
from txcl.evaluate.rule import Finished, finish_output, prepare
from txcl.syntax.parser import parse_rule


def _text(finished: Finished) -> str:
    return json.dumps([finished.output, finished.error, finished.dropped], default=repr)


def _both_ways(rule, envelope: dict) -> tuple[str, str] | None:
    """finish_output on an empty output as it runs, and with the generated EMIT turned off."""
    try:
        prepared = prepare(rule, json.loads(json.dumps(envelope)))
    except Exception:  # noqa: BLE001 - a rule this envelope cannot prepare says nothing here
        return None
    fast = finish_output(rule, prepared, {})
    plan = rule_plan(rule)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rule_module, "rule_plan", lambda _rule: attrs.evolve(plan, emit_fresh=None))
        slow = finish_output(rule, prepared, {})
    return _text(fast), _text(slow)


def test_every_corpus_rule_emits_the_same_both_ways():
    rnd = random.Random(7)
    compared = generated = 0
    for where, rule in corpus_rules():
        if not rule.emit or not all(deterministic(a.value) for a in rule.emit):
            continue
        generated += rule_plan(rule).emit_fresh is not None
        paths = [p for a in (*rule.set_pre, *rule.emit) for p in paths_read(a.value)]
        for env in envelopes_for(paths, rnd, 6):
            pair = _both_ways(rule, env)
            if pair is not None:
                assert pair[0] == pair[1], where
                compared += 1
    assert generated > 50 and compared > 300  # the corpus really exercises it


@pytest.mark.parametrize("text, generated", [
    ("EMIT .a.b = 1, .a.c = .x, .d = 2", True),
    ("EMIT .z = 1, .a = 2, .m.q = 3, .m.a = 4", True),          # key order as written
    ("EMIT .a = 1, .a.b = 2", False),                            # a target inside another
    ("EMIT .a.b = 2, .a = 1", False),
    ("EMIT .a = 1, .a = 2", False),                              # the same target twice
    ("EMIT .items.0 = 1", False),                                # a numeric segment
    ("EMIT @ttl = 5", False),                                    # lowers the TTL
    ("EMIT .x = &object(\"k\", .obj), .y = .list", True),      # containers are copied
    ("EMIT .x = &div(1, .s)", True),                             # a value that may fail
    ("EMIT @goto = \"s/200\", .after = 1", True),               # an author-writable _txc path
])
def test_awkward_targets(text, generated):
    rule = parse_rule(text)
    assert (rule_plan(rule).emit_fresh is not None) is generated
    for env in ({}, {"x": [1], "obj": {"k": [2]}, "list": [{"a": 1}], "s": 0}, {"s": 2, "x": None}):
        pair = _both_ways(rule, env)
        if pair is not None:
            assert pair[0] == pair[1]


def test_values_are_copies_not_the_envelope():
    rule = parse_rule("EMIT .y = .list, .z = .obj")
    env = {"list": [{"a": 1}], "obj": {"k": [2]}}
    out = finish_output(rule, prepare(rule, env), {}).output
    out["y"][0]["a"] = 99
    out["z"]["k"].append(3)
    assert env == {"list": [{"a": 1}], "obj": {"k": [2]}}


def test_a_failing_value_is_reported_as_the_writes_report_it():
    rule = parse_rule("EMIT .a = 1, .b = &div(1, 0)")
    finished = finish_output(rule, prepare(rule, {}), {})
    assert finished.output is not None and "overlay .b" in json.dumps(finished.output)


def test_a_target_too_deep_for_a_literal_keeps_the_writes():
    """Python's compiler refuses a literal nested hundreds deep: such a rule keeps the writes."""
    rule = parse_rule("EMIT ." + ".".join(f"k{i}" for i in range(300)) + " = 1")
    assert rule_plan(rule).emit_fresh is None
    out, depth = finish_output(rule, prepare(rule, {}), {}).output, 0
    while isinstance(out, dict) and out:
        out, depth = next(iter(out.values())), depth + 1
    assert (out, depth) == (1, 300)
