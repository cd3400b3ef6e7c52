"""Inline suppression: `# noqa: TX201` at the end of a line, `# txcl: noqa` for a file.

Comments are found with a small lexical scan (strings, regex bodies and quoted path
segments skipped), so suppressions also work in files that do not parse.
"""

from __future__ import annotations

import re
from typing import Iterable

import attrs

from txcl.errors import Diagnostic, Position, Span

_LINE_RE = re.compile(r"\bnoqa\b(?:\s*:\s*(?P<codes>TX\d+(?:[\s,]+TX\d+)*))?", re.IGNORECASE)
_FILE_RE = re.compile(r"^\s*txcl\s*:\s*noqa\b(?:\s*:\s*(?P<codes>TX\d+(?:[\s,]+TX\d+)*))?", re.IGNORECASE)


@attrs.define
class Directive:
    """One suppression comment. `codes` is None for a blanket `# noqa`."""

    line: int
    span: Span
    codes: tuple[str, ...] | None
    file_level: bool
    used: set[str] = attrs.field(factory=set)
    used_blanket: bool = False


def scan_comments(text: str) -> list[tuple[int, int, int, str]]:
    """(line, column, offset, text without '#') of every comment in `text`."""
    out: list[tuple[int, int, int, str]] = []
    i, n = 0, len(text)
    line, line_start = 1, 0
    after_match_op = False
    while i < n:
        ch = text[i]
        if ch == "\n":
            line, line_start = line + 1, i + 1
            i += 1
            continue
        if ch in " \t\r":
            i += 1
            continue
        if ch == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, i - line_start + 1, i, text[i + 1:end].rstrip("\r")))
            i = end
            continue
        if ch == '"':
            quoted_segment = i > 0 and text[i - 1] == "."
            j = i + 1
            while j < n:
                c = text[j]
                if c == "\\" and not quoted_segment:
                    if j + 1 < n and text[j + 1] == "\n":  # an escaped line break still ends a line
                        line, line_start = line + 1, j + 2
                    j += 2
                    continue
                if c == "\n":
                    if quoted_segment:
                        break  # an unclosed quoted path segment ends at its line's end
                    line, line_start = line + 1, j + 1
                if c == '"':
                    break
                j += 1
            i = j + 1 if j < n and text[j] == '"' else j  # a line break is counted by the loop
            after_match_op = False
            continue
        if ch == "/" and after_match_op:
            j = i + 1
            while j < n and text[j] not in "\n/":
                j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] != "\n" else 1
            i = j + 1 if j < n and text[j] == "/" else j
            after_match_op = False
            continue
        after_match_op = ch == "~" and i > 0 and text[i - 1] in "=!"
        i += 1
    return out


def parse_directives(text: str) -> list[Directive]:
    directives: list[Directive] = []
    for line, col, offset, body in scan_comments(text):
        span = Span(Position(line, col, offset), Position(line, col + 1 + len(body), offset + 1 + len(body)))
        file_match = _FILE_RE.match(body)
        if file_match:
            directives.append(Directive(line, span, _codes(file_match.group("codes")), True))
            continue
        match = _line_match(body)
        if match is not None:
            directives.append(Directive(line, span, _codes(match.group("codes")), False))
    return directives


def _line_match(body: str) -> re.Match | None:
    """`# noqa…` or a second '#' inside one comment: `# note  # noqa: TX201`."""
    candidates = [body.lstrip()]
    if "#" in body:
        candidates.append(body[body.rindex("#") + 1:].lstrip())
    for text in candidates:
        match = _LINE_RE.match(text)
        if match is not None:
            return match
    return None


def _codes(text: str | None) -> tuple[str, ...] | None:
    if not text:
        return None
    return tuple(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


def apply_noqa(diagnostics: Iterable[Diagnostic], text: str | None,
               report_unused: bool = True, enabled=lambda code: True) -> list[Diagnostic]:
    """Drop suppressed findings; add TX303 for directives that suppressed nothing.

    `enabled(code)` tells whether a code is active at all: a directive naming only inactive
    codes is not reported as unused.
    """
    diagnostics = list(diagnostics)
    if text is None or "noqa" not in text.lower():
        return diagnostics
    directives = parse_directives(text)
    if not directives:
        return diagnostics
    by_line: dict[int, list[Directive]] = {}
    file_level = [d for d in directives if d.file_level]
    for d in directives:
        if not d.file_level:
            by_line.setdefault(d.line, []).append(d)
    kept: list[Diagnostic] = []
    for diag in diagnostics:
        if diag.code == "TX303":
            kept.append(diag)
            continue
        if _suppress(diag, by_line.get(diag.line, ())) or _suppress(diag, file_level):
            continue
        kept.append(diag)
    if report_unused:
        file = diagnostics[0].file if diagnostics else None
        for d in directives:
            message = _unused_message(d, enabled)
            if message is not None:
                kept.append(Diagnostic("TX303", message, file=file or "<string>", span=d.span,
                                       hint="remove the comment or the codes it no longer needs",
                                       source=text))
    return kept


def _suppress(diag: Diagnostic, directives: Iterable[Directive]) -> bool:
    for d in directives:
        if d.codes is None:
            d.used_blanket = True
            return True
        if diag.code in d.codes:
            d.used.add(diag.code)
            return True
    return False


def _unused_message(d: Directive, enabled) -> str | None:
    from txcl.codes import CODES

    kind = "file-wide '# txcl: noqa'" if d.file_level else "'# noqa'"
    if d.codes is None:
        if d.used_blanket or not enabled("*"):
            return None
        return f"unused {kind} directive: it suppresses nothing"
    unknown = [c for c in d.codes if c not in CODES]
    if unknown:
        word = "codes" if len(unknown) > 1 else "code"
        return f"{kind} directive names an unknown rule {word}: {', '.join(unknown)} (`txcl rule` lists them)"
    unused = [c for c in d.codes if c not in d.used and enabled(c)]
    if not unused:
        return None
    if len(unused) == len(d.codes):
        return f"unused {kind} directive: nothing to suppress for {', '.join(unused)}"
    return f"{kind} directive lists codes with nothing to suppress: {', '.join(unused)}"
