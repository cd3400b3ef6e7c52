"""txcl (1-based, code points, lines at LF) ↔ LSP (0-based, code units, lines at LF, CR LF
and lone CR) positions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txcl.lsp.positions import UTF8, UTF16, UTF32, LineIndex, codepoints_before

TEXT = 'WHEN .a == 1\nSET .s = "😀é" .x "EUR"\n'
INDEX = LineIndex(TEXT)
FIRST = TEXT.index("\n") + 1


@pytest.mark.parametrize("encoding,expected", [(UTF16, 15), (UTF8, 18), (UTF32, 14)])
def test_columns_after_non_bmp_and_accented_characters(encoding: str, expected: int) -> None:
    # `.x` is at txcl line 2, column 15 (1-based code points) with 😀 (UTF-16: 2 units,
    # UTF-8: 4) and é (UTF-8: 2) before it.
    assert TEXT[FIRST + 14:FIRST + 16] == ".x"
    assert INDEX.to_lsp(2, 15, encoding) == (1, expected)
    assert INDEX.from_lsp(1, expected, encoding) == FIRST + 14


def test_end_of_input_is_clamped() -> None:
    assert INDEX.to_lsp(3, 1) == (2, 0)  # the empty last line after the final LF
    assert INDEX.to_lsp(9, 9) == (2, 0)
    assert LineIndex("ab").to_lsp(1, 99) == (0, 2)
    assert LineIndex("").to_lsp(1, 1) == (0, 0)
    assert INDEX.from_lsp(99, 0) == len(TEXT)
    assert INDEX.end() == (2, 0) and LineIndex("ab\ncd").end() == (1, 2)


def test_inside_a_surrogate_pair_rounds_down() -> None:
    line = 'a😀b'
    assert codepoints_before(line, 2, UTF16) == 1  # between the two halves of 😀
    assert codepoints_before(line, 3, UTF16) == 2
    assert codepoints_before(line, 99, UTF16) == 3


def test_round_trip_every_column() -> None:
    lines = TEXT.split("\n")
    for encoding in (UTF8, UTF16, UTF32):
        for index, line in enumerate(lines):
            for col in range(1, len(line) + 2):
                lsp_line, char = INDEX.to_lsp(index + 1, col, encoding)
                offset = INDEX.from_lsp(lsp_line, char, encoding)
                assert offset == sum(len(x) + 1 for x in lines[:index]) + min(col - 1, len(line))


def test_crlf_ends_the_line_before_its_cr() -> None:
    index = LineIndex("a\r\nb")
    assert index.to_lsp(2, 1) == (1, 0)
    assert index.to_lsp(1, 2) == (0, 1)  # the CR itself: the end of the client's line
    assert index.to_lsp(1, 3) == (0, 1)  # clamped past the CR
    assert index.from_lsp(1, 0) == 3


def test_a_lone_cr_is_a_line_break_to_the_client() -> None:
    """To txcl `SET .a = 1\\rEMIT .b = 2` is one line; an LSP client shows two, so `.b`
    (txcl line 1, column 17) is client line 1, character 5."""
    text = "SET .a = 1\rEMIT .b = 2\nEMIT .c = 3"
    index = LineIndex(text)
    assert text[16:18] == ".b"
    assert index.to_lsp(1, 17) == (1, 5)
    assert index.from_lsp(1, 5) == 16
    assert index.to_lsp(2, 6) == (2, 5)  # `.c`: txcl line 2 is client line 2
    assert index.client_line_count == 3


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "é", "😀", "\n", "\r", " "]), max_size=40), st.data())
def test_every_offset_round_trips_through_the_client_position(text: str, data) -> None:
    index = LineIndex(text)
    offset = data.draw(st.integers(0, len(text)))
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1  # between CR and LF is no position a client can name
    for encoding in (UTF8, UTF16, UTF32):
        line, char = index.lsp_of_offset(offset, encoding)
        assert 0 <= line < index.client_line_count
        assert index.from_lsp(line, char, encoding) == offset
