"""The registry: contents, arity rules and texts, call errors, suggestions."""

from __future__ import annotations

import pytest

from txcl.errors import TxclEvalError
from txcl.functions.registry import REGISTRY, FunctionSpec, call, lookup, suggest

ALL = {
    "uuid", "now", "tz", "tz_offsets", "b64encode", "b64decode", "urlencode", "urldecode",
    "json", "to_json", "get", "has", "set", "object", "array", "concat", "len", "split", "join",
    "substr", "repeat", "pad", "sha256", "add", "sub", "mul", "div", "mod",
}
TRIES = {"try_json", "try_b64decode", "try_urldecode", "try_get", "try_substr", "try_tz_offsets"}


def test_registry_has_every_function_and_exactly_six_try_variants():
    assert set(REGISTRY) == ALL | TRIES
    assert {n for n, s in REGISTRY.items() if s.is_try} == TRIES
    assert "include" not in REGISTRY


@pytest.mark.parametrize("name", sorted(ALL | TRIES))
def test_spec_fields(name):
    spec = lookup(name)
    assert isinstance(spec, FunctionSpec)
    assert spec.name == name
    assert spec.signature.startswith(name + "(")
    assert spec.doc and "\n" not in spec.doc
    assert callable(spec.impl)
    if spec.is_try:
        assert spec.min_args == 0 and spec.max_args is None and spec.accepts(17)


@pytest.mark.parametrize("name,lo,hi,even", [
    ("uuid", 0, 0, False), ("now", 0, 1, False), ("tz", 3, 4, False), ("tz_offsets", 3, 3, False),
    ("b64encode", 1, 1, False), ("to_json", 1, 1, False), ("get", 2, 2, False),
    ("set", 3, 3, False), ("object", 0, None, True), ("array", 0, None, False),
    ("concat", 0, None, False), ("substr", 3, 3, False), ("pad", 3, 3, False),
    ("add", 2, 2, False), ("mod", 2, 2, False),
])
def test_arity(name, lo, hi, even):
    spec = REGISTRY[name]
    assert (spec.min_args, spec.max_args, spec.even_args) == (lo, hi, even)


def test_accepts():
    assert REGISTRY["now"].accepts(0) and REGISTRY["now"].accepts(1) and not REGISTRY["now"].accepts(2)
    assert REGISTRY["object"].accepts(0) and REGISTRY["object"].accepts(4)
    assert not REGISTRY["object"].accepts(3)
    assert REGISTRY["concat"].accepts(100)
    assert not REGISTRY["substr"].accepts(2)


@pytest.mark.parametrize("name,text", [
    ("substr", "takes 3 arguments"),
    ("now", "takes 0 or 1 argument"),
    ("object", "takes an even number of arguments"),
    ("uuid", "takes no arguments"),
    ("len", "takes 1 argument"),
    ("tz", "takes 3 or 4 arguments"),
    ("concat", "takes any number of arguments"),
])
def test_arity_text(name, text):
    assert REGISTRY[name].arity_text() == text


def test_call_checks_arity():
    with pytest.raises(TxclEvalError, match=r"^&substr: takes 3 arguments, got 2$"):
        call("substr", ["a", 1])
    with pytest.raises(TxclEvalError, match=r"^&uuid: takes no arguments, got 1$"):
        call("uuid", [1])
    with pytest.raises(TxclEvalError, match=r"^&object: takes an even number of arguments, got 3$"):
        call("object", ["a", 1, "b"])


def test_call_unknown_function():
    with pytest.raises(TxclEvalError, match="^&include: unknown function"):
        call("include", ["file"])


def test_deterministic_flags():
    assert not REGISTRY["uuid"].deterministic and not REGISTRY["now"].deterministic
    assert not REGISTRY["tz"].deterministic
    assert REGISTRY["concat"].deterministic and REGISTRY["json"].deterministic


def test_names_are_case_sensitive():
    assert lookup("Concat") is None
    assert lookup("concat") is not None


@pytest.mark.parametrize("wrong,right", [("concta", "concat"), ("b64decod", "b64decode"),
                                         ("&lenn", "len"), ("Substr", "substr"),
                                         ("tryjson", "try_json")])
def test_suggest(wrong, right):
    assert suggest(wrong) == right


def test_suggest_nothing_close():
    assert suggest("xyzzyqwerty") is None
