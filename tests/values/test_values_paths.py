"""paths: read, has, write (padding, containers, key on array), delete, path strings."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txcl.values.paths import (
    MISSING, PathError, delete, delete_target, has, read, split_path_string, split_set_path, write,
    write_keys,
)


def test_missing_sentinel():
    assert not MISSING
    assert repr(MISSING) == "MISSING"
    assert MISSING is not None
    assert copy.deepcopy(MISSING) is MISSING


DOC = {"a": {"b": [10, {"c": None}, "x"]}, "n": 5, "s": "text", "1": "one"}


@pytest.mark.parametrize("segments,expected", [
    ((), DOC),
    (("a", "b", "0"), 10),
    (("a", "b", "00"), 10),
    (("a", "b", "0002"), "x"),
    (("a", "b", "1", "c"), None),
    (("1",), "one"),
    (("a", "b", "3"), MISSING),
    (("a", "b", "-1"), MISSING),
    (("a", "b", "x"), MISSING),
    (("a", "b", "+1"), MISSING),
    (("a", "b", "\u0661"), MISSING),  # Arabic-Indic digit is not ASCII
    (("a", "b", "1" * 40), MISSING),
    (("a", "b", "0" * 30 + "1", "c"), None),
    (("n", "x"), MISSING),
    (("s", "0"), MISSING),
    (("zz",), MISSING),
    (("a", "b", "1", "c", "d"), MISSING),
])
def test_read(segments, expected):
    got = read(DOC, segments)
    if expected is MISSING:
        assert got is MISSING
    else:
        assert got == expected


def test_present_null_is_not_missing():
    assert read({"a": None}, ("a",)) is None
    assert has({"a": None}, ("a",))
    assert not has({"a": None}, ("b",))
    assert not has(None, ("a",))


def test_read_non_container_root():
    assert read(5, ("a",)) is MISSING
    assert read(None, ()) is None


def test_write_object_key_numeric_or_not():
    doc = {"a": {}}
    assert write(doc, ("a", "0"), 1) is doc
    assert doc == {"a": {"0": 1}}


def test_write_creates_containers_by_next_segment():
    doc: dict = {}
    write(doc, ("web", "res", "headers", "cache-control", "0"), "no-store")
    assert doc == {"web": {"res": {"headers": {"cache-control": ["no-store"]}}}}


def test_write_replaces_non_container_intermediate():
    doc = {"a": 5, "b": "x"}
    write(doc, ("a", "k"), 1)
    write(doc, ("b", "2"), 1)
    assert doc == {"a": {"k": 1}, "b": [None, None, 1]}


def test_write_pads_with_nulls_and_replaces_in_range():
    doc = {"l": [1]}
    write(doc, ("l", "3"), 4)
    write(doc, ("l", "0"), 0)
    assert doc == {"l": [0, None, None, 4]}


def test_write_key_on_array_fails_and_changes_nothing():
    doc = {"l": [1, 2], "m": {}}
    before = copy.deepcopy(doc)
    with pytest.raises(PathError, match='cannot use key "x" on an array'):
        write(doc, ("l", "x"), 1)
    with pytest.raises(PathError):
        write(doc, ("m", "new", "0", "70000"), 1)  # fails on a created array
    assert doc == before


def test_padding_limit_single_segment():
    doc: dict = {}
    write(doc, ("a", "65535"), 1)
    assert len(doc["a"]) == 65536
    with pytest.raises(PathError, match="65535"):
        write({}, ("a", "65536"), 1)


def test_padding_limit_summed_over_path():
    doc: dict = {}
    before = copy.deepcopy(doc)
    with pytest.raises(PathError):
        write(doc, ("a", "40000", "30000"), 1)
    assert doc == before
    write(doc, ("a", "40000", "25535"), 1)
    assert doc["a"][40000][25535] == 1


def test_padding_counts_from_existing_length():
    doc = {"a": [0] * 10}
    write(doc, ("a", str(10 + 65535)), 1)
    assert len(doc["a"]) == 10 + 65536
    with pytest.raises(PathError):
        write({"a": [0] * 10}, ("a", str(10 + 65536)), 1)


def test_write_on_non_container_root_replaces_root():
    assert write(None, ("a",), 1) == {"a": 1}
    assert write(5, ("0",), 1) == [1]
    assert write("s", ("0", "x"), 1) == [{"x": 1}]
    assert write({"a": 1}, (), 7) == 7


def test_force_key_makes_objects():
    assert write(None, ("2024",), 1, force_key={0}) == {"2024": 1}
    assert write({}, ("a", "0", "1"), 1, force_key={1}) == {"a": {"0": [None, 1]}}
    with pytest.raises(PathError):
        write({"a": [1]}, ("a", "0"), 1, force_key={1})


def test_delete_object_member_and_array_element():
    doc = {"a": {"b": 1, "c": 2}, "l": [0, 1, 2, 3]}
    delete(doc, ("a", "b"))
    delete(doc, ("l", "01"))
    assert doc == {"a": {"c": 2}, "l": [0, 2, 3]}


def test_delete_missing_is_ignored():
    doc = {"a": {"b": 1}, "l": [1]}
    before = copy.deepcopy(doc)
    for segs in [("x",), ("a", "x"), ("a", "b", "c"), ("l", "5"), ("l", "k"), ()]:
        delete(doc, segs)
    assert doc == before


@pytest.mark.parametrize("text,segments", [
    ("a.b", ("a", "b")),
    ("labels.app\\.kubernetes\\.io", ("labels", "app.kubernetes.io")),
    ("a\\\\.b", ("a\\", "b")),
    ("a\\b", ("ab",)),
    ("", ("",)),
    ("a.", ("a", "")),
    ("a\\", ("a\\",)),
    ("0.1", ("0", "1")),
])
def test_split_path_string(text, segments):
    assert split_path_string(text) == segments


@pytest.mark.parametrize("text,segments", [
    ("  @web.req.body ", ("_txc", "web", "req", "body")),
    (".a.b", ("a", "b")),
    ("a.b", ("a", "b")),
    ("", ()),
    ("   ", ()),
    ("@halt", ("_txc", "halt")),
])
def test_delete_target(text, segments):
    assert delete_target(text) == segments


def test_split_set_path_colon():
    assert split_set_path("a.:2024.\\:x.0") == (("a", "2024", ":x", "0"), frozenset({1}))
    assert split_set_path(":0") == (("0",), frozenset({0}))


# ---------------------------------------------------------------- write_keys
# `write_keys` is what a planned assignment uses when no segment of its target is numeric;
# it must do exactly what `write` does, including refusing a key on an array and leaving
# the document untouched when it refuses.

_keys = st.sampled_from(["a", "b", "c", "x-y", "_txc", ""])
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=2))
_docs = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)), max_leaves=12)


def _outcome(fn, doc, segments, value):
    try:
        root = fn(doc, segments, value)
    except PathError as exc:
        return ("error", str(exc), doc)
    return ("ok", root, doc)


@settings(max_examples=400, deadline=None)
@given(doc=st.one_of(_docs, st.dictionaries(_keys, _docs, max_size=4)),
       segments=st.lists(_keys, min_size=1, max_size=4).map(tuple), value=_leaf)
def test_write_keys_does_what_write_does(doc, segments, value):
    expected = _outcome(write, copy.deepcopy(doc), segments, value)
    got = _outcome(write_keys, copy.deepcopy(doc), segments, value)
    assert got == expected


def test_write_keys_refuses_a_key_on_an_array_and_changes_nothing():
    doc = {"a": [1, 2]}
    with pytest.raises(PathError):
        write_keys(doc, ("a", "b"), 1)
    assert doc == {"a": [1, 2]}


def test_write_keys_creates_objects_and_replaces_scalars():
    doc = {"a": 5}
    assert write_keys(doc, ("a", "b", "c"), 1) is doc
    assert doc == {"a": {"b": {"c": 1}}}
