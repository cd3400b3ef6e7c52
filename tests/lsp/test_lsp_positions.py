"""txcl (1-based, code points) ↔ LSP (0-based, code units) positions."""

from __future__ import annotations

import pytest

from txcl.lsp.positions import UTF8, UTF16, UTF32, codepoints_before, from_lsp, split_lines, to_lsp

TEXT = 'WHEN .a == 1\nSET .s = "😀é" .x "EUR"\n'
LINES = split_lines(TEXT)


@pytest.mark.parametrize("encoding,expected", [(UTF16, 15), (UTF8, 18), (UTF32, 14)])
def test_columns_after_non_bmp_and_accented_characters(encoding: str, expected: int) -> None:
    # `.x` is at txcl line 2, column 15 (1-based code points) with 😀 (UTF-16: 2 units,
    # UTF-8: 4) and é (UTF-8: 2) before it.
    assert LINES[1][14:16] == ".x"
    assert to_lsp(LINES, 2, 15, encoding) == (1, expected)
    assert from_lsp(LINES, 1, expected, encoding) == len(LINES[0]) + 1 + 14


def test_end_of_input_is_clamped() -> None:
    assert to_lsp(LINES, 3, 1) == (2, 0)  # the empty last line after the final LF
    assert to_lsp(LINES, 9, 9) == (2, 0)
    assert to_lsp(["ab"], 1, 99) == (0, 2)
    assert to_lsp([], 1, 1) == (0, 0)
    assert from_lsp(LINES, 99, 0) == len(LINES[0]) + len(LINES[1]) + 2


def test_inside_a_surrogate_pair_rounds_down() -> None:
    line = 'a😀b'
    assert codepoints_before(line, 2, UTF16) == 1  # between the two halves of 😀
    assert codepoints_before(line, 3, UTF16) == 2
    assert codepoints_before(line, 99, UTF16) == 3


def test_round_trip_every_column() -> None:
    for encoding in (UTF8, UTF16, UTF32):
        for index, line in enumerate(LINES):
            for col in range(1, len(line) + 2):
                lsp_line, char = to_lsp(LINES, index + 1, col, encoding)
                offset = from_lsp(LINES, lsp_line, char, encoding)
                assert offset == sum(len(x) + 1 for x in LINES[:index]) + min(col - 1, len(line))


def test_crlf_lines_keep_the_cr() -> None:
    lines = split_lines("a\r\nb")
    assert lines == ["a\r", "b"]
    assert to_lsp(lines, 2, 1) == (1, 0)
