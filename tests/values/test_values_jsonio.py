"""jsonio: loads number typing, rejections, duplicates; dumps number forms and escapes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txcl.values.jsonio import JsonError, dumps, loads


def test_integer_form_numbers_are_exact_ints():
    v = loads('{"a": 12345678901234567890123, "b": -0, "c": 7}')
    assert v == {"a": 12345678901234567890123, "b": 0, "c": 7}
    assert all(type(x) is int for x in v.values())


def test_integers_are_exact_up_to_the_digit_limit():
    digits = "9" * 4300
    assert loads(digits) == int("9" * 2150) * 10**2150 + int("9" * 2150)


@pytest.mark.parametrize("text,expected", [("1.5", 1.5), ("1e3", 1000.0), ("2.0", 2.0), ("-1E-2", -0.01)])
def test_fraction_or_exponent_gives_float(text, expected):
    v = loads(text)
    assert type(v) is float and v == expected


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", '{"a": NaN}', "[1, Infinity]"])
def test_nan_and_infinity_tokens_rejected(text):
    with pytest.raises(JsonError):
        loads(text)


def test_out_of_range_float_rejected():
    with pytest.raises(JsonError, match="out of range"):
        loads("[1e400]")


def test_duplicates_first_and_last():
    text = '{"a": 1, "b": {"x": 1, "x": 2}, "a": 3}'
    assert loads(text) == {"a": 1, "b": {"x": 1}}
    assert loads(text, duplicates="first") == {"a": 1, "b": {"x": 1}}
    assert loads(text, duplicates="last") == {"a": 3, "b": {"x": 2}}


def test_bad_duplicates_mode():
    with pytest.raises(ValueError):
        loads("{}", duplicates="middle")


def test_error_has_line_and_column():
    with pytest.raises(JsonError) as info:
        loads('{\n  "a": 1,\n  "b": ]\n}')
    assert info.value.line == 3
    assert info.value.column == 8
    assert "line 3, column 8" in str(info.value)


@pytest.mark.parametrize("text", ["", "{", "[1] x", "{'a': 1}", "01", '"\x01"', "tru"])
def test_invalid_json(text):
    with pytest.raises(JsonError):
        loads(text)


def test_lone_surrogate_escape_becomes_replacement_char():
    assert loads('["\\ud800x", "\\ud83d\\ude00"]') == ["\ufffdx", "\U0001F600"]


def test_jsonerror_is_valueerror():
    assert issubclass(JsonError, ValueError)


# ---------------------------------------------------------------- dumps


@pytest.mark.parametrize("value,text", [
    (42.0, "42"),
    (1e-7, "1e-7"),
    (1.5e21, "1.5e+21"),
    (1e21, "1e+21"),
    (1e20, "100000000000000000000"),
    (0.5, "0.5"),
    (1e-6, "0.000001"),
    (1.5e-6, "0.0000015"),
    (9.99e-7, "9.99e-7"),
    (123456789.125, "123456789.125"),
    (-2.5, "-2.5"),
    (0.1 + 0.2, "0.30000000000000004"),
    (1.7e9, "1700000000"),
    (12, "12"),
    (-12345678901234567890, "-12345678901234567890"),
    (True, "true"),
    (False, "false"),
    (None, "null"),
])
def test_json_number_forms(value, text):
    assert dumps(value) == text


def test_compact_document_order_and_raw_non_ascii():
    assert dumps({"b": [1, 2.5, "é"], "a": {"x": None}}) == '{"b":[1,2.5,"é"],"a":{"x":null}}'


def test_sort_keys_every_level():
    assert dumps({"b": {"d": 1, "c": 2}, "a": [{"z": 1, "y": 2}]}, sort_keys=True) == \
        '{"a":[{"y":2,"z":1}],"b":{"c":2,"d":1}}'


def test_html_escape():
    out = dumps({"k<": "<a href='x'>&\u2028\u2029 é"}, html_escape=True)
    assert out == '{"k\\u003c":"\\u003ca href=\'x\'\\u003e\\u0026\\u2028\\u2029 é"}'
    assert loads(out) == {"k<": "<a href='x'>&\u2028\u2029 é"}


def test_string_escapes():
    assert dumps('a"b\\c\n\x01') == '"a\\"b\\\\c\\n\\u0001"'


def test_indent():
    assert dumps({"a": [1, {}], "b": []}, indent=2) == '{\n  "a": [\n    1,\n    {}\n  ],\n  "b": []\n}'


@pytest.mark.parametrize("value", [math.nan, math.inf, [-math.inf], {"a": object()}, {1: "x"}])
def test_values_without_json_form(value):
    with pytest.raises(JsonError):
        dumps(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=25,
)


def _same(a, b) -> bool:
    """Equality where an integral float may come back as an int of the same value."""
    if isinstance(a, float) and not isinstance(b, bool) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_dumps_loads_round_trip(value):
    for kwargs in ({}, {"sort_keys": True}, {"html_escape": True}, {"indent": 2}):
        back = loads(dumps(value, **kwargs))
        assert _same(value, back)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_json_form_reads_back_exactly(x):
    text = dumps(x)
    assert float(text) == x
    assert "e-0" not in text and "e+0" not in text
    if x.is_integer() and abs(x) < 1e21:
        assert "." not in text and "e" not in text


def test_depth_and_integer_limits_are_clear_errors():
    """Valid JSON that would break later steps is refused at the door with its reason."""
    import pytest

    from txcl.values.jsonio import MAX_DEPTH, JsonError, dumps, loads, too_deep

    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    for n in (MAX_DEPTH + 1, 5000):
        with pytest.raises(JsonError, match=f"deeper than {MAX_DEPTH} levels"):
            loads("[" * n + "]" * n)
    assert too_deep({"a": [[{"b": []}]]}, limit=4) and not too_deep({"a": [[{}]]}, limit=4)
    with pytest.raises(JsonError, match="an integer of 5000 digits"):
        loads("9" * 5000)
    assert loads("9" * 4300) == int("9" * 4300)
    with pytest.raises(JsonError, match="more than 4300 digits"):
        dumps({"n": 10 ** 5000})


def test_cli_reports_a_too_deep_or_too_long_input_without_a_traceback(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    txcl = str(Path(sys.executable).parent / "txcl")
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' + "[" * 600 + "]" * 600 + "}")
    done = subprocess.run([txcl, "eval", ".a", "--input", f"@{deep}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "deeper than 256 levels" in done.stderr and "Traceback" not in done.stderr
    big = subprocess.run([txcl, "eval", '&json("' + "9" * 5000 + '")'], capture_output=True, text=True, timeout=60)
    assert big.returncode == 1 and "5000 digits" in big.stderr and "Traceback" not in big.stderr


_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.sampled_from([1.0, -0.0, 0.5, 1e-4, 9.999e-5, 1e15, 123456789012345.6, 1e21, 2.5e-7])
            | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(_values, st.booleans())
def test_the_compiled_writer_writes_exactly_what_the_careful_one_does(value, html):
    """`dumps` hands values orjson writes alike to orjson; its text must be byte for byte
    the careful serializer's (`_compact`), whatever the value holds."""
    from txcl.values import jsonio

    careful = jsonio._compact(value)
    if html:
        careful = careful.translate(jsonio._HTML)
    assert dumps(value, html_escape=html) == careful


@settings(max_examples=300, deadline=None)
@given(_values)
def test_the_bytes_writer_writes_the_text_writer_s_utf8(value):
    """`dumps_utf8` (response bodies, request contents) is `dumps` encoded, byte for byte."""
    from txcl.values.jsonio import dumps_utf8

    assert dumps_utf8(value) == dumps(value).encode("utf-8")


def test_values_orjson_cannot_write_alike_take_the_careful_path():
    from txcl.values import jsonio

    assert jsonio._orjson_writes_alike({"a": [1, "x", 2.5, None, True]})
    for value in ({"a": 1.0}, [1e-5], {"a": {"b": [1e15]}}, [(1, 2)], {"a": object()}):
        assert not jsonio._orjson_writes_alike(value)
    assert dumps({"a": [2.0, 1e-5, 1e21]}) == '{"a":[2,0.00001,1e+21]}'
    assert dumps([2**64, "\ud800"]) == '[18446744073709551616,"\ud800"]'  # orjson refuses both
    assert jsonio.dumps_utf8({"a": [2.0, "Zoë"]}) == '{"a":[2,"Zoë"]}'.encode()
    assert jsonio.dumps_utf8([2**64]) == b"[18446744073709551616]"


def test_a_value_that_contains_itself_is_refused_not_walked_forever():
    """Only the Python API can hand over such a value: both writers refuse it at once."""
    from txcl.errors import TxclDepthError, check_depth

    looped: dict = {"a": 1.5}
    looped["self"] = looped
    looped["again"] = looped
    with pytest.raises(JsonError, match="nested too deeply"):
        dumps(looped)
    with pytest.raises(TxclDepthError):
        check_depth(looped)
    assert [dumps(v) for v in (1.0, -0.0, 2.5, 1e20, "x", None, True)] == ["1", "-0", "2.5", "100000000000000000000",
                                                                           '"x"', "null", "true"]


@pytest.mark.parametrize("use_orjson", [True, False])
def test_check_depth_draws_the_line_at_the_limit_with_or_without_orjson(monkeypatch, use_orjson):
    """Up to 256 levels pass, 257 are refused, whether orjson's quick answer is used or the
    walk decides (values orjson does not write — big integers, tuples — are walked too)."""
    import txcl.errors as errors
    from txcl.errors import TxclDepthError, check_depth

    if not use_orjson:
        monkeypatch.setattr(errors, "_orjson", None)

    def nested(levels: int, leaf=1):
        value = leaf
        for i in range(levels):
            value = [value] if i % 2 else {"k": value}
        return value

    for leaf in (1, 2**70, (1, 2)):
        check_depth(nested(256, leaf))
        with pytest.raises(TxclDepthError):
            check_depth(nested(257, leaf))
    check_depth(nested(10), limit=10)
    with pytest.raises(TxclDepthError):
        check_depth(nested(11), limit=10)


@pytest.mark.parametrize("value, shown", [(math.nan, "nan"), (math.inf, "inf"), ([1, {"a": -math.inf}], "-inf")])
def test_a_nan_or_an_infinity_is_named_as_what_has_no_json_form(value, shown):
    # (it used to be reported as "an integer of more than 4300 digits")
    with pytest.raises(JsonError, match=f"^{shown} has no JSON form$"):
        dumps(value)
