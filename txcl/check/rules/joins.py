"""Deferred joins: TX220–TX223."""

from __future__ import annotations

import bisect
from typing import Iterator

from txcl.check.facts import read_text
from txcl.check.rules.base import tree_rule
from txcl.errors import Diagnostic


def _into_segments(into: str) -> tuple[str, ...]:
    try:
        from txcl.values.paths import split_path_string
        return tuple(split_path_string(into))
    except ImportError:
        return tuple(s for s in into.split(".") if s)
    except Exception:
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
        if f["into"] is None:
            continue
        into = _into_segments(f["into"])
        if not into:
            continue
        for scope in scopes:
            if not m.scope < scope < join_scope:
                continue
            for reader in tree.rules_at(m.stack, scope):
                for segs, at_sugar, span in reader.facts["reads"]:
                    if _overlaps(tuple(segs), into):
                        text = read_text(segs, at_sugar)
                        yield tree.diag(reader, "TX222", span,
                                        f"reads {text}, but {m.name} (scope {m.scope}) writes under "
                                        f"\"{f['into']}\" only when it joins at scope {join_scope}",
                                        hint=f"read it at scope {join_scope} or later")
