"""The view of one OPS tree that tree-wide rules work on: members with facts, stages and
stack overlays."""

from __future__ import annotations

from typing import Any, Callable

import attrs

from txcl.check.facts import SpanT, span_of
from txcl.errors import Diagnostic


def lineage(stack: str) -> list[str]:
    from txcl.ops.layout import lineage as _lineage

    return _lineage(stack)


@attrs.define(eq=False)
class Member:
    file: str
    stack: str
    scope: int
    name: str
    facts: dict[str, Any]

    @property
    def stage(self) -> str:
        return f"{self.stack}/{self.scope}"


@attrs.define
class TreeContext:
    members: list[Member]
    source_of: Callable[[str], str | None] = lambda file: None
    stages: dict[str, list[Member]] = attrs.field(factory=dict)
    by_stack: dict[str, dict[int, list[Member]]] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        for m in sorted(self.members, key=lambda m: (m.stack, m.scope, m.name)):
            self.stages.setdefault(m.stage, []).append(m)
            self.by_stack.setdefault(m.stack, {}).setdefault(m.scope, []).append(m)

    def diag(self, member: Member, code: str, span: SpanT | None, message: str,
             hint: str | None = None) -> Diagnostic:
        kwargs = {"span": span_of(span)} if span is not None else {}
        return Diagnostic(code, message, file=member.file, hint=hint,
                          source=self.source_of(member.file), **kwargs)

    def effective_scopes(self, stack: str) -> list[int]:
        scopes: set[int] = set()
        for s in lineage(stack):
            scopes.update(self.by_stack.get(s, {}))
        return sorted(scopes)

    def rules_at(self, stack: str, scope: int) -> list[Member]:
        """The rules that run at (stack, scope): the nearest stack in the lineage defining it."""
        for s in lineage(stack):
            members = self.by_stack.get(s, {}).get(scope)
            if members:
                return members
        return []
