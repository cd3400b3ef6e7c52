"""Size caps that keep every cost linear and bounded: what a diagnostic quotes and shows, the
strings functions may build, the rule text accepted, and the memory of the parse cache."""

from __future__ import annotations

import pytest

import txcl
from txcl.check import check_source
from txcl.errors import MAX_QUOTED, Diagnostic, Position, Span, TxclEvalError
from txcl.functions.helpers import MAX_STRING_BYTES
from txcl.syntax import parser


def test_a_message_quotes_a_huge_token_cut_short() -> None:
    for text in ["SET .a = " + ".b" * 20_000 + "..", "SET " + ".x" * 20_000 + " 1",
                 'EXEC "' + "q" * 20_000 + '"', "SET .a = &" + "f" * 20_000 + "(1)"]:
        found = check_source(text, "x.txcl")
        assert found, text[:40]
        for d in found:
            assert len(d.message) < 500 and len(d.hint or "") < 500, d.message[:100]
            assert "…" in d.message
            assert all(len(word) <= MAX_QUOTED for word in d.message.split())


def test_the_excerpt_of_a_long_line_is_a_window_around_the_span() -> None:
    line = "SET .a = " + "x" * 5000 + " .b" + " y" * 3000
    start = line.index(".b")
    d = Diagnostic("TX201", "m", "f.txcl", Span(Position(1, start + 1, start), Position(1, start + 3, start + 2)))
    shown, carets = d.render(line).splitlines()[2:4]
    assert len(shown) < 200 and shown.startswith("1 | …") and shown.endswith("…")
    assert shown[carets.index("^"):carets.index("^") + 2] == ".b"
    assert carets.count("^") == 2


def test_every_finding_of_a_big_file_renders_its_own_line() -> None:
    text = "SET .v0 = 0,\n" + "".join(f"  .v{i} = 0{i},\n" for i in range(1, 3000)) + "  .end = 1\n"
    rendered = [d.render() for d in check_source(text, "x.txcl")]
    assert len(rendered) == 2999
    assert rendered[1233].splitlines()[2] == "1235 |   .v1234 = 01234,"


def test_a_function_builds_no_string_past_one_mib_beyond_its_arguments() -> None:
    with pytest.raises(TxclEvalError, match=r"&to_json: result would be 4,194,305 bytes"):
        txcl.eval_expression('&to_json(&split(&repeat("ab", 524288), ""))', {})
    with pytest.raises(TxclEvalError, match=r"&join: 1,048,575 separators of 1,000 bytes would add more than 1 MiB"):
        txcl.eval_expression('&join(&split(&repeat("a", 1048576), ""), &repeat("x", 1000))', {})
    with pytest.raises(TxclEvalError, match=r"&join: result would be .*1 MiB longer"):
        txcl.eval_expression('&join(.parts, "")', {"parts": [1234567890] * 200_000})  # numbers bring no strings
    # working on a big input is fine
    big = "A" * (3 * MAX_STRING_BYTES)
    assert len(txcl.eval_expression('&concat(.big, "!")', {"big": big})) == len(big) + 1
    assert txcl.eval_expression('&len(&substr(.big, 0, 2000000))', {"big": big}) == 2_000_000
    # up to 1 MiB is always allowed
    assert len(txcl.eval_expression('&concat(&repeat("a", 1048575), "b")', {})) == MAX_STRING_BYTES


def test_check_reports_a_literal_call_that_would_build_too_much_as_tx207() -> None:
    found = check_source('EMIT .a = &to_json(&split(&repeat("ab", 524288), ""))\n', "x.txcl")
    assert [d.code for d in found] == ["TX207"]
    assert "1 MiB" in found[0].message


def test_the_parse_cache_is_bounded_by_the_text_it_holds() -> None:
    parser.clear_cache()
    base = "EMIT " + ",\n     ".join(f'.field{i} = "value {i}"' for i in range(8000)) + "\n"
    for k in range(12):  # an editor re-parsing a 250 KB file on every edit (3 MB in all)
        txcl.parse_rule(base + f"# edit {k}\n")
    assert parser._cache_text <= parser._CACHE_TEXT_MAX
    assert parser._cache_text == sum(len(text) for text, _ in parser._CACHE)
    assert 1 <= len(parser._CACHE) <= parser._CACHE_TEXT_MAX // len(base)
    assert txcl.parse_rule(base + "# edit 11\n") is txcl.parse_rule(base + "# edit 11\n")  # newest kept
    parser.clear_cache()
    assert parser._cache_text == 0 and not parser._CACHE


def _nested(depth: int) -> dict:
    value: dict = {}
    cur = value
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return value


@pytest.fixture
def default_recursion_limit():
    """Python's default recursion limit, as a program calling txcl has it: some of the calls
    below learn that a value is too deep from a RecursionError, and a test run earlier in the
    same process may have left the limit raised (Hypothesis raises it while it runs)."""
    import sys

    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(previous)


@pytest.mark.parametrize("depth", [500, 3000])
def test_a_too_deep_value_given_to_the_python_api_is_a_clear_error(depth: int, tmp_path,
                                                                   default_recursion_limit) -> None:
    deep = _nested(depth)
    (tmp_path / "OPS/s/100").mkdir(parents=True)
    (tmp_path / "OPS/s/100/a.txcl").write_text("EMIT .x = 1\n")
    calls = [lambda: txcl.eval_expression(".a", deep), lambda: txcl.eval_expression("&to_json(.a)", deep),
             lambda: txcl.merge(deep, {"b": 1}), lambda: txcl.apply_rule(txcl.parse_rule("EMIT .x = 1"), deep),
             lambda: txcl.Interpreter(txcl.load_ops(tmp_path)).run_sync(deep, stack="s")]
    for call in calls:
        # (a value read into a rule's value is refused at the 200 levels rule values keep)
        with pytest.raises(txcl.TxclDepthError, match="(256|200) levels"):
            call()
    assert txcl.merge(_nested(200), {"b": 1})["b"] == 1  # within the limit: fine
