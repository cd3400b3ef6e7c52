"""Code actions: the safe fixes of `txcl check --fix` as quick fixes (one per fixable finding,
and "fix all" for the document), and "suppress with # noqa: TXnnn" for any finding."""

from __future__ import annotations

import re

import attrs

from txcl.codes import CODES, FIXABLE

_NOQA = re.compile(r"#\s*noqa\s*:\s*(TX\d+(?:[\s,]+TX\d+)*)\s*$", re.IGNORECASE)


@attrs.frozen
class Action:
    title: str
    kind: str  # quickfix | source.fixAll
    code: str | None
    text: str | None = None  # the whole document after the action
    line: int | None = None  # or: text to put at the end of this 0-based line
    insert: str | None = None
    replace_from: int | None = None  # (with `line`) the column from which the line's end is replaced


def _fixed(text: str, filename: str, code: str | None) -> str | None:
    from txcl.check.fix import fix_text

    new, applied = fix_text(text, filename, codes=(lambda c: True) if code is None else (lambda c: c == code))
    return new if applied and new != text else None


def _suppress(text: str, line: int, code: str) -> Action | None:
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return None
    body = lines[line]
    existing = _NOQA.search(body)
    title = f"Suppress {code} on this line (# noqa: {code})"
    if existing is not None:
        codes = re.findall(r"TX\d+", existing.group(1), re.IGNORECASE)
        if code in codes:
            return None
        return Action(title, "quickfix", code, line=line, replace_from=existing.start(),
                      insert=f"# noqa: {', '.join([*codes, code])}")
    return Action(title, "quickfix", code, line=line, replace_from=len(body),
                  insert=("  " if body.strip() else "") + f"# noqa: {code}")


def code_actions(text: str, filename: str, findings: list[tuple[str, int]]) -> list[Action]:
    """The actions for `findings` ((code, 0-based line) of the diagnostics the editor asks about)."""
    out: list[Action] = []
    seen: set[tuple[str, int]] = set()
    for code, line in findings:
        if (code, line) in seen:
            continue
        seen.add((code, line))
        if code in FIXABLE:
            fixed = _fixed(text, filename, code)
            if fixed is not None:
                name = CODES[code].name if code in CODES else code
                out.append(Action(f"Fix {code} ({name})", "quickfix", code, text=fixed))
        suppress = _suppress(text, line, code) if code.startswith("TX") else None
        if suppress is not None:
            out.append(suppress)
    if any(code in FIXABLE for code, _ in findings):
        fixed = _fixed(text, filename, None)
        if fixed is not None:
            out.append(Action("Fix all safe fixes (txcl check --fix)", "source.fixAll", None, text=fixed))
    return out


__all__ = ["Action", "code_actions"]
