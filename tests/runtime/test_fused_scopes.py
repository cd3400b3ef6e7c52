"""Scopes whose rules are all local and plain (no EXEC, LOOP, WITH or EMIT of the TTL) take a
fused path through the walker. It must do exactly what the general path does: the same
outcome, envelope, fuel, trace steps and timeline events, for every such rule of the test
corpus and for the awkward cases written out here."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
from corpus import corpus_rules, deterministic, envelopes_for, paths_read
from testtools import walk_observed

from txcl.errors import TxclError
from txcl.ops.tree import load_ops
from txcl.runtime.config import Settings
from txcl.runtime.interpreter import Completed, Interpreter
from txcl.syntax import ast
from txcl.syntax.printer import print_rule

_TIMES = ("started_ms", "finished_ms", "duration_ms")


def _values(rule: ast.Rule) -> list[Any]:
    found = [a.value for a in (*rule.set_pre, *rule.set_post, *rule.emit)]
    if rule.select is not None and not rule.select.star:
        found += [item.default for item in rule.select.items if item.default is not None]
    return found


def _fusable(rule: ast.Rule) -> bool:
    """Local, plain and deterministic: a rule the fused path takes and both runs agree on."""
    if rule.exec is not None or rule.loop is not None or rule.with_:
        return False
    if any(a.target.segments == ("_txc", "ttl") for a in rule.emit):
        return False
    nodes = _values(rule) + ([rule.when.condition] if rule.when is not None else [])
    return all(deterministic(node) for node in nodes)


def _paths_of(rules: list[ast.Rule]) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for rule in rules:
        nodes = _values(rule) + ([rule.when.condition] if rule.when is not None else [])
        for node in nodes:
            paths += paths_read(node)
        paths += [a.target.segments for a in (*rule.set_pre, *rule.emit)]
    return paths


def _stable(value: Any) -> Any:
    """`value` with what differs between any two runs (the request id, the time) blanked."""
    if isinstance(value, dict):
        return {k: "…" if k in ("_ts", "rid", "duration_ms") else _stable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    return value


def _observe(tree: Any, envelope: dict, fuse: bool, **settings: Any) -> tuple:
    kept: list = []
    interp = Interpreter(tree, settings=Settings(trace_mode="summary", **settings), trace_sink=kept.append)
    interp.walker.fuse_local = fuse
    try:
        outcome = interp.run_sync(copy.deepcopy(envelope), "s")
    finally:
        interp.close()
    (record,) = kept
    fused = sum(1 for found in interp.walker._locals.values() if found is not None)
    return _stable(walk_observed(outcome, record)), fused


def _compare(ws: Path, envelopes: list[dict], **settings: Any) -> int:
    """Run every envelope both ways; the number of fused scopes entered."""
    tree = load_ops(ws)
    fused_scopes = 0
    for envelope in envelopes:
        general, none_fused = _observe(tree, envelope, False, **settings)
        fused, count = _observe(tree, envelope, True, **settings)
        assert none_fused == 0
        assert fused == general, f"{ws}: {envelope!r}"
        fused_scopes += count
    return fused_scopes


CORPUS = [rule for _where, rule in corpus_rules() if _fusable(rule)]


def test_the_fusable_corpus_is_big_enough_to_mean_something():
    assert len(CORPUS) > 250


@pytest.mark.parametrize("chunk", range(3))
def test_every_fusable_corpus_rule_walks_alike_both_ways(tmp_path, chunk):
    """Three rules to a scope (their outputs merge in name order, PRIORITY picks among them),
    two scopes to a stack."""
    rnd = random.Random(chunk)
    rules = CORPUS[chunk::3]
    groups = [rules[i:i + 6] for i in range(0, len(rules), 6)]
    compared = fused = 0
    for g, group in enumerate(groups):
        ws = tmp_path / f"g{g}"
        for i, rule in enumerate(group):
            scope = ws / "OPS" / "s" / ("0100_a" if i < 3 else "0200_b")
            scope.mkdir(parents=True, exist_ok=True)
            (scope / f"r{i}.txcl").write_text(print_rule(rule), encoding="utf-8")
        try:
            load_ops(ws)
        except TxclError:
            continue  # a tree-level rule of the checker refuses this mix: not a walk question
        # no sleep for a repeated transition (corpus rules that jump back would wait)
        fused += _compare(ws, envelopes_for(_paths_of(group), rnd, 4), op_repeat_penalty_ms=0)
        compared += 1
    assert compared > 15 and fused > 0


CASES = {
    "set pre error, reserved emit, priority, set post": {
        "0100_a/a.txcl": 'WHEN .n > 1\nSET .x = &div(1, 0)\nEMIT .a = .x',
        "0100_a/b.txcl": 'PRIORITY 2\nSET .y = "pre"\nEMIT .b = .y, ._txc.run_id = "no", .c = [1, "k"], .d = &object("k", .n)',
        "0100_a/c.txcl": 'PRIORITY 2\nSELECT .n AS .m\nEMIT .c = [2]\nSET .post = .m',
        "0200_b/d.txcl": 'EMIT .e = &concat("x", .b)\nSET .b = "kept"',
    },
    "emit error and halt": {
        "0100_a/a.txcl": 'EMIT .a = &add("nope", 1)',
        "0100_a/b.txcl": 'EMIT .b = 1, @halt = true',
        "0200_b/c.txcl": 'EMIT .never = 1',
    },
    "goto, delete and a repeated transition": {
        "0100_a/a.txcl": 'WHEN .n < 3\nEMIT .n = &add(.n, 1), @goto = "s/100"',
        "0100_a/b.txcl": 'EMIT @delete = ["gone"], .seen = true',
        "0200_b/c.txcl": 'EMIT .done = .n',
    },
    "a reserved object emitted whole is dropped": {
        "0100_a/a.txcl": 'EMIT ._txc = &object("ttl", 1, "note", "x")',
        "0200_b/b.txcl": 'EMIT .after = 1',
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_awkward_scopes_walk_alike_both_ways(tmp_path, case):
    for name, text in CASES[case].items():
        path = tmp_path / "OPS" / "s" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    envelopes = [{}, {"n": 2, "gone": 1}, {"n": 0, "b": "old", "gone": [1]}, {"n": "3", "_txc": {"x": 1}}]
    assert _compare(tmp_path, envelopes) > 0


def test_scopes_of_local_rules_take_no_step_coroutine(tmp_path):
    """After a stack's first scope, a scope of local rules is walked by `step_local` in one
    call; `step` (a coroutine per scope) is left to the first scope, the scope with an EXEC,
    and the entries of a repeated transition. The envelope and the trace are the same as when
    every scope takes `step`."""
    scopes = {
        "0100_a/a.txcl": "EMIT .n = &add(.n, 1)",
        "0200_b/b.txcl": "EMIT .m = .n",
        "0300_c/c.txcl": 'EXEC "txco://noop"\nEMIT .echoed = true',
        "0400_d/d.txcl": 'WHEN .n < 4\nEMIT .n = &add(.n, 1), @goto = "s/400"',
        "0500_e/e.txcl": "EMIT .done = .n",
    }
    for name, text in scopes.items():
        path = tmp_path / "OPS" / "s" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    tree = load_ops(tmp_path)

    def walk(fuse: bool) -> tuple:
        kept: list = []
        interp = Interpreter(tree, settings=Settings(trace_mode="summary", op_repeat_penalty_ms=0),
                             trace_sink=kept.append)
        walker = interp.walker
        walker.fuse_local = fuse
        stepped: list[str] = []
        general = walker.step

        async def counted(run, rec):
            stepped.append(f"{run.stack}/{run.requested_scope}")
            await general(run, rec)

        walker.step = counted
        try:
            outcome = interp.run_sync({"n": 0}, "s")
        finally:
            interp.close()
        assert isinstance(outcome, Completed)
        (record,) = kept
        steps = [{k: v for k, v in step.items() if k not in _TIMES} for step in record.steps]
        events = [(seq, kind, data) for seq, _at, kind, data in record.events]
        return stepped, _stable((outcome.envelope, outcome.fuel_used, steps, events))

    fused_steps, fused = walk(True)
    general_steps, general = walk(False)
    assert fused == general
    assert fused[0]["done"] == 4 and fused[0]["echoed"] is True
    # the EXEC, the two repeated entries of s/400 (400->400 the second and third time)
    assert fused_steps == ["s/300", "s/400", "s/400"], fused_steps
    assert general_steps == ["s/0", "s/200", "s/300", "s/400", "s/400", "s/400", "s/400", "s/500"]
