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


@tree_rule("TX220", "TX221", "TX222", "TX223")
def deferred_joins(tree) -> Iterator[Diagnostic]:
    for m in tree.members:
        f = m.facts
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
