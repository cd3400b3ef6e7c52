"""TX204 duplicate-assignment-target, TX205 reserved-txc-write, TX206 set-pre-control-field."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule
from txcl.errors import Diagnostic
from txcl.syntax import ast
from txcl.values.reserved import is_author_writable, is_deletable
from txcl.vocabulary import CONTROL_FIELDS, DELETE_ONLY_INBOUND

# the reserved `_txc` paths, below `_txc` (txcl.vocabulary states them; `ttl` only by EMIT)
DELETABLE_FACTS = tuple(sorted(p[1:] for p in DELETE_ONLY_INBOUND))
CONTROL = tuple(p[1:] for p in CONTROL_FIELDS)


def _under(segs: tuple[str, ...], prefixes) -> bool:
    return any(segs[: len(p)] == p for p in prefixes)


def writable(segs: tuple[str, ...], writer: str, system_stack: bool = False) -> bool:
    """May `writer` (EMIT, SET, LOOP SET, @delete) write the envelope path `segs`?"""
    if not segs or segs[0] != "_txc":
        return True
    ok = is_author_writable(segs)
    if segs[1:2] == ("ttl",):
        return writer == "EMIT"
    if system_stack and segs[1:2] == ("route",):
        return True
    return ok


def _split(text: str) -> tuple[str, ...]:
    """An @delete target string (trimmed, leading `@` is `_txc.`, leading `.` dropped)."""
    from txcl.values.paths import delete_target

    try:
        return tuple(delete_target(text))
    except Exception:  # noqa: BLE001 - a target that is not a path names nothing
        return ()


@file_rule("TX204")
def duplicate_target(ctx: FileContext) -> Iterator[Diagnostic]:
    for where, items in (("SET", ctx.rule.set_pre), ("SET", ctx.rule.set_post), ("EMIT", ctx.rule.emit)):
        first: dict[tuple[str, ...], ast.Assignment] = {}
        for a in items:
            segs = a.target.segments
            earlier = first.get(segs)
            if earlier is None:
                first[segs] = a
                continue
            line = earlier.target.span.start.line
            if where == "SET":
                msg = (f"SET assigns {a.target.text} twice; set-if-absent keeps the first value "
                       f"(line {line}), so this one never applies")
            else:
                msg = f"EMIT assigns {a.target.text} twice; this later value overwrites the one at line {line}"
            yield ctx.diag("TX204", a.target.span, msg, hint="remove one of the assignments")


@file_rule("TX205")
def reserved_write(ctx: FileContext) -> Iterator[Diagnostic]:
    rule = ctx.rule
    system = bool(ctx.stack) and ctx.stack.startswith("_") and "/" in ctx.stack
    lists = [("EMIT", rule.emit), ("SET", rule.set_post)]
    if rule.loop is not None:
        lists.append(("LOOP SET", rule.loop.set))
    for writer, items in lists:
        for a in items:
            segs = a.target.segments
            if not writable(segs, writer, system):
                yield ctx.diag("TX205", a.target.span,
                               f"{writer} writes the reserved path {a.target.source_text}; the runtime drops it",
                               hint="only _txc.web.res, _txc.goto, _txc.halt, _txc.delete, _txc.telemetry, "
                                    "_txc.lmtp.res, _txc.llm.* (and _txc.ttl by EMIT) are writable")
            if segs == ("_txc", "delete"):
                yield from _delete_targets(ctx, a.value, system)


def _delete_targets(ctx: FileContext, value, system: bool) -> Iterator[Diagnostic]:
    items = value.items if isinstance(value, ast.ArrayLit) else (value,)
    for item in items:
        if not isinstance(item, ast.StringLit):
            continue
        segs = _split(item.value)
        if not segs or segs[0] != "_txc":
            continue
        if writable(segs, "@delete", system) or _under(segs[1:], DELETABLE_FACTS) or _deletable(segs):
            continue
        yield ctx.diag("TX205", item.span,
                       f"@delete target \"{item.value}\" is a reserved _txc path; it is not deleted")


def _deletable(segs: tuple[str, ...]) -> bool:
    return bool(is_deletable(segs))


@file_rule("TX206")
def set_pre_control(ctx: FileContext) -> Iterator[Diagnostic]:
    for a in ctx.rule.set_pre:
        segs = a.target.segments
        if segs[:1] == ("_txc",) and _under(segs[1:], CONTROL):
            yield ctx.diag("TX206", a.target.span,
                           f"SET before SELECT writes {a.target.source_text} into the op's input only; "
                           "it has no effect on the flow",
                           hint="use EMIT (or a SET after SELECT) to set control fields")
