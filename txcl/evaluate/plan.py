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

from txcl.errors import TxclEvalError
from txcl.evaluate.codegen import _TOO_DEEP, _Source
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
    # EMIT onto an empty output as one generated function `view -> output` (None: no such
    # function for this rule; it returns None when a value fails, see `fresh_emit_function`)
    emit_fresh: Callable[[Any], Any] | None = None


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
        emit_fresh=fresh_emit_function(emit),
    )


def fresh_emit_function(emit: tuple) -> Callable[[Any], Any] | None:
    """EMIT onto an empty output — what every rule without EXEC does — as one generated
    function: every value computed first (against the empty output, falling back to the
    op's input), then the output built as one nested dict literal, keys in the order the
    writes would create them. Made only when that is exactly what writing the targets one
    by one gives: every target written as it is, object keys only, and no target equal to
    or inside another (those go through the writes). The function returns None when a
    value fails, so the caller takes the general path, which reports it."""
    if not emit or len(emit) > 64 or any(kind != EMIT_PLAIN or writer is not write_keys or not segments
                                         for segments, _fn, _text, kind, writer in emit):
        return None
    targets = [segments for segments, *_rest in emit]
    for i, a in enumerate(targets):
        for b in targets[i + 1:]:
            shorter = min(len(a), len(b))
            if a[:shorter] == b[:shorter]:
                return None  # equal, or one inside the other
    trie: dict = {}
    for index, segments in enumerate(targets):
        node = trie
        for segment in segments[:-1]:
            node = node.setdefault(segment, {})
        node[segments[-1]] = index

    def literal(node: dict) -> str:
        return "{" + ", ".join(f"{key!r}: " + (f"v{child}" if type(child) is int else literal(child))
                               for key, child in node.items()) + "}"

    src = _Source()
    src.constants["TxclEvalError"] = TxclEvalError
    body = ["o = {}", "try:"]
    body += [f"    v{i} = {src.constant(entry[1], 'f')}(o, view)" for i, entry in enumerate(emit)]
    # (copies inside the try: a value too deep to copy is the slow path's error to report)
    body += [f"    if isinstance(v{i}, (dict, list)): v{i} = _deep(v{i})" for i in range(len(emit))]
    body += ["except TxclEvalError:", "    return None"]
    body.append(f"return {literal(trie)}")
    try:
        return src.build("emit", "view", body)
    except _TOO_DEEP:
        return None


_PLANS: NodeCache[RulePlan] = NodeCache(_plan, limit=50_000)


def rule_plan(rule: ast.Rule) -> RulePlan:
    """The plan of `rule` (made once per rule object)."""
    return _PLANS.get(rule)
