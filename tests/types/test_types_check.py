"""The typed-envelope checks of `txcl check` on small trees: schema files, the flow through
scopes, jumps, deferred and itemized joins, the conventions (closed and open objects, child
stacks), and what untyped stacks keep (nothing new)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from txcl.check import run_check
from txcl.types.findings import _outcomes

INPUT = {"type": "object", "properties": {"order": {"type": "object", "properties": {
    "total": {"type": "number"}, "status": {"enum": ["new", "paid"]}}, "required": ["total"]}}}


def _tree(root, files: dict) -> None:
    for path, text in files.items():
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text if isinstance(text, str) else json.dumps(text), encoding="utf-8")


def _codes(root, monkeypatch) -> list[tuple[str, str, int, int]]:
    monkeypatch.chdir(root)
    return [(d.file.replace(os.sep, "/"), d.code, d.line, d.column)
            for d in run_check(["."], cache_dir=False).diagnostics]


def _messages(root, monkeypatch) -> dict[str, str]:
    monkeypatch.chdir(root)
    return {d.code: (d.message, d.hint) for d in run_check(["."], cache_dir=False).diagnostics}


def test_an_untyped_stack_gets_none_of_the_new_codes(tmp_path, monkeypatch):
    _tree(tmp_path, {"OPS/s/0100/a.txcl": 'WHEN .ordr.total == "x"\nEMIT .n = &len(5)\n'})
    assert [c for _, c, _, _ in _codes(tmp_path, monkeypatch) if "TX260" <= c <= "TX268"] == []


def test_a_child_stack_inherits_its_parents_schema(tmp_path, monkeypatch):
    _tree(tmp_path, {"OPS/shop/schema.json": {"$defs": {"input": INPUT}},
                     "OPS/shop/0100/a.txcl": "EMIT .x = 1\n",
                     "OPS/shop/eu/0200/b.txcl": "WHEN .ordr.total > 1\nEMIT .y = 1\n"})
    assert _codes(tmp_path, monkeypatch) == [("OPS/shop/eu/0200/b.txcl", "TX261", 1, 6)]
    assert _messages(tmp_path, monkeypatch)["TX261"][1] == "did you mean .order.total?"


@pytest.mark.parametrize("text, message, line, column", [
    ('{"$defs": {"input": {"type": "object",}}}', "the schema is not JSON", 1, 39),
    ('{"$defs": {\n  "input": {"$ref": "#/$defs/nope"}}}', '$ref "#/$defs/nope" leads nowhere', 2, 21),
    ('{"$defs": {"output": {}}}', "a stack's schema.json needs $defs.input", 1, 1),
    ('{"$defs": {"input": {"$ref": "https://example.com/s.json"}}}', "remote references are not fetched", 1, 30),
    ('[1, 2]', "a schema file must hold a JSON object", 1, 1),
    ('{"$defs": {"input": {"type": "objet"}}}', '"objet" is not a JSON Schema type', 1, 30),
])
def test_a_schema_that_cannot_be_used_is_tx260_at_its_place(tmp_path, monkeypatch, text, message, line, column):
    _tree(tmp_path, {"OPS/s/schema.json": text, "OPS/s/0100/a.txcl": "EMIT .x = 1\n"})
    monkeypatch.chdir(tmp_path)
    found = [d for d in run_check(["."], cache_dir=False).diagnostics if d.code == "TX260"]
    assert len(found) == 1 and message in found[0].message, found
    assert (found[0].line, found[0].column) == (line, column)
    assert "Traceback" not in found[0].message


def test_sibling_refs_are_followed_and_the_schema_file_is_not_a_stray(tmp_path, monkeypatch):
    _tree(tmp_path, {"OPS/s/schema.json": {"$defs": {"input": {"type": "object", "properties": {
        "money": {"$ref": "common.schema.json#/$defs/money"}}}}},
        "OPS/s/common.schema.json": {"$defs": {"money": {"type": "object", "properties": {
            "amount": {"type": "number"}}}}},
        "OPS/s/0100/a.txcl": 'WHEN .money.amont > 1\nEMIT .x = 1\n'})
    found = _codes(tmp_path, monkeypatch)
    assert ("OPS/s/0100/a.txcl", "TX261", 1, 6) in found
    assert not [f for f in found if f[1] == "TX240" and f[0].endswith("schema.json") and "common" not in f[0]]


def test_an_op_schema_without_its_rule_is_a_stray(tmp_path, monkeypatch):
    _tree(tmp_path, {"OPS/s/schema.json": {"$defs": {"input": {}}}, "OPS/s/0100/a.txcl": "EMIT .x = 1\n",
                     "OPS/s/0100/b.schema.json": {"$defs": {"output": {}}}})
    assert _codes(tmp_path, monkeypatch) == [("OPS/s/0100/b.schema.json", "TX240", 1, 1)]


def test_open_objects_accept_any_path_below_them(tmp_path, monkeypatch):
    schema = {"$defs": {"input": {"type": "object", "properties": {
        "meta": {"type": "object", "additionalProperties": True},
        "free": {"type": "object"},
        "tags": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
        "closed": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}
    _tree(tmp_path, {"OPS/s/schema.json": schema,
                     "OPS/s/0100/a.txcl": 'WHEN .meta.anything.deep == 1 && .free.x == 1 && .tags.x-y == "v"\n'
                                          'EMIT .seen = .closed.b\n'})
    assert _codes(tmp_path, monkeypatch) == [("OPS/s/0100/a.txcl", "TX261", 2, 14)]


def test_a_deferred_answer_arrives_at_its_join_scope(tmp_path, monkeypatch):
    _tree(tmp_path, {
        "OPS/s/schema.json": {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}},
        "OPS/s/0100/job.txcl": 'WITH mode = "async", join_at_scope = 300, into = "job"\nEXEC "https://w.example.net/job"\n',
        "OPS/s/0100/job.schema.json": {"$defs": {"output": {"type": "object", "properties": {
            "ok": {"type": "boolean"}}, "required": ["ok"]}}},
        "OPS/s/0200/early.txcl": "WHEN .job.ok == true\nEMIT .early = 1\n",
        "OPS/s/0300/late.txcl": "WHEN .job.ok == true && .job.okk == true\nEMIT .late = 1\n",
    })
    found = [f for f in _codes(tmp_path, monkeypatch) if f[1].startswith(("TX26", "TX222"))]
    # (the untyped TX222 for the same early read is left out: TX262 says it, with types)
    assert found == [("OPS/s/0200/early.txcl", "TX262", 1, 6), ("OPS/s/0300/late.txcl", "TX261", 1, 25)]


def test_an_itemized_op_answers_an_array_at_into(tmp_path, monkeypatch):
    _tree(tmp_path, {
        "OPS/s/schema.json": {"$defs": {"input": {"type": "object", "properties": {"items": {"type": "array"}}}}},
        "OPS/s/0100/each.txcl": 'WITH mode = "async", each = .items, into = "scores"\nEXEC "https://w.example.net/s"\n',
        "OPS/s/0100/each.schema.json": {"$defs": {"output": {"type": "object", "properties": {
            "score": {"type": "number"}}}}},
        "OPS/s/0200/use.txcl": 'EMIT .first = .scores.0.score, .n = &len(.scores), .bad = .scores.0.scor\n',
    })
    found = [f for f in _codes(tmp_path, monkeypatch) if f[1].startswith("TX26")]
    assert found == [("OPS/s/0200/use.txcl", "TX261", 1, 59)]


def test_a_backward_jump_makes_a_later_write_visible_earlier(tmp_path, monkeypatch):
    files = {
        "OPS/s/schema.json": {"$defs": {"input": {"type": "object", "properties": {"n": {"type": "integer"}}}}},
        "OPS/s/0100/a.txcl": "WHEN .again == true\nEMIT .seen = 1\n",
        "OPS/s/0200/b.txcl": 'WHEN .again == null\nEMIT .again = true, @goto = "100"\n',
    }
    _tree(tmp_path, files)
    assert _codes(tmp_path, monkeypatch) == []
    (tmp_path / "OPS/s/0200/b.txcl").write_text("WHEN .again == null\nEMIT .again = true\n")
    # without the jump, .again is read before anything writes it, at 100 and in 200's own guard
    assert [(f, c) for f, c, _, _ in _codes(tmp_path, monkeypatch)] == [("OPS/s/0100/a.txcl", "TX262"),
                                                                         ("OPS/s/0200/b.txcl", "TX262")]


def test_noqa_silences_a_typed_finding(tmp_path, monkeypatch):
    _tree(tmp_path, {"OPS/s/schema.json": {"$defs": {"input": INPUT}},
                     "OPS/s/0100/a.txcl": "WHEN .ordr.total > 1  # noqa: TX261\nEMIT .x = 1\n"})
    assert _codes(tmp_path, monkeypatch) == []


@pytest.mark.parametrize("op, kind, value, types, enum, expected", [
    ("==", "string", "abc", {"integer"}, None, {False}),
    ("==", "string", "42", {"integer"}, None, {True, False}),
    ("!=", "string", "abc", {"number"}, None, {True}),
    ("==", "string", "x", {"string"}, None, {True, False}),
    ("==", "string", "shiped", {"string"}, frozenset({'"new"', '"paid"'}), {False}),
    ("==", "int", 5, {"boolean"}, None, {False}),
    ("==", "int", 1, {"boolean"}, None, {True, False}),
    ("<", "bool", True, {"boolean"}, None, {False}),
    ("==", "null", None, {"integer"}, None, {False}),
    ("==", "null", None, {"integer", "null"}, None, {True, False}),
    ("==", "string", "{}", {"object"}, None, {True, False}),
    ("==", "string", "x", {"object"}, None, {False}),
    (">", "int", 3, {"string"}, None, {True, False}),
])
def test_comparison_outcomes_follow_the_coercions(op, kind, value, types, enum, expected):
    assert _outcomes(op, kind, value, set(types), enum) == expected


def test_the_function_table_holds_for_every_value(tmp_path):
    """Every type a function argument 'never accepts' fails for many values of that type."""
    from txcl.errors import TxclError
    from txcl.functions.registry import REGISTRY, call
    from txcl.types.signatures import never_accepted

    samples = {"null": [None], "boolean": [True, False], "integer": [0, 3, -2, 1, 2, 10**12],
               "number": [1.5, 0.0, 2.0, -3.0, 1e300], "array": [[], [1, "a"], ["x"]], "object": [{}, {"a": 1}],
               "string": ["", "abc", "3", "-1", "1.5", "true", '{"a":1}', "YWJj", "a,b", "a.b", "2"]}
    good = {"add": [1, 2], "div": [4, 2], "mul": [2, 3], "sub": [3, 1], "mod": [5, 3], "get": [{"a": 1}, "a"],
            "has": [{"a": 1}, "a"], "join": [["a"], ","], "json": ['{"a":1}'], "len": ["ab"], "b64decode": ["YWJj"],
            "b64encode": ["x"], "pad": ["a", 3, "x"], "repeat": ["a", 2], "set": [{"a": 1}, "a", 2],
            "sha256": ["x"], "split": ["a,b", ","], "substr": ["abc", 0, 1], "urldecode": ["a"],
            "urlencode": ["a"], "object": ["k", 1]}
    checked = 0
    for name, args in good.items():
        assert name in REGISTRY
        call(name, list(args))  # the base call works
        for i in range(len(args)):
            for kind in never_accepted(name, i):
                for value in samples[kind]:
                    changed = list(args)
                    changed[i] = value
                    with pytest.raises(TxclError):
                        call(name, changed)
                    checked += 1
    assert checked > 150


def test_schema_infer_drafts_a_schema_the_samples_satisfy(tmp_path):
    import jsonschema_rs

    samples = [{"order": {"id": "a1", "total": 10, "status": "new"}},
               {"order": {"id": "a2", "total": 12.5, "status": "paid"}, "vip": True},
               {"order": {"id": "a3", "total": 7, "status": "paid"}}]
    source = tmp_path / "samples.json"
    source.write_text(json.dumps(samples))
    done = subprocess.run([sys.executable, "-m", "txcl", "schema", "infer", "--from", str(source)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    draft = json.loads(done.stdout)
    inp = draft["$defs"]["input"]
    assert inp["required"] == ["order"] and inp["properties"]["order"]["properties"]["total"]["type"] == "number"
    assert "enum" in inp["properties"]["order"]["properties"]["status"]["$comment"]
    validator = jsonschema_rs.validator_for({"$defs": draft["$defs"], "$ref": "#/$defs/input"})
    assert all(validator.is_valid(s) for s in samples)
    none = subprocess.run([sys.executable, "-m", "txcl", "schema", "infer"], capture_output=True, text=True,
                          timeout=60)
    assert none.returncode == 2 and "give samples" in none.stderr and "Traceback" not in none.stderr
