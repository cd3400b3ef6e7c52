"""AST + comments → canonical TXCL text (what `txcl fmt` writes).

Canonical form: clauses in the order WHEN · SET (pre) · SELECT · SET (post) · WITH ·
PRIORITY · EXEC · LOOP · EMIT, one clause per keyword (split lists joined), upper-case
keywords, lower-case true/false/null, single spaces around operators, `, ` between list
items. A clause that is too long, or that has comments between its items, is written one
item per line, continuation lines aligned after the keyword.

Comments are kept: a comment at the end of an item's line stays there; a comment on its
own line stays in front of the item (or clause) that follows it; comments before the
first clause form the file header when a blank line follows them, or when they open the
file directly above the first clause: the header stays first. When `source` is given,
literal tokens (strings, numbers, regex bodies, EXEC targets, EVERY durations) are
copied as written; without it they are re-escaped, which round-trips to the same AST.
"""

from __future__ import annotations

import bisect
import re

import attrs

from txcl.syntax import ast

MAX_WIDTH = 100
_INT_TAIL = re.compile(r"-?[0-9]+\s*$")
_EVERY_TAIL = re.compile(r'("(?:[^"\\\n]|\\.)*"|[0-9]+)\s*$')


@attrs.define
class _Unit:
    text: str
    start: int  # source offsets (0/0 when unknown)
    end: int
    end_line: int
    leading: list = attrs.field(factory=list)  # Comment nodes
    trailing: object = None  # Comment node


@attrs.define
class _Clause:
    kind: str
    keyword: str
    units: list[_Unit]
    seps: list[str]  # separator after unit i (len = len(units) - 1); "" for LOOP
    leading: list = attrs.field(factory=list)
    start: int = 0


# ---------------------------------------------------------------- values

def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch == "\\":
            nxt = value[i + 1] if i + 1 < len(value) else None
            out.append("\\\\" if nxt is None or nxt in '"\\nrt' else "\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        else:
            out.append(ch)
    return "".join(out)


def _regex_text(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i:i + 2])
            i += 2
            continue
        out.append("\\/" if ch == "/" else ch)
        i += 1
    return "/" + "".join(out) + "/"


_PLAIN_FIRST = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_PLAIN = re.compile(r"^[A-Za-z0-9_-]+$")


def path_text(path: ast.Path) -> str:
    segs = path.segments
    prefix = "."
    if path.at_sugar and len(segs) > 1 and segs[0] == "_txc" and _PLAIN_FIRST.match(segs[1]):
        prefix, segs = "@", segs[1:]
    parts = []
    for i, seg in enumerate(segs):
        plain = _PLAIN_FIRST.match(seg) if i == 0 else _PLAIN.match(seg)
        parts.append(seg if plain else f'"{seg}"')
    return prefix + ".".join(parts)


class _Printer:
    def __init__(self, source: str | None):
        self.source = source

    def _slice(self, span) -> str | None:
        if self.source is None or span is None:
            return None
        a, b = span.start.offset, span.end.offset
        if b <= a or b > len(self.source):
            return None
        return self.source[a:b]

    def string(self, node: ast.StringLit) -> str:
        raw = self._slice(node.span)
        if raw is not None and raw.endswith('"') and (raw.startswith('"') or raw.startswith('b64"')) and len(raw) >= 2:
            return raw
        if node.b64:
            return 'b64"' + _escape(node.plain) + '"'
        return '"' + _escape(node.value) + '"'

    def value(self, node) -> str:
        if isinstance(node, ast.Path):
            return path_text(node)
        if isinstance(node, (ast.IntLit, ast.FloatLit)):
            return node.text
        if isinstance(node, ast.StringLit):
            return self.string(node)
        if isinstance(node, ast.BoolLit):
            return "true" if node.value else "false"
        if isinstance(node, ast.NullLit):
            return "null"
        if isinstance(node, ast.ArrayLit):
            return "[" + ", ".join(self.value(i) for i in node.items) + "]"
        if isinstance(node, ast.Call):
            return f"&{node.name}(" + ", ".join(self.value(a) for a in node.args) + ")"
        if isinstance(node, ast.Regex):
            if node.source == "null":
                return "null"
            raw = self._slice(node.span)
            if node.source == "literal":
                if raw is not None and raw.startswith("/") and raw.endswith("/") and len(raw) >= 2:
                    return raw
                return _regex_text(node.pattern)
            if raw is not None and raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
                return raw
            return '"' + _escape(node.pattern) + '"'
        raise TypeError(f"cannot print {type(node).__name__}")

    # ------------------------------------------------------------ conditions

    def condition(self, node, parent: str | None = None) -> str:
        if isinstance(node, ast.Comparison):
            return f"{path_text(node.left)} {node.op.value} {self.value(node.right)}"
        if isinstance(node, ast.Not):
            inner = node.operand
            if isinstance(inner, ast.Not):
                return "!" + self.condition(inner, "not")
            return "!(" + self.condition(inner) + ")"
        if isinstance(node, ast.And):
            text = self._join(node.items, node.separators, "and")
            return f"({text})" if parent in ("and", "not") else text
        if isinstance(node, ast.Or):
            text = self._join(node.items, ("||",) * (len(node.items) - 1), "or")
            return f"({text})" if parent in ("and", "or", "not") else text
        raise TypeError(f"cannot print condition {type(node).__name__}")

    def _join(self, items, seps, kind: str) -> str:
        out = self.condition(items[0], kind)
        for sep, item in zip(seps, items[1:]):
            out += (", " if sep == "," else f" {sep} ") + self.condition(item, kind)
        return out

    # ------------------------------------------------------------ clauses

    def assignment(self, a: ast.Assignment) -> str:
        return f"{path_text(a.target)} = {self.value(a.value)}"

    def select_item(self, item: ast.SelectItem) -> str:
        text = path_text(item.source)
        if item.dest is not None:
            text += " AS " + path_text(item.dest)
        if item.default is not None:
            text += " DEFAULT " + self.value(item.default)
        return text

    def with_pair(self, pair: ast.WithPair) -> str:
        key = pair.key[0] + "".join("." + (s if _PLAIN.match(s) else f'"{s}"') for s in pair.key[1:])
        return f"{key} = {self.value(pair.value)}"

    def number_token(self, span, fallback: int) -> str:
        raw = self._slice(span)
        if raw is not None:
            m = _INT_TAIL.search(raw)
            if m is not None and int(m.group(0)) == fallback:
                return m.group(0).strip()
        return str(fallback)

    def every(self, loop: ast.Loop) -> str:
        mark = next((m for m in loop.modifiers if m.kind == "every"), None)
        raw = self._slice(mark.span) if mark is not None else None
        if raw is not None:
            # the modifier's text may hold a comment between EVERY and its value (the comment
            # is printed on its own), so take the value token at its end
            m = _EVERY_TAIL.search(raw)
            if m is not None:
                return m.group(1)
        ns = loop.every_ns
        if ns % 1_000_000 == 0:
            return str(ns // 1_000_000)
        return f'"{ns}ns"'


def _unit(text: str, node) -> _Unit:
    span = getattr(node, "span", None)
    if span is None:
        return _Unit(text, 0, 0, 0)
    return _Unit(text, span.start.offset, span.end.offset, span.end.line)


def _clauses(rule: ast.Rule, p: _Printer) -> list[_Clause]:
    out: list[_Clause] = []
    if rule.when is not None:
        cond = rule.when.condition
        if isinstance(cond, ast.Star):
            units, seps = [_unit("" if cond.bare else "*", rule.when)], []
        elif isinstance(cond, ast.And):
            units = [_unit(p.condition(i, "and"), i) for i in cond.items]
            seps = [s if s == "," else f" {s}" for s in cond.separators]
        elif isinstance(cond, ast.Or):
            units = [_unit(p.condition(i, "or"), i) for i in cond.items]
            seps = [" ||"] * (len(units) - 1)
        else:
            units, seps = [_unit(p.condition(cond), cond)], []
        out.append(_Clause("when", "WHEN", units, seps))

    def listing(kind: str, kw: str, items, render) -> None:
        if items:
            units = [_unit(render(i), i) for i in items]
            out.append(_Clause(kind, kw, units, [","] * (len(units) - 1)))

    listing("set_pre", "SET", rule.set_pre, p.assignment)
    if rule.select is not None:
        if rule.select.star:
            out.append(_Clause("select", "SELECT", [_unit("*", rule.select)], []))
        else:
            listing("select", "SELECT", rule.select.items, p.select_item)
    listing("set_post", "SET", rule.set_post, p.assignment)
    listing("with", "WITH", rule.with_, p.with_pair)
    if rule.priority is not None:
        text = p.number_token(rule.priority.span, rule.priority.value)
        out.append(_Clause("priority", "PRIORITY", [_unit(text, rule.priority)], []))
    if rule.exec is not None:
        raw = p._slice(rule.exec.target_span)
        if not (raw and raw.startswith('"') and raw.endswith('"') and len(raw) >= 2):
            raw = '"' + _escape(rule.exec.target) + '"'
        out.append(_Clause("exec", "EXEC", [_unit(raw, rule.exec)], []))
    if rule.loop is not None:
        loop = rule.loop
        marks = {m.kind: m for m in loop.modifiers}
        units = [_unit("UNTIL " + p.condition(loop.until), marks.get("until", loop.until))]
        if loop.set:
            units.append(_unit("SET " + ", ".join(p.assignment(a) for a in loop.set), marks.get("set")))
        if loop.every_ns is not None:
            units.append(_unit("EVERY " + p.every(loop), marks.get("every")))
        if loop.max is not None:
            mark = marks.get("max")
            units.append(_unit("MAX " + p.number_token(mark.span if mark else None, loop.max), mark))
        out.append(_Clause("loop", "LOOP", units, [""] * (len(units) - 1)))
    listing("emit", "EMIT", rule.emit, p.assignment)
    return out


# ---------------------------------------------------------------- comments

def _blank_between(source: str | None, a: int, b: int) -> bool:
    """Is there an empty line between offsets a and b of the source?"""
    if source is None or b <= a:
        return False
    return re.search(r"\n[ \t\r]*\n", source[a:b]) is not None


def _comment_end(c: ast.Comment) -> int:
    return c.span.end.offset


def _place_comments(rule: ast.Rule, clauses: list[_Clause], source: str | None):
    """Attach every comment to a unit or a clause; (header, trailer) comment lists."""
    comments = sorted(rule.comments, key=lambda c: c.span.start.offset)
    units = sorted((u for c in clauses for u in c.units if u.end > u.start), key=lambda u: u.start)
    by_kind = {c.kind: c for c in clauses}
    first_marks: dict[str, int] = {}
    for mark in rule.clauses:
        first_marks.setdefault(mark.kind, mark.span.start.offset)
    for c in clauses:
        c.start = first_marks.get(c.kind, c.units[0].start if c.units else 0)
    events: list[tuple[int, int, object]] = [(u.start, 1, u) for u in units]
    events += [(off, 0, by_kind[k]) for k, off in first_marks.items() if k in by_kind]
    events.sort(key=lambda e: (e[0], e[1]))
    first_event = events[0][0] if events else None

    # lookups by bisection and by line, so a file with thousands of commented items is
    # formatted in linear time (units do not overlap: sorted by start, they are sorted by end)
    unit_starts = [u.start for u in units]
    event_offsets = [e[0] for e in events]
    by_end_line: dict[int, list] = {}
    for u in units:
        by_end_line.setdefault(u.end_line, []).append(u)

    trailer: list = []
    pending: list = []
    for c in comments:
        o = c.span.start.offset
        same_line = [u for u in by_end_line.get(c.span.start.line, ()) if u.end <= o]
        before = bisect.bisect_left(unit_starts, o) - 1
        inside = units[before] if before >= 0 and o < units[before].end else None
        if inside is not None and not (_is_noqa(c) and same_line):
            inside.leading.append(c)
            continue
        # (a `noqa` comment inside an item that began on the line of an earlier one stays at the
        # end of that earlier item's line, where its findings are)
        if same_line:
            owner = max(same_line, key=lambda u: u.end)
            if owner.trailing is None:
                owner.trailing = c
                continue
        after = bisect.bisect_right(event_offsets, o)
        nxt = events[after] if after < len(events) else None
        if nxt is None:
            trailer.append(c)
        else:
            pending.append((c, nxt))
    # header: the comments before the first clause up to the last one followed by a blank
    # line; when none is, the whole block that opens the file (it stays first, whatever clause
    # comes first once the clauses are in canonical order)
    before_first = [c for c, e in pending if first_event is not None and e[0] == first_event]
    cut = len(before_first) - 1
    for i, c in enumerate(before_first):
        nxt_off = before_first[i + 1].span.start.offset if i + 1 < len(before_first) else first_event
        if _blank_between(source, _comment_end(c), nxt_off):
            cut = i
    header = before_first[:cut + 1]
    header_ids = {id(c) for c in header}
    for c, (_, _, owner) in pending:  # owner: a clause (before its keyword) or a unit
        if id(c) not in header_ids:
            owner.leading.append(c)
    return header, trailer


def _comment_lines(comments: list, indent: str, source: str | None) -> list[str]:
    lines: list[str] = []
    for i, c in enumerate(comments):
        if i and _blank_between(source, _comment_end(comments[i - 1]), c.span.start.offset):
            lines.append("")
        lines.append(indent + "#" + c.text.rstrip())
    return lines


# ---------------------------------------------------------------- layout

def _render_clause(clause: _Clause, source: str | None) -> list[str]:
    kw = clause.keyword
    units = clause.units
    lines: list[str] = []
    first = units[0]
    leading = clause.leading + first.leading
    lines.extend(_comment_lines(sorted(leading, key=lambda c: c.span.start.offset), "", source))
    broken = any(u.leading for u in units[1:]) or any(u.trailing is not None for u in units[:-1])
    single = kw + (" " + first.text if first.text else "")
    for sep, u in zip(clause.seps, units[1:]):
        single += (sep if sep else "") + " " + u.text
    if not broken and (len(single) <= MAX_WIDTH or len(units) == 1):
        if units[-1].trailing is not None:
            single += "  #" + units[-1].trailing.text.rstrip()
        lines.append(single)
        return lines
    indent = " " * (len(kw) + 1)
    for start, end in _line_groups(units):
        if start:
            lines.extend(_comment_lines(units[start].leading, indent, source))
        text = kw + " " if start == 0 else indent
        for i in range(start, end):
            text += units[i].text
            if i < len(clause.seps):
                sep = clause.seps[i]
                text += (sep if i + 1 < end else sep.strip() and sep.rstrip() or "")
                if i + 1 < end:
                    text += " "
        last = units[end - 1]
        if last.trailing is not None:
            text += "  #" + last.trailing.text.rstrip()
        lines.append(text.rstrip() if not last.trailing else text)
    return lines


def _is_noqa(comment) -> bool:
    return comment is not None and "noqa" in comment.text.lower()


def _line_groups(units: list[_Unit]) -> list[tuple[int, int]]:
    """[start, end) ranges of units written on one line of a broken clause: one unit per
    line, except that the items sharing a line with a `# noqa` comment stay on that line
    together, so the directive still covers every item it covered before."""
    groups: list[tuple[int, int]] = []
    end = len(units)
    while end > 0:
        start = end - 1
        comment = units[start].trailing
        if _is_noqa(comment):
            line = comment.span.start.line
            while (start > 0 and units[start - 1].trailing is None and not units[start].leading
                   and units[start - 1].end_line == line and units[start - 1].end > 0):
                start -= 1
        groups.append((start, end))
        end = start
    return groups[::-1]


def print_rule(rule: ast.Rule, source: str | None = None) -> str:
    """The canonical text of `rule` (comments from `rule.comments`)."""
    p = _Printer(source)
    clauses = _clauses(rule, p)
    header, trailer = _place_comments(rule, clauses, source)
    lines: list[str] = _comment_lines(header, "", source)
    if header and clauses and (source is None or _blank_between(source, _comment_end(header[-1]),
                                                                 min(c.start for c in clauses))):
        lines.append("")
    order = sorted(clauses, key=lambda c: _RANK[c.kind])
    header_end = header[-1].span.end.offset if header else 0
    for i, clause in enumerate(order):
        block_start = min([clause.start] + [c.span.start.offset for c in clause.leading + clause.units[0].leading])
        after_header = source is not None and source[header_end:block_start].strip() == ""
        if i and lines and lines[-1] != "" and not after_header and _blank_before(source, block_start):
            lines.append("")
        lines.extend(_render_clause(clause, source))
    if trailer:
        if lines and _blank_between(source, _prev_end(rule, trailer[0]), trailer[0].span.start.offset):
            lines.append("")
        lines.extend(_comment_lines(trailer, "", source))
    return "\n".join(lines) + "\n" if lines else ""


def _blank_before(source: str | None, offset: int) -> bool:
    if source is None or offset <= 0:
        return False
    head = source[:offset]
    line_start = head.rfind("\n")
    if line_start < 0 or head[line_start + 1:].strip():
        return False
    return re.search(r"\n[ \t\r]*\n[ \t\r]*$", head) is not None


def _prev_end(rule: ast.Rule, comment) -> int:
    ends = [m.span.end.offset for m in rule.clauses if m.span.end.offset <= comment.span.start.offset]
    ends += [c.span.end.offset for c in rule.comments if c.span.end.offset <= comment.span.start.offset
             and c is not comment]
    return max(ends, default=0)


_RANK = {k: i for i, k in enumerate(
    ("when", "set_pre", "select", "set_post", "with", "priority", "exec", "loop", "emit"))}
