"""“Did you mean …?”: the closest known word to a mistyped one.

Candidates are ranked by edit distance (insertions, deletions, substitutions, and swaps of
two neighbours), then by how long a prefix they share with the typed word, then by how common
they are (the order of `common`), then alphabetically. A candidate further away than about a
third of the word's length (one edit for short words) is not suggested.
"""

from __future__ import annotations

from typing import Iterable, Sequence


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (Damerau–Levenshtein without repeated edits)."""
    if a == b:
        return 0
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def did_you_mean(word: str, candidates: Iterable[str], common: Sequence[str] = (), *,
                 case_sensitive: bool = False) -> str | None:
    """The best suggestion for `word` among `candidates`, or None when nothing is close."""
    typed = word if case_sensitive else word.lower()
    rank = {name: i for i, name in enumerate(common)}
    best: tuple | None = None
    choice = None
    limit = max(1, len(typed) // 3)
    for candidate in candidates:
        known = candidate if case_sensitive else candidate.lower()
        distance = edit_distance(typed, known)
        if distance > limit or distance >= max(len(known), 1):
            continue
        key = (distance, -_shared_prefix(typed, known), rank.get(candidate, len(rank)), candidate)
        if best is None or key < best:
            best, choice = key, candidate
    return choice


__all__ = ["did_you_mean", "edit_distance"]
