"""Deeply nested input is a diagnostic (TX033, with its position), never a RecursionError —
in the parser, the checker, the formatter and the language server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import txcl
from txcl.check import check_source
from txcl.fmt import format_text

DEEP = {
    "open parens in WHEN": "WHEN " + "(" * 330 + ".a == 1",
    "bangs in WHEN": "WHEN " + "!" * 986 + ".a",
    "arrays in SET": "SET .a = " + "[" * 987 + "]" * 987,
    "calls in SET": "SET .a = " + "&array(" * 493 + ")" * 493,
    "closed parens in WHEN": "WHEN " + "(.a == 1 || " * 165 + "(.b == 2 && .c == 3)" + ")" * 166,
    "calls in EMIT": "EMIT .a = " + "&concat(" * 200 + '"x"' + ")" * 200,
    "arrays of calls": "SET .a = " + "&array(" * 331 + "1" + ")" * 331,
}


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_deep_rules_get_tx033_everywhere(text):
    with pytest.raises(txcl.TxclSyntaxError) as exc:
        txcl.parse_rule(text)
    diag = exc.value.diagnostics[0]
    assert diag.code == "TX033" and diag.line == 1 and 1 <= diag.column <= len(text)
    assert diag.span.end.offset <= len(text)
    assert [d.code for d in check_source(text, "deep.txcl")] == ["TX033"]
    with pytest.raises(txcl.TxclSyntaxError):
        format_text(text)
    from txcl.lsp.analysis import diagnostics_for

    assert [d.code for d in diagnostics_for(text, "deep.txcl")] == ["TX033"]


def test_nesting_up_to_the_limit_parses():
    assert txcl.parse_rule("WHEN " + "(" * 64 + ".a == 1" + ")" * 64) is not None
    assert txcl.parse_rule("SET .a = " + "&array(" * 63 + "1" + ")" * 63) is not None


def test_one_deep_file_does_not_hide_the_findings_of_the_others(tmp_path):
    scope = tmp_path / "OPS" / "s" / "100"
    scope.mkdir(parents=True)
    (scope / "deep.txcl").write_text(DEEP["calls in SET"] + "\n")
    (scope / "plain.txcl").write_text("WHEN .a == 01\nEMIT .b = 1\n")
    done = subprocess.run([str(Path(sys.executable).parent / "txcl"), "check", str(tmp_path), "--output-format",
                           "concise"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "TX033" in done.stdout and "TX201" in done.stdout


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["(", "[", "!", "&add(", "&array(", ".a", "1", ")", "]", ",", "==", "&&"]),
                min_size=1, max_size=3000))
def test_random_deep_soup_only_raises_syntax_errors(parts):
    text = "WHEN " + "".join(parts)
    try:
        txcl.parse_rule(text)
    except txcl.TxclSyntaxError as exc:
        assert all(d.span.end.offset <= len(text) for d in exc.diagnostics)
    check_source(text, "soup.txcl")
