"""Position conversions between txcl and LSP.

txcl positions are 1-based lines and 1-based columns counted in code points, with lines split
at LF only (a CR before an LF belongs to its line; a lone CR is whitespace). LSP positions are
0-based lines and 0-based characters counted in the negotiated encoding's code units (UTF-16
by default, UTF-8 or UTF-32 when the client prefers them), and an LSP client ends a line at
LF, CR LF or a lone CR. The two line numberings differ after a lone CR, so every conversion
goes through the offset into the whole text.
"""

from __future__ import annotations

import bisect
import re

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"
_CLIENT_BREAK = re.compile(r"\r\n|\r|\n")


def _units(ch: str, encoding: str) -> int:
    code = ord(ch)
    if encoding == UTF8:
        return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
    if encoding == UTF32:
        return 1
    return 2 if code > 0xFFFF else 1


def units_before(line: str, codepoints: int, encoding: str = UTF16) -> int:
    """Code units of the first `codepoints` characters of `line`."""
    if encoding == UTF32:
        return min(codepoints, len(line))
    if line.isascii():
        return min(codepoints, len(line))
    return sum(_units(ch, encoding) for ch in line[:codepoints])


def codepoints_before(line: str, units: int, encoding: str = UTF16) -> int:
    """How many characters of `line` fit in `units` code units (a position inside a
    surrogate pair rounds down)."""
    if encoding == UTF32 or line.isascii():
        return min(units, len(line))
    count = 0
    for ch in line:
        width = _units(ch, encoding)
        if units < width:
            break
        units -= width
        count += 1
    return count


class LineIndex:
    """The line starts of one text, as txcl counts lines and as an LSP client does."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._txcl_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        starts, ends = [0], []
        for m in _CLIENT_BREAK.finditer(text):
            ends.append(m.start())
            starts.append(m.end())
        ends.append(len(text))
        self._client_starts, self._client_ends = starts, ends

    @property
    def client_line_count(self) -> int:
        return len(self._client_starts)

    def offset_of(self, line: int, column: int) -> int:
        """txcl (line, column), 1-based in code points → offset, clamped into the text."""
        index = line - 1
        if index < 0:
            return 0
        if index >= len(self._txcl_starts):
            return len(self.text)
        start = self._txcl_starts[index]
        end = self._txcl_starts[index + 1] - 1 if index + 1 < len(self._txcl_starts) else len(self.text)
        return start + min(max(column - 1, 0), end - start)

    def lsp_of_offset(self, offset: int, encoding: str = UTF16) -> tuple[int, int]:
        """Offset → LSP (line, character); an offset inside a line break is the line's end."""
        offset = min(max(offset, 0), len(self.text))
        index = bisect.bisect_right(self._client_starts, offset) - 1
        start, end = self._client_starts[index], self._client_ends[index]
        return index, units_before(self.text[start:end], min(offset, end) - start, encoding)

    def to_lsp(self, line: int, column: int, encoding: str = UTF16) -> tuple[int, int]:
        """txcl (line, column) → LSP (line, character). Positions past the end (an error at
        the end of the input) are clamped to the end of the text."""
        return self.lsp_of_offset(self.offset_of(line, column), encoding)

    def from_lsp(self, line: int, character: int, encoding: str = UTF16) -> int:
        """LSP (line, character) → 0-based code point offset into the whole text."""
        index = min(max(line, 0), len(self._client_starts) - 1)
        start, end = self._client_starts[index], self._client_ends[index]
        return start + codepoints_before(self.text[start:end], max(character, 0), encoding)

    def end(self, encoding: str = UTF16) -> tuple[int, int]:
        """The LSP position of the end of the text."""
        return self.lsp_of_offset(len(self.text), encoding)
