"""Rule coverage of a `txcl test` session.

Per rule: `ran` (selected at least once: WHEN true and not outranked by PRIORITY),
`when never true` (its scope was entered but it was never selected), or `never reached` (its
scope was never entered). Per WHEN condition (each comparison): seen true, seen false. Per
scope: entered. The total is the share of rules that ran.

Reports: a table for people, `json` for tools, `lcov` mapping rules onto their files' lines
(each line of a rule counts the times it ran; each comparison is a branch pair true/false),
which editors and coverage services show.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs


@attrs.define
class ConditionStats:
    text: str
    line: int
    true: int = 0
    false: int = 0


@attrs.define
class RuleStats:
    key: str  # stack/scope/name
    file: str
    first_line: int
    last_line: int
    considered: int = 0
    ran: int = 0
    conditions: list[ConditionStats] = attrs.field(factory=list)
    leaves: list[Any] = attrs.field(factory=list, repr=False)  # (compiled predicate, stats)

    @property
    def status(self) -> str:
        if self.ran:
            return "ran"
        return "when never true" if self.considered else "never reached"


class CoverageCollector:
    """Observes the walker of every case (see Walker.observer)."""

    def __init__(self, tree: Any) -> None:
        from txcl.evaluate.when import compile_condition, condition_leaves

        self.rules: dict[int, RuleStats] = {}
        self.by_key: dict[str, RuleStats] = {}
        self.scopes: dict[str, int] = {}
        for stack in tree.stacks():
            for scope in tree.own_scopes(stack):
                self.scopes.setdefault(f"{stack}/{scope}", 0)
                for op in tree.rules_at(stack, scope):
                    source = op.source or ""
                    stats = RuleStats(op.key, op.file, 1, max(1, source.count("\n") + (0 if source.endswith("\n") else 1)))
                    when = op.rule.when
                    if when is not None:
                        for leaf in condition_leaves(when.condition):
                            start, end = leaf.span.start.offset, leaf.span.end.offset
                            cond = ConditionStats(source[start:end] if end > start else "?", leaf.span.start.line)
                            try:
                                predicate = compile_condition(leaf)
                            except Exception:  # noqa: BLE001 - a leaf that cannot compile is never true
                                predicate = None
                            stats.conditions.append(cond)
                            stats.leaves.append((predicate, cond))
                    self.rules[id(op)] = stats
                    self.by_key[op.key] = stats

    def attach(self, walker: Any) -> None:
        walker.observer = self

    def scope_selected(self, frame: Any, rules: Any, selected: Any, envelope: Any) -> None:
        stage = f"{frame.stack}/{frame.scope}"
        self.scopes[stage] = self.scopes.get(stage, 0) + 1
        chosen = {id(op) for op in selected}
        for op in rules:
            stats = self.rules.get(id(op))
            if stats is None:
                continue
            stats.considered += 1
            if id(op) in chosen:
                stats.ran += 1
            for predicate, cond in stats.leaves:
                seen = False
                if predicate is not None and isinstance(envelope, dict):
                    try:
                        seen = bool(predicate(envelope))
                    except Exception:  # noqa: BLE001 - evaluation never raises; false
                        seen = False
                if seen:
                    cond.true += 1
                else:
                    cond.false += 1

    # -------------------------------------------------------------- figures
    def percent(self) -> float:
        if not self.by_key:
            return 100.0
        return 100.0 * sum(1 for r in self.by_key.values() if r.ran) / len(self.by_key)

    def condition_percent(self) -> float:
        branches = [c for r in self.by_key.values() for c in r.conditions]
        if not branches:
            return 100.0
        return 100.0 * sum((c.true > 0) + (c.false > 0) for c in branches) / (2 * len(branches))


def _rel(path: str) -> str:
    try:
        return os.path.relpath(path, os.getcwd())
    except ValueError:
        return path


def table(collector: CoverageCollector, root: Path) -> str:
    rows = sorted(collector.by_key.values(), key=lambda r: (r.file, r.key))
    width = max([len(_rel(r.file)) for r in rows] + [4])
    lines = [f"{'rule':<{width}}  {'status':<16} {'ran':>5}  conditions (true/false)"]
    for r in rows:
        conds = ", ".join(f"{c.text} {c.true}/{c.false}" for c in r.conditions) or "-"
        lines.append(f"{_rel(r.file):<{width}}  {r.status:<16} {r.ran:>5}  {conds}")
    entered = sum(1 for n in collector.scopes.values() if n)
    lines.append(f"rules: {collector.percent():.1f}% ran; conditions: {collector.condition_percent():.1f}% of "
                 f"true/false seen; scopes: {entered} of {len(collector.scopes)} entered")
    return "\n".join(lines)


def as_json(collector: CoverageCollector, root: Path) -> str:
    rules = [{
        "rule": r.key, "file": _rel(r.file), "status": r.status, "considered": r.considered, "ran": r.ran,
        "conditions": [{"text": c.text, "line": c.line, "true": c.true, "false": c.false} for c in r.conditions],
    } for r in sorted(collector.by_key.values(), key=lambda r: (r.file, r.key))]
    return json.dumps({"percent": round(collector.percent(), 2),
                       "conditions_percent": round(collector.condition_percent(), 2),
                       "rules": rules,
                       "scopes": [{"stage": s, "entered": n} for s, n in sorted(collector.scopes.items())]},
                      indent=2, ensure_ascii=False) + "\n"


def lcov(collector: CoverageCollector, root: Path) -> str:
    """LCOV tracefile: each rule file's lines hit as often as the rule ran; a comparison is a
    branch pair (true, false)."""
    out = ["TN:txcl"]
    for r in sorted(collector.by_key.values(), key=lambda r: r.file):
        out.append(f"SF:{os.path.abspath(r.file)}")
        for line in range(r.first_line, r.last_line + 1):
            out.append(f"DA:{line},{r.ran}")
        taken = 0
        for block, c in enumerate(r.conditions):
            out.append(f"BRDA:{c.line},{block},0,{c.true if r.considered else '-'}")
            out.append(f"BRDA:{c.line},{block},1,{c.false if r.considered else '-'}")
            taken += (c.true > 0) + (c.false > 0)
        if r.conditions:
            out += [f"BRF:{2 * len(r.conditions)}", f"BRH:{taken}"]
        lines = r.last_line - r.first_line + 1
        out += [f"LF:{lines}", f"LH:{lines if r.ran else 0}", "end_of_record"]
    return "\n".join(out) + "\n"


def render_coverage(collector: CoverageCollector, fmt: str, root: Path) -> str:
    if fmt == "json":
        return as_json(collector, root)
    if fmt == "lcov":
        return lcov(collector, root)
    return table(collector, root)


__all__ = ["CoverageCollector", "render_coverage", "table", "as_json", "lcov"]
