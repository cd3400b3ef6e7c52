"""“Did you mean …?”: ranked by edit distance, then shared prefix, then how common a name is;
used for functions, keywords, subcommands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from txcl.functions.registry import suggest
from txcl.suggest import did_you_mean, edit_distance

TXCL = str(Path(sys.executable).parent / "txcl")


@pytest.mark.parametrize("typed, expected", [
    ("ad", "add"), ("concta", "concat"), ("lenn", "len"), ("Add", "add"), ("nwo", "now"),
    ("try_jsn", "try_json"), ("spilt", "split"), ("b64decod", "b64decode"), ("xyz", None), ("q", None),
])
def test_function_suggestions(typed, expected):
    assert suggest(typed) == expected


def test_ties_go_to_the_longer_shared_prefix_then_the_more_common_name():
    assert did_you_mean("ad", ["pad", "add"]) == "add"  # both one edit away; "add" shares "ad"
    assert did_you_mean("sbu", ["sub", "sha256"], ["sub"]) == "sub"
    assert did_you_mean("xb", ["ab", "cb"], ["cb", "ab"]) == "cb"  # same distance and prefix: the common one


def test_edit_distance_counts_a_swap_as_one():
    assert edit_distance("spilt", "split") == 1 and edit_distance("abc", "abc") == 0
    assert edit_distance("", "ab") == 2 and edit_distance("kitten", "sitting") == 3


def test_a_mistyped_function_gets_the_hint_in_its_diagnostic():
    import txcl

    with pytest.raises(txcl.TxclSyntaxError) as exc:
        txcl.parse_rule('EMIT .a = &ad(1, 2)')
    assert "did you mean &add?" in str(exc.value)


def test_a_mistyped_subcommand_suggests_the_right_one():
    done = subprocess.run([TXCL, "srve"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "No such command 'srve'. Did you mean 'serve'?" in done.stderr
    far = subprocess.run([TXCL, "zzzz"], capture_output=True, text=True, timeout=60)
    assert far.returncode == 2 and "Did you mean" not in far.stderr


def test_noqa_with_an_unknown_code_says_so(tmp_path):
    from txcl.check import check_source

    diags = check_source("WHEN .a == 1  # noqa: TX999\nEMIT .b = 1\n", "r.txcl")
    assert [d.code for d in diags] == ["TX303"]
    assert "unknown rule code: TX999" in diags[0].message and "unused" not in diags[0].message


def test_a_hint_lines_up_with_the_gutter_of_two_digit_line_numbers():
    from txcl.errors import Diagnostic, Position, Span

    text = "\n" * 11 + "EMIT .a = 012\n"
    d = Diagnostic("TX201", "m", "f.txcl", Span(Position(12, 11, 21), Position(12, 14, 24)), hint="write 12",
                   source=text)
    lines = d.render().splitlines()
    assert lines[1] == "   |" and lines[-1] == "   = hint: write 12"
    assert lines[-1].index("=") == lines[1].index("|")
