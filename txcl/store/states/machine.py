"""The shape of a table's states: its names, the states a row is born in, its transitions and groups."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StateMachine:
    table: str
    states: tuple[str, ...]
    initial: tuple[str, ...]  # the states a row may be inserted in
    transitions: dict[str, frozenset[str]]  # from -> the states it may move to
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        known = set(self.states)
        named = set(self.initial) | set(self.transitions) | {s for to in self.transitions.values() for s in to}
        named |= {s for g in self.groups.values() for s in g}
        unknown = named - known
        if unknown:
            raise ValueError(f"{self.table}: states named but not declared: {sorted(unknown)}")

    def allows(self, old: str, new: str) -> bool:
        return old == new or new in self.transitions.get(old, frozenset())

    def group(self, name: str) -> tuple[str, ...]:
        return self.groups[name]


def sql_in(states: tuple[str, ...]) -> str:
    """``('a', 'b')``: a group of states for ``status IN …`` (the words are code, never input)."""
    return "(" + ", ".join(f"'{s}'" for s in states) + ")"


__all__ = ["StateMachine", "sql_in"]
