"""Deferred joins: TX220–TX224."""

from __future__ import annotations

import bisect
from typing import Iterator

from txcl.check.facts import read_text
from txcl.check.rules.base import tree_rule
from txcl.errors import Diagnostic


def _into_segments(into: str) -> tuple[str, ...]:
    from txcl.values.paths import split_path_string

    try:
        return tuple(split_path_string(into))
    except Exception:  # noqa: BLE001 - an `into` that is not a path names nothing
        return ()


def _overlaps(read: tuple[str, ...], into: tuple[str, ...]) -> bool:
    """A read at or under `into`."""
    return read[: len(into)] == into


def _join_option_problems(f: dict, scope: int):
    """(span, message) for each join option that cannot take effect (TX224)."""
    options = f["join_options"]
    if not options:
        return
    deferred = f["mode"] == "async" and f["join"] is not None and f["join"] > scope
    if not deferred:
        for key, (_, span) in options.items():
            yield span, (f"{key} has no effect: this op does not defer its join (it needs mode = \"async\" "
                         f"and a join_at_scope above its own scope {scope})")
        return
    deadline = options.get("join_deadline")
    if "on_join_deadline" in options and deadline is None:
        yield options["on_join_deadline"][1], "on_join_deadline has no effect without join_deadline"
    wait = options.get("join_wait")
    if wait is not None and deadline is not None:
        from txcl.values.coerce import duration_to_ms

        wait_ms = duration_to_ms(wait[0]) if wait[0] is not None else None
        deadline_ms = duration_to_ms(deadline[0]) if deadline[0] is not None else None
        if wait_ms is not None and deadline_ms is not None and wait_ms >= deadline_ms:
            yield wait[1], (f"join_wait ({wait[0]}) is not shorter than join_deadline ({deadline[0]}); "
                            "the deadline decides before the wait ends")


@tree_rule("TX220", "TX221", "TX222", "TX223", "TX224")
def deferred_joins(tree) -> Iterator[Diagnostic]:
    for m in tree.members:
        f = m.facts
        for span, message in _join_option_problems(f, m.scope):
            yield tree.diag(m, "TX224", span, message,
                            hint="join_deadline, on_join_deadline and join_wait belong to a deferred op")
        if f["mode"] != "async" or f["join"] is None:
            continue
        join = f["join"]
        if join <= m.scope:
            yield tree.diag(m, "TX220", f["join_span"],
                            f"join_at_scope = {join} is at or below this op's own scope {m.scope}; "
                            "it behaves as a plain async op and suspends here",
                            hint=f"use a scope above {m.scope}, or drop join_at_scope")
            continue
        scopes = tree.effective_scopes(m.stack)
        i = bisect.bisect_left(scopes, join)
        if i == len(scopes):
            yield tree.diag(m, "TX221", f["join_span"],
                            f"no scope at or above {join} exists in stack {m.stack}; the result is never merged "
                            "unless the flow jumps there",
                            hint=f"add a scope directory numbered {join} or higher, or lower join_at_scope")
            continue
        join_scope = scopes[i]
        if any(o.facts["mode"] == "async" for o in tree.rules_at(m.stack, join_scope)):
            yield tree.diag(m, "TX223", f["join_span"],
                            f"the join scope {join_scope} also holds its own mode = \"async\" op; supported "
                            "here, but the reference stalls on it")
        yield from _early_reads(tree, m, join, join_scope)


def _written(f: dict) -> list[tuple[tuple[str, ...], str]]:
    """(path, how) of what a deferred op writes when it joins, as far as the rule shows: its
    literal `into`, and the targets of its EMIT and SET POST."""
    out: list[tuple[tuple[str, ...], str]] = []
    if f["into"] is not None:
        into = _into_segments(f["into"])
        if into:
            out.append((into, f'under "{f["into"]}"'))
    for segs in f.get("writes", ()):
        segs = tuple(segs)
        if segs and all(segs[:len(p)] != p for p, _ in out):
            out.append((segs, read_text(segs, False)))
    return out


def _scopes_before_join(tree, m, floor: int) -> dict[int, str | None]:
    """Every scope of the op's stack the flow may run between the dispatch and the join:
    the scopes after the op's own in order, and wherever a literal `@goto` or stage-jump EXEC
    of those scopes (in the same stack) leads, until a scope at or above the floor — where
    the join happens. Maps each scope to the jump that first reached it (None: in order)."""
    scopes = tree.effective_scopes(m.stack)

    def at_or_above(target: int) -> int | None:
        i = bisect.bisect_left(scopes, target)
        return scopes[i] if i < len(scopes) else None

    def successors(scope: int, via: str | None):
        i = bisect.bisect_right(scopes, scope)
        if i < len(scopes):
            yield scopes[i], via
        for rule in tree.rules_at(m.stack, scope):
            if rule is m:
                continue  # the deferred op's own EMIT applies at its join, not now
            for stack, target, what, _ in rule.facts["gotos"]:
                if stack in (None, m.stack):
                    landing = at_or_above(int(target))
                    if landing is not None:
                        yield landing, via or f"{what} in {rule.name} (scope {scope})"

    reached: dict[int, str | None] = {}
    queue = list(successors(m.scope, None))
    while queue:
        scope, via = queue.pop(0)
        if scope >= floor or scope in reached:
            continue
        reached[scope] = via
        queue.extend(successors(scope, via))
    return reached


def _early_reads(tree, m, floor: int, join_scope: int) -> Iterator[Diagnostic]:
    """TX222: reads of what the deferred op writes, by a scope that runs before its join."""
    written = _written(m.facts)
    if not written:
        return
    for scope, via in sorted(_scopes_before_join(tree, m, floor).items()):
        for reader in tree.rules_at(m.stack, scope):
            if reader is m:
                continue
            for segs, at_sugar, span in reader.facts["reads"]:
                hit = next((how for path, how in written if _overlaps(tuple(segs), path)), None)
                if hit is None:
                    continue
                text = read_text(tuple(segs), at_sugar)
                reached = f" (this scope is reached through {via})" if via else ""
                yield tree.diag(reader, "TX222", span,
                                f"reads {text}, but {m.name} (scope {m.scope}) writes {hit} only when it joins "
                                f"at scope {join_scope}{reached}",
                                hint=f"read it at scope {join_scope} or later")
