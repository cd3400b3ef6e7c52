"""The checker never claims what a real walk contradicts: inputs generated from each typed
tree's `$defs.input` are walked by the interpreter, and at every scope entry every path the
envelope holds must be one the checker allows there (not absent, of a type it allows), and
every path the checker says is certainly there must be there."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from txcl.ops.tree import load_ops
from txcl.runtime.config import Settings
from txcl.runtime.interpreter import Interpreter
from txcl.types.generate import strategy
from txcl.types.shape import ABSENT, KNOWN, lookup, paths
from txcl.types.workspace import analyze_workspace

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
TREES = [REPO / "examples" / "quickstart", FIXTURES / "flows"]


class _Entries:
    """A walker observer: the envelope at the entry of every scope the walk runs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, dict]] = []

    def scope_selected(self, frame, rules, ran, e0) -> None:
        self.seen.append((frame.stack, frame.scope, copy.deepcopy(e0)))


def _observed(value, prefix=()):
    if isinstance(value, dict):
        for key, child in value.items():
            here = (*prefix, key)
            yield here, child
            yield from _observed(child, here)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            here = (*prefix, str(i))
            yield here, child
            yield from _observed(child, here)


def _type(value) -> str:
    from txcl.types.shape import type_of

    return type_of(value)


def _check_entry(flow, stack: str, scope: int, envelope: dict) -> list[str]:
    state = flow.entry.get((stack, scope))
    if state is None:
        return [f"{stack}/{scope}: the checker thinks no walk reaches it"]
    problems = []
    for path, value in _observed(envelope):
        if path[0] == "_txc":
            continue
        found = lookup(state.shape, path)
        if found.status == ABSENT:
            problems.append(f"{stack}/{scope}: .{'.'.join(path)} is there, the checker says absent")
        elif found.status == KNOWN:
            kind = _type(value)
            allowed = set(found.shape.types) | ({"number"} if "integer" in found.shape.types else set())
            if kind not in allowed and not (kind == "integer" and "number" in allowed):
                problems.append(f"{stack}/{scope}: .{'.'.join(path)} is {kind}, the checker allows "
                                f"{sorted(found.shape.types)}")
    for path, _ in paths(state.shape):
        if path[0] in ("_txc",):
            continue
        claim = lookup(state.shape, path)
        if claim.status == KNOWN and claim.certain:
            node = envelope
            for segment in path:
                node = node.get(segment) if isinstance(node, dict) else (
                    node[int(segment)] if isinstance(node, list) and segment.isdigit() and int(segment) < len(node)
                    else None)
                if node is None:
                    break
            if node is None and not _present(envelope, path):
                problems.append(f"{stack}/{scope}: the checker says .{'.'.join(path)} is certainly there; it is not")
    return problems


def _present(envelope, path) -> bool:
    node = envelope
    for segment in path:
        if isinstance(node, dict) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return False
    return True


@pytest.mark.parametrize("root", TREES, ids=lambda p: p.name)
def test_generated_walks_stay_inside_what_the_checker_computed(root, tmp_path):
    ws = tmp_path / root.name
    shutil.copytree(root, ws, ignore=shutil.ignore_patterns(".txcl-data", "__pycache__"))
    flow = analyze_workspace(ws / "OPS")
    assert flow is not None and flow.converged
    tree = load_ops(ws)
    interp = Interpreter(tree, settings=Settings(trace_mode="off", op_repeat_penalty_ms=0, op_timeout=300))
    entries = _Entries()
    interp.walker.observer = entries
    problems: list[str] = []
    walks = 0
    for stack in flow.typed_stacks():
        types = flow.stack_types(stack)
        doc = types.file.doc
        schema = {"$defs": doc["$defs"], "$ref": "#/$defs/input"}

        def resolve(ref, doc=doc):
            node = doc
            for part in ref.lstrip("#/").split("/"):
                node = node[part]
            return node

        import jsonschema_rs

        values = strategy(schema, resolve, jsonschema_rs.validator_for(schema))

        @settings(max_examples=25, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(values)
        def walk(document):
            nonlocal walks
            entries.seen.clear()
            interp.run_sync(json.loads(json.dumps(document)), stack)
            walks += 1
            for seen_stack, scope, envelope in entries.seen:
                problems.extend(_check_entry(flow, seen_stack, scope, envelope))

        walk()
    assert walks >= 20
    assert problems == [], "\n".join(sorted(set(problems))[:20])
