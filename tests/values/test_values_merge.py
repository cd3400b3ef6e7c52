"""merge: its rules at the top level and nested; inputs never mutated; deep_copy."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txcl.values.merge import deep_copy, merge, merge_into


@pytest.mark.parametrize("env,out,expected", [
    # scalar or null replaces whatever is there
    ({"a": {"x": 1}}, {"a": 5}, {"a": 5}),
    ({"a": [1]}, {"a": None}, {"a": None}),
    ({"a": 1}, {"a": "s"}, {"a": "s"}),
    ({}, {"a": False}, {"a": False}),
    # arrays append to arrays, replace anything else
    ({"a": [1, 2]}, {"a": [2, 3]}, {"a": [1, 2, 2, 3]}),
    ({"a": {"x": 1}}, {"a": [1]}, {"a": [1]}),
    ({"a": 3}, {"a": []}, {"a": []}),
    ({}, {"a": [1]}, {"a": [1]}),
    # objects: inserted, deep-merged, replace a non-object
    ({}, {"a": {"x": 1}}, {"a": {"x": 1}}),
    ({"a": {"x": 1, "y": 2}}, {"a": {"y": 3, "z": 4}}, {"a": {"x": 1, "y": 3, "z": 4}}),
    ({"a": "str"}, {"a": {"x": 1}}, {"a": {"x": 1}}),
    ({"a": [1]}, {"a": {"x": 1}}, {"a": {"x": 1}}),
    # other keys kept
    ({"k": 1, "a": 1}, {"a": 2}, {"k": 1, "a": 2}),
    # empty output changes nothing
    ({"a": 1}, {}, {"a": 1}),
])
def test_top_level(env, out, expected):
    assert merge(env, out) == expected


@pytest.mark.parametrize("env,out,expected", [
    ({"o": {"a": {"b": 1}}}, {"o": {"a": None}}, {"o": {"a": None}}),      # null wins nested
    ({"o": {"a": 1}}, {"o": {"a": [1]}}, {"o": {"a": [1]}}),               # array over non-array
    ({"o": {"a": [1]}}, {"o": {"a": [2]}}, {"o": {"a": [1, 2]}}),          # array append nested
    ({"o": {"a": [1]}}, {"o": {"a": {"x": 1}}}, {"o": {"a": {"x": 1}}}),   # object over non-object
    ({"o": {"a": {"x": {"y": 1, "z": 1}}}}, {"o": {"a": {"x": {"z": 2}}}},
     {"o": {"a": {"x": {"y": 1, "z": 2}}}}),
    ({"o": {"a": 1, "b": 2}}, {"o": {}}, {"o": {"a": 1, "b": 2}}),
])
def test_nested(env, out, expected):
    assert merge(env, out) == expected


def test_merge_into_copies_values_from_output():
    target = {"a": [1]}
    out = {"a": [{"x": 1}], "b": {"c": [1]}}
    merge_into(target, out)
    out["a"][0]["x"] = 99
    out["b"]["c"].append(2)
    assert target == {"a": [1, {"x": 1}], "b": {"c": [1]}}


def test_merge_into_is_in_place():
    target = {"a": {"x": 1}}
    inner = target["a"]
    merge_into(target, {"a": {"y": 2}})
    assert target["a"] is inner and inner == {"x": 1, "y": 2}


def test_merge_returns_new_dict_not_aliasing():
    env = {"a": {"x": [1]}}
    out = {"b": {"y": [2]}}
    result = merge(env, out)
    result["a"]["x"].append(9)
    result["b"]["y"].append(9)
    assert env == {"a": {"x": [1]}} and out == {"b": {"y": [2]}}


def test_merge_rejects_non_objects():
    with pytest.raises(TypeError):
        merge({}, [1])  # type: ignore[arg-type]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from("abcd"), children, max_size=4),
    max_leaves=20,
)
objects = st.dictionaries(st.sampled_from("abcd"), json_values, max_size=4)


@settings(max_examples=200, deadline=None)
@given(objects, objects)
def test_merge_never_mutates_inputs(env, out):
    env_before, out_before = copy.deepcopy(env), copy.deepcopy(out)
    result = merge(env, out)
    assert env == env_before and out == out_before
    assert set(result) == set(env) | set(out)


@settings(max_examples=200, deadline=None)
@given(objects, objects)
def test_merge_matches_merge_into(env, out):
    target = deep_copy(env)
    merge_into(target, out)
    assert target == merge(env, out)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_deep_copy_equal_and_unshared(value):
    c = deep_copy(value)
    assert c == value or c != c  # NaN never equals itself
    stack = [(value, c)]
    while stack:
        a, b = stack.pop()
        if isinstance(a, (list, dict)):
            assert a is not b
            pairs = zip(a, b) if isinstance(a, list) else ((a[k], b[k]) for k in a)
            stack.extend(pairs)


def test_deep_copy_scalars_and_tuples():
    assert deep_copy(5) == 5 and deep_copy("s") == "s" and deep_copy(None) is None
    assert deep_copy((1, [2])) == [1, [2]]


def test_an_owned_output_is_moved_in_and_a_shared_one_copied():
    from txcl.values.merge import merge_into

    inner, items = {"b": 1}, [1, 2]
    shared = {"a": inner, "l": items}
    target: dict = {"l": [0]}
    merge_into(target, shared)
    assert target == {"a": {"b": 1}, "l": [0, 1, 2]}
    assert target["a"] is not inner  # copied: the output's owner may keep using it
    owned_inner = {"b": 1}
    owned = {"a": owned_inner, "n": {"m": [3]}}
    target = {"n": {"k": 0}}
    merge_into(target, owned, owned=True)
    assert target == {"a": {"b": 1}, "n": {"k": 0, "m": [3]}}
    assert target["a"] is owned_inner and target["n"]["m"] is owned["n"]["m"]  # moved, not copied


def test_fused_scopes_move_outputs_without_aliasing_the_input(workspace, run_tree):
    """A rule without EXEC emits copies of what it reads, so moving its output into the
    envelope never ties two paths together: a later change to the copy leaves the source."""
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .copy = .orig, .list = .orig.items",
                    "OPS/s/0200/b.txcl": "EMIT .copy.extra = 1, .list = [9]",
                    "OPS/s/0300/c.txcl": "EMIT .orig.items = [7]"})
    outcome, _store = run_tree(ws, {"orig": {"k": "v", "items": [1]}})
    env = {k: v for k, v in outcome.envelope.items() if not k.startswith("_")}
    assert env == {"orig": {"k": "v", "items": [1, 7]}, "copy": {"k": "v", "items": [1], "extra": 1},
                   "list": [1, 9]}
