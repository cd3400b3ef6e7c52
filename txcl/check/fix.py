"""Safe fixes for `txcl check --fix / --diff`: TX201 (leading zeros), TX301 (clause order,
never moving a SET across SELECT), TX302 (joining split SET/EMIT/WITH lists).

Every step is re-parsed and must give the same rule (AST without spans, comments, clause
marks and number spellings); a step that would change meaning is dropped.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable

from txcl.check.rules.base import FileContext
from txcl.check.rules.numbers import fixed_text, leading_zero_spans
from txcl.check.rules.style import KEYWORD, LIST_KINDS, RANK
from txcl.codes import FIXABLE  # the codes whose entry says `fixable`

MAX_ROUNDS = 10


def semantic_json(rule) -> Any:
    """The AST's JSON form without spans, comments, clause marks and literal spellings."""
    from txcl.syntax.ast import to_json

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items()
                    if not k.endswith("span") and k not in ("clauses", "comments", "filename", "modifiers")
                    and not (k == "text" and node.get("node") in ("IntLit", "FloatLit"))}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node
    return strip(to_json(rule))


def _parse(text: str, filename: str):
    from txcl.check.analyze import parse
    rule, _ = parse(text, filename)  # rules with only TX1xx errors are still fixable
    return rule


# ---------------------------------------------------------------- the three fixes

def fix_leading_zeros(ctx: FileContext, allowed: Callable[[int], bool] = lambda line: True) -> str | None:
    edits = [(span.start.offset, span.end.offset, fixed_text(text))
             for span, text in leading_zero_spans(ctx) if allowed(span.start.line)]
    if not edits:
        return None
    out = ctx.source
    for start, end, new in sorted(set(edits), reverse=True):
        out = out[:start] + new + out[end:]
    return out


def _line_end(text: str, offset: int) -> int:
    """Offset just after the newline ending the line that contains `offset` (or len)."""
    nl = text.find("\n", offset)
    return len(text) if nl < 0 else nl + 1


def _blocks(text: str, marks) -> tuple[str, list[tuple[str, str]], str]:
    """Split `text` into (prefix, [(kind, block text)], tail). A block runs from its clause
    (plus the comment lines right above it) to the end of the line where the clause ends,
    or to the next clause when it starts on that same line."""
    starts: list[int] = []
    prev_end = None
    for mark in marks:
        kw = mark.span.start.offset
        if prev_end is None:
            # leading comment lines directly above the first clause (no blank line) go with it
            start = kw
            line_start = text.rfind("\n", 0, kw) + 1
            if text[line_start:kw].strip() == "":
                start = line_start
                while start > 0:
                    prev_line_start = text.rfind("\n", 0, start - 1) + 1
                    line = text[prev_line_start:start - 1].strip()
                    if line.startswith("#"):
                        start = prev_line_start
                    else:
                        break
        else:
            boundary = _line_end(text, prev_end)
            start = kw if boundary > kw else boundary
        starts.append(start)
        prev_end = max(mark.span.end.offset - 1, mark.span.start.offset)
    end = _line_end(text, prev_end) if prev_end is not None else 0
    blocks = []
    for i, mark in enumerate(marks):
        stop = starts[i + 1] if i + 1 < len(marks) else end
        blocks.append((mark.kind, text[starts[i]:stop]))
    return text[:starts[0]] if starts else text, blocks, text[end:]


def fix_clause_order(ctx: FileContext) -> str | None:
    marks = list(ctx.rule.clauses)
    ranks = [RANK[m.kind] for m in marks]
    if ranks == sorted(ranks):
        return None
    prefix, blocks, tail = _blocks(ctx.source, marks)
    ordered = sorted(blocks, key=lambda b: RANK[b[0]])  # stable: lists keep their order
    body = ""
    for _, block in ordered:
        block = block.rstrip(" \t")
        if not block.endswith("\n"):
            block += "\n"
        body += block
    if not tail and not ctx.source.endswith("\n"):
        body = body.rstrip("\n")
    return prefix + body + tail


def fix_split_lists(ctx: FileContext) -> str | None:
    """Join each clause into the one right before it when both are the same list kind."""
    marks = list(ctx.rule.clauses)
    text = ctx.source
    edits: list[tuple[int, int, str]] = []
    for prev, mark in zip(marks, marks[1:]):
        if mark.kind != prev.kind or mark.kind not in LIST_KINDS:
            continue
        kw_start = mark.span.start.offset
        kw_end = kw_start + len(KEYWORD[mark.kind])
        prev_end = prev.span.end.offset
        line_start = text.rfind("\n", 0, kw_start) + 1
        after = kw_end
        while after < len(text) and text[after] in " \t":
            after += 1
        if text[line_start:kw_start].strip() == "":
            # own line: keep the layout, the keyword becomes blank indentation
            edits.append((prev_end, prev_end, ","))
            edits.append((kw_start, kw_end, " " * (kw_end - kw_start)))
        else:
            edits.append((prev_end, after, ", "))
    if not edits:
        return None
    out = text
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    return out


# ---------------------------------------------------------------- driver

def _noqa_filter(text: str) -> Callable[[str, int], bool]:
    """`allowed(code, line)`: False when a `# noqa` of `text` suppresses `code` there."""
    from txcl.check.noqa import parse_directives
    directives = parse_directives(text) if "noqa" in text.lower() else []

    def allowed(code: str, line: int) -> bool:
        for d in directives:
            if (d.file_level or d.line == line) and (d.codes is None or code in d.codes):
                return False
        return True
    return allowed


def fix_text(text: str, filename: str = "<string>", codes: Callable[[str], bool] = lambda c: True,
             respect_noqa: bool = True) -> tuple[str, list[str]]:
    """Apply the safe fixes until nothing changes; (new text, codes fixed in order).

    `codes(code)` says whether a code is enabled; findings suppressed by `# noqa` are not
    fixed."""
    applied: list[str] = []
    rule = _parse(text, filename)
    if rule is None:
        return text, applied
    reference = semantic_json(rule)
    for _ in range(MAX_ROUNDS):
        allowed_line = _noqa_filter(text) if respect_noqa else (lambda code, line: True)
        ctx = FileContext(rule, text, filename)
        candidate, code = None, None
        for fixable in FIXERS:
            if codes(fixable):
                candidate, code = FIXERS[fixable](ctx, allowed_line), fixable
                if candidate is not None:
                    break
        if candidate is None or candidate == text:
            break
        new_rule = _parse(candidate, filename)
        if new_rule is None or semantic_json(new_rule) != reference:
            break  # never apply a fix that changes meaning
        text, rule = candidate, new_rule
        applied.append(code)
    return text, applied


def _fix_leading_zeros(ctx: FileContext, allowed_line) -> str | None:
    return fix_leading_zeros(ctx, lambda line: allowed_line("TX201", line))


def _fix_clause_order(ctx: FileContext, allowed_line) -> str | None:
    return fix_clause_order(ctx) if _any_allowed(ctx, "TX301", allowed_line) else None


def _fix_split_lists(ctx: FileContext, allowed_line) -> str | None:
    return fix_split_lists(ctx) if _any_allowed(ctx, "TX302", allowed_line) else None


# the fixer of each code whose entry in txcl.codes says `fixable`, in the order they are tried
FIXERS: dict[str, Callable[[FileContext, Callable[[str, int], bool]], str | None]] = {
    "TX201": _fix_leading_zeros,
    "TX301": _fix_clause_order,
    "TX302": _fix_split_lists,
}
if set(FIXERS) != FIXABLE:  # pragma: no cover - the table and the fixers are kept together
    raise RuntimeError(f"fixable codes without a fixer (or the reverse): {sorted(set(FIXERS) ^ FIXABLE)}")


def _any_allowed(ctx: FileContext, code: str, allowed_line) -> bool:
    from txcl.check.rules import style
    fn = style.clause_order if code == "TX301" else style.split_clause
    return any(allowed_line(code, d.line) for d in fn(ctx))


def unified_diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))
