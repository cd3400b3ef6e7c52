"""The store's document columns are written and read with the `json` module's C encoder and
scanner called directly: the same text as `json.dumps(separators=(",", ":"),
ensure_ascii=False)`, the same values as `json.loads`, the same errors."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txcl.store import jsoncols

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def _standard(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_the_direct_encoder_and_scanner_are_in_use():
    """On CPython both exist, so the quick path is the one the store runs (not the fallback)."""
    assert jsoncols._encode is not jsoncols._standard_encode
    assert jsoncols._scan is not None


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_documents_are_written_as_json_dumps_writes_them_and_read_back_alike(value):
    text = jsoncols.dumps(value)
    assert text == (None if value is None else _standard(value))
    if value is not None:
        assert jsoncols.loads(text) == json.loads(text)


def test_values_beyond_the_common_shapes():
    value = {"big": 2**80, "neg": -0.0, "exp": 1e300, "nan": float("nan"), "lone": "\ud800", "sep": "\u2028",
             "keys": {2: "int key", None: "null key", True: "bool key"}}
    assert jsoncols.dumps(value) == _standard(value)
    back = jsoncols.loads(jsoncols.dumps(value))
    assert back["big"] == 2**80 and type(back["big"]) is int
    assert math.isnan(back["nan"]) and back["keys"] == {"2": "int key", "null": "null key", "true": "bool key"}
    assert jsoncols.dumps(None) is None and jsoncols.loads(None) is None
    with pytest.raises(TypeError):
        jsoncols.dumps({"not json": object()})


@pytest.mark.parametrize("text, value", [(' {"a": 1}', {"a": 1}), ('[1, 2]\n', [1, 2]), ('"x"', "x"), ("7", 7)])
def test_text_with_surrounding_whitespace_is_read_as_json_loads_reads_it(text, value):
    assert jsoncols.loads(text) == value


@pytest.mark.parametrize("text", ["", "{", "[1] [2]", "nope", '{"a": 1} x'])
def test_text_that_is_not_one_json_document_raises_as_json_loads_does(text):
    with pytest.raises(json.JSONDecodeError) as ours:
        jsoncols.loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


def test_an_encoder_that_writes_the_probe_differently_is_not_used(monkeypatch):
    """Should an interpreter's C encoder take other arguments or write otherwise, the store
    falls back to the standard encoder rather than write other text."""
    monkeypatch.setattr(jsoncols, "c_make_encoder", lambda *args: (lambda value, level: ["something else"]))
    assert jsoncols._direct_encoder() is None
    monkeypatch.setattr(jsoncols, "c_make_encoder", lambda *args: (lambda value: ["wrong arity"]))
    assert jsoncols._direct_encoder() is None
    monkeypatch.setattr(jsoncols, "c_make_encoder", None)
    assert jsoncols._direct_encoder() is None
