"""`local_output` — a rule without EXEC and WITH run whole, the common shape without the
intermediate objects — gives exactly what `prepare` then `finish_output` give: the same
output, error and dropped targets, for every such rule of the test corpus over envelopes
with every JSON kind at the paths it reads, and for the shapes that take the long way."""

from __future__ import annotations

import copy
import random

import pytest
from corpus import corpus_rules, deterministic, envelopes_for, paths_read

from txcl.evaluate.cow import private_input, write_paths
from txcl.evaluate.plan import rule_plan
from txcl.evaluate.rule import finish_output, local_output, prepare
from txcl.syntax.parser import parse_rule


def _long_way(rule, envelope, ttl):
    plan = rule_plan(rule)
    prepared = prepare(rule, private_input(envelope, write_paths(rule)), plan=plan)
    finished = finish_output(rule, prepared, {}, ttl, plan)
    return finished.output, finished.error, list(finished.dropped)


def _local(rule, envelope, ttl):
    output, error, dropped = local_output(rule, private_input(envelope, write_paths(rule)), rule_plan(rule), ttl)
    return output, error, list(dropped)


def _values(rule):
    found = [a.value for a in (*rule.set_pre, *rule.emit)]
    if rule.select is not None and not rule.select.star:
        found += [item.default for item in rule.select.items if item.default is not None]
    return found


LOCAL = [rule for _where, rule in corpus_rules()
         if rule.exec is None and not rule.with_ and rule.loop is None
         and all(deterministic(v) for v in _values(rule))]


def test_the_corpus_holds_both_shapes():
    fast = [r for r in LOCAL if rule_plan(r).emit_fresh is not None and r.select is None]
    assert len(LOCAL) > 250 and len(fast) > 100 and len(LOCAL) - len(fast) > 50


@pytest.mark.parametrize("chunk", range(2))
def test_every_local_corpus_rule_gives_what_the_long_way_gives(chunk):
    rnd = random.Random(chunk)
    compared = 0
    for rule in LOCAL[chunk::2]:
        paths = [p for v in _values(rule) for p in paths_read(v)] + [a.target.segments for a in rule.set_pre]
        for envelope in envelopes_for(paths, rnd, 4):
            before = copy.deepcopy(envelope)
            for ttl in (None, 5):
                assert _local(rule, envelope, ttl) == _long_way(rule, envelope, ttl)
            assert envelope == before  # neither way touches the envelope it reads
            compared += 1
    assert compared > 400


@pytest.mark.parametrize("text, envelope, expected", [
    # the generated EMIT function: SET PRE first, then EMIT over its result
    ("SET .a = 1, .b.c = .x\nEMIT .out = .b, .sum = &add(.a, 2)", {"x": [1]},
     ({"out": {"c": [1]}, "sum": 3}, None, [])),
    # a SET PRE that fails: EMIT reads the error object, as in the long way
    ("SET .a = &div(1, 0)\nEMIT .seen = .error", {},
     ({"seen": {"message": "decorate .a: &div: division by zero"}}, None, [])),
    # an EMIT value that fails: the long way reports it
    ('EMIT .n = &add("x", 1)', {},
     ({"error": {"message": 'overlay .n: &add: first argument is not a number: "x"'}}, None, [])),
    # a reserved target is dropped and named
    ("EMIT ._txc.run_id = 1, .k = 2", {}, ({"k": 2}, None, ["._txc.run_id"])),
    # SELECT: the long way (its target is written into the output too)
    ('SELECT .a AS .b DEFAULT "d"\nEMIT .got = .b', {}, ({"b": "d", "got": "d"}, None, [])),
])
def test_shapes_of_both_ways(text, envelope, expected):
    rule = parse_rule(text + "\n")
    got = _local(rule, envelope, None)
    assert got == _long_way(rule, envelope, None)
    assert got == expected
