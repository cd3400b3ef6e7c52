"""Position conversions between txcl and LSP.

txcl positions are 1-based lines and 1-based columns counted in code points (LANGUAGE.md
§2.1); LSP positions are 0-based lines and 0-based characters counted in the negotiated
encoding's code units: UTF-16 by default, UTF-8 or UTF-32 when the client prefers them.
Lines are split at LF only (a CR before it belongs to the line, a lone CR is whitespace),
as the txcl lexer does.
"""

from __future__ import annotations

from typing import Sequence

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def _units(ch: str, encoding: str) -> int:
    code = ord(ch)
    if encoding == UTF8:
        return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
    if encoding == UTF32:
        return 1
    return 2 if code > 0xFFFF else 1


def split_lines(text: str) -> list[str]:
    return text.split("\n")


def units_before(line: str, codepoints: int, encoding: str = UTF16) -> int:
    """Code units of the first `codepoints` characters of `line`."""
    if encoding == UTF32:
        return min(codepoints, len(line))
    return sum(_units(ch, encoding) for ch in line[:codepoints])


def codepoints_before(line: str, units: int, encoding: str = UTF16) -> int:
    """How many characters of `line` fit in `units` code units (a position inside a
    surrogate pair rounds down)."""
    if encoding == UTF32:
        return min(units, len(line))
    count = 0
    for ch in line:
        width = _units(ch, encoding)
        if units < width:
            break
        units -= width
        count += 1
    return count


def to_lsp(lines: Sequence[str], line: int, column: int, encoding: str = UTF16) -> tuple[int, int]:
    """txcl (line, column), both 1-based in code points → LSP (line, character).

    Positions past the end (an error at end of input) are clamped to the last line's end.
    """
    if not lines:
        return 0, 0
    index = line - 1
    if index < 0:
        return 0, 0
    if index >= len(lines):
        return len(lines) - 1, units_before(lines[-1], len(lines[-1]), encoding)
    text = lines[index]
    return index, units_before(text, min(max(column - 1, 0), len(text)), encoding)


def from_lsp(lines: Sequence[str], line: int, character: int, encoding: str = UTF16) -> int:
    """LSP (line, character) → 0-based code point offset into the whole text."""
    if not lines:
        return 0
    line = min(max(line, 0), len(lines) - 1)
    offset = sum(len(text) + 1 for text in lines[:line])
    return offset + codepoints_before(lines[line], max(character, 0), encoding)
