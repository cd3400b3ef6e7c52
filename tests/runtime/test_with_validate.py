"""`WITH validate = true`: an op's answer is checked against its `<name>.schema.json`
`$defs.output` before `into` places it; a violation is an op error (best effort: nothing of
it merges, the scope goes on), and the schema travels in the ops snapshot a durable run keeps."""

from __future__ import annotations

import json

from txcl.ops.tree import load_ops, tree_from_snapshot
from txcl.runtime.interpreter import Completed, Interpreter

SCHEMA = {"$defs": {"output": {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}}}


def _tree(tmp_path, validate: str = "true"):
    scope = tmp_path / "OPS" / "s" / "0100"
    scope.mkdir(parents=True)
    (scope / "score.txcl").write_text(f'WITH validate = {validate}, into = "result"\nEXEC "py://scoremod:score"\n')
    (scope / "score.schema.json").write_text(json.dumps(SCHEMA))
    (scope / "other.txcl").write_text("EMIT .other = 1\n")
    (tmp_path / "scoremod.py").write_text('def score(i, ctx):\n    return {"score": i.get("value")}\n')
    return load_ops(tmp_path)


def _run(tree, envelope):
    outcome = Interpreter(tree).run_sync(envelope, "s")
    assert isinstance(outcome, Completed)
    return outcome.envelope


def test_an_answer_that_breaks_the_schema_is_an_op_error(tmp_path):
    tree = _tree(tmp_path)
    assert _run(tree, {"value": 3})["result"] == {"score": 3}
    bad = _run(tree, {"value": "high"})
    assert "result" not in bad and bad["other"] == 1  # the op failed, its sibling merged
    missing = _run(tree, {})  # score: null is not a number
    assert "result" not in missing


def test_without_validate_the_answer_is_not_checked(tmp_path):
    tree = _tree(tmp_path, validate="false")
    assert _run(tree, {"value": "high"})["result"] == {"score": "high"}


def test_the_schema_travels_in_the_snapshot(tmp_path):
    tree = _tree(tmp_path)
    body = json.loads(json.dumps(tree.snapshot()))
    again = tree_from_snapshot(body, tmp_path)
    assert "result" not in _run(again, {"value": "high"})
    assert _run(again, {"value": 2})["result"] == {"score": 2}


def test_a_rule_without_a_schema_fails_with_a_clear_reason(tmp_path):
    tree = _tree(tmp_path)
    op = tree.find("s", 100, "score")
    assert op.output_problem({"score": "x"}).startswith("the answer does not match score.schema.json")
    plain = tree.find("s", 100, "other")
    assert "has no other.schema.json" in plain.output_problem({})
