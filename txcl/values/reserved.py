"""The `_txc` namespace: author-writable, delete-only and reserved paths, and sanitising untrusted outputs."""

from __future__ import annotations

from typing import Any, Sequence

from txcl.vocabulary import AUTHOR_WRITABLE, DELETE_ONLY_INBOUND

__all__ = [
    "AUTHOR_WRITABLE", "DELETE_ONLY_INBOUND", "is_author_writable", "is_reserved",
    "is_deletable", "sanitize_untrusted", "path_text",
]

# (the paths themselves are part of the language's vocabulary)

# second segment -> prefixes of length 2 or 3 starting with it
_BY_SECOND: dict[str, list[tuple[str, ...]]] = {}
for _p in AUTHOR_WRITABLE:
    _BY_SECOND.setdefault(_p[1], []).append(_p)


def is_author_writable(segments: Sequence[str]) -> bool:
    """True for paths outside `_txc` and paths at or below an author-writable subtree.

    `_txc.ttl` is not writable here: only EMIT may lower it, and it handles that itself.
    """
    if not segments or segments[0] != "_txc":
        return True
    if len(segments) < 2:
        return False
    for prefix in _BY_SECOND.get(segments[1], ()):
        if len(segments) >= len(prefix) and tuple(segments[: len(prefix)]) == prefix:
            return True
    return False


def is_reserved(segments: Sequence[str]) -> bool:
    """True for paths under `_txc` that are not author-writable (`_txc` itself included)."""
    return not is_author_writable(segments)


def is_deletable(segments: Sequence[str]) -> bool:
    """May `@delete` remove this target? Author-writable, or at/below a consumed inbound fact."""
    if is_author_writable(segments):
        return True
    return any(tuple(segments[: len(p)]) == p for p in DELETE_ONLY_INBOUND if len(segments) >= len(p))


def path_text(segments: Sequence[str]) -> str:
    """Canonical path text (`.a.b`, with `\\ . * ?` escaped), as `Path.text` writes it."""
    from txcl.syntax.ast import canonical_segment

    return "." + ".".join(canonical_segment(s) for s in segments)


def sanitize_untrusted(output: dict) -> tuple[dict, list[str]]:
    """Drop every `_txc` member of an untrusted output that is not author-writable.

    Returns the sanitised output and the dropped paths as canonical text (`._txc.rid`).
    The input is not changed: when something is dropped, the containers on the way are
    shallow copies; when nothing is, the same object is returned. A `_txc` object that
    becomes empty through dropping is removed.
    """
    txc = output.get("_txc") if isinstance(output, dict) else None
    if txc is None and (not isinstance(output, dict) or "_txc" not in output):
        return output, []
    dropped: list[str] = []
    if not isinstance(txc, dict):
        dropped.append(path_text(("_txc",)))
        return {k: v for k, v in output.items() if k != "_txc"}, dropped
    kept = _filter(txc, ("_txc",), dropped)
    if not dropped:
        return output, []
    result = {k: v for k, v in output.items() if k != "_txc"}
    if kept:
        result["_txc"] = kept
    return result, dropped


def _filter(node: dict, prefix: tuple[str, ...], dropped: list[str]) -> dict:
    kept: dict[str, Any] = {}
    for key, value in node.items():
        path = prefix + (key,)
        if is_author_writable(path):
            kept[key] = value
        elif _has_writable_below(path) and isinstance(value, dict):
            sub = _filter(value, path, dropped)
            if sub or not value:
                kept[key] = sub
        else:
            dropped.append(path_text(path))
    return kept


def _has_writable_below(path: tuple[str, ...]) -> bool:
    n = len(path)
    return any(len(p) > n and p[:n] == path for p in AUTHOR_WRITABLE)
