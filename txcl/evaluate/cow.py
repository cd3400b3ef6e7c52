"""Private op inputs without deep copies: copy only the containers a rule's writes touch.

SET PRE and the SELECT destinations are the only writes `prepare` makes into an op's input.
Copying the containers along those paths gives each op a private input that shares every
untouched subtree with the scope-entry envelope, which is never mutated while the scope's ops
run (the walker), or with the caller's envelope, which `apply_rule` must leave untouched.
"""

from __future__ import annotations

from typing import Any, Sequence

from txcl.values.paths import _index


def write_paths(rule: Any) -> list[tuple[str, ...]] | None:
    """The paths `prepare` may write for `rule`, or None when it needs a full copy (LOOP)."""
    if rule.loop is not None:
        return None
    paths = [a.target.segments for a in rule.set_pre]
    select = rule.select
    if select is not None and not select.star:
        paths.extend(item.target.segments for item in select.items)
    return paths


def private_input(envelope: dict, paths: Sequence[tuple[str, ...]]) -> dict:
    """A shallow copy of `envelope` with every container on `paths` copied as well."""
    root = dict(envelope)
    copied: set[int] = set()
    for segments in paths:
        cur: Any = root
        for seg in segments[:-1]:
            if type(cur) is dict:
                nxt = cur.get(seg)
                key: Any = seg
            elif type(cur) is list:
                key = _index(seg)
                if key is None or key >= len(cur):
                    break
                nxt = cur[key]
            else:
                break
            tn = type(nxt)
            if tn is not dict and tn is not list:
                break  # the write replaces it with a new container
            if id(nxt) not in copied:
                nxt = dict(nxt) if tn is dict else list(nxt)
                copied.add(id(nxt))
                cur[key] = nxt
            cur = nxt
    return root
