"""A rule's data steps flattened once: what SET PRE, WITH, EMIT and SET POST do, decided at
first use and kept by rule identity.

Each assignment becomes a tuple of its target segments, its compiled value function and
what the runtime needs to know about the target (its text for messages; for EMIT whether it
is `_txc.ttl` or a reserved path that is dropped; the writer to use: `write_keys` when no
segment is numeric, so no created container can be an array), so running a rule does no
node-cache lookups and no per-assignment checks that depend only on the rule.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from txcl.evaluate.nodecache import NodeCache
from txcl.evaluate.values import compile_value
from txcl.syntax import ast
from txcl.values.paths import is_numeric, write, write_keys
from txcl.values.reserved import is_author_writable

ValueFn = Callable[[Any, Any], Any]
Writer = Callable[[Any, tuple[str, ...], Any], Any]

TTL_PATH = ("_txc", "ttl")
EMIT_PLAIN, EMIT_TTL, EMIT_DROPPED = 0, 1, 2


def is_dropped_target(segments: tuple[str, ...]) -> bool:
    """A write target EMIT, SET POST and LOOP SET must skip (a reserved `_txc` path)."""
    return bool(segments) and segments[0] == "_txc" and not is_author_writable(segments)


@attrs.frozen(slots=True)
class RulePlan:
    # (segments, value, target text, writer)
    set_pre: tuple[tuple[tuple[str, ...], ValueFn, str, Writer], ...]
    with_: tuple[tuple[tuple[str, ...], ValueFn, str, Writer], ...]
    # (segments, value, target text, kind, writer)
    emit: tuple[tuple[tuple[str, ...], ValueFn, str, int, Writer], ...]
    # (segments, value, target text, dropped, writer)
    set_post: tuple[tuple[tuple[str, ...], ValueFn, str, bool, Writer], ...]
    emit_all_plain: bool  # every EMIT target is written as it is (no TTL, none dropped)


def writer_for(segments: tuple[str, ...]) -> Writer:
    """`write_keys` for a path of object keys only, else the general `write`."""
    if segments and not any(is_numeric(seg) for seg in segments):
        return write_keys
    return write


def emit_kind(segments: tuple[str, ...]) -> int:
    """What EMIT does with a target: lower the TTL, drop it (reserved), or write it."""
    if segments == TTL_PATH:
        return EMIT_TTL
    return EMIT_DROPPED if is_dropped_target(segments) else EMIT_PLAIN


def _plan(rule: ast.Rule) -> RulePlan:
    emit = tuple((a.target.segments, compile_value(a.value), a.target.text, emit_kind(a.target.segments),
                  writer_for(a.target.segments)) for a in rule.emit)
    return RulePlan(
        set_pre=tuple((a.target.segments, compile_value(a.value), a.target.text, writer_for(a.target.segments))
                      for a in rule.set_pre),
        with_=tuple((p.key, compile_value(p.value), p.key_text, writer_for(p.key)) for p in rule.with_),
        emit=emit,
        set_post=tuple((a.target.segments, compile_value(a.value), a.target.text,
                        is_dropped_target(a.target.segments), writer_for(a.target.segments))
                       for a in rule.set_post),
        emit_all_plain=all(entry[3] == EMIT_PLAIN for entry in emit),
    )


_PLANS: NodeCache[RulePlan] = NodeCache(_plan, limit=50_000)


def rule_plan(rule: ast.Rule) -> RulePlan:
    """The plan of `rule` (made once per rule object)."""
    return _PLANS.get(rule)
