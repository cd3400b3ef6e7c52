"""Why a stored request went the way it did (`txcl why`): which rules ran, which did not and why.

For a request recorded with its op answers (`--trace-ops answers`, or full traces) the walk is
done again — through the tree as it is now, every op answered from the recording (as `txcl
replay` does), nothing called — with an observer at each scope's rule selection: every WHEN
condition is evaluated on the envelope the scope started with, both sides shown; a rule whose
WHEN held but lost on PRIORITY is named so. Scopes the walk never entered are explained by where
it went instead (a jump past them, a halt, the end of the walk). A request recorded in summary
only gets what its trace holds: the scopes entered and the rules that ran.

Nothing is added to the hot path: the explanation costs a second walk when it is asked for.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from txcl.syntax import ast


@dataclass
class Condition:
    text: str
    left: Any
    right: Any
    value: bool

    def as_json(self) -> dict:
        return {"condition": self.text, "left": self.left, "right": self.right, "value": self.value}


@dataclass
class RuleWhy:
    rule: str  # stack/scope/name
    file: str | None
    verdict: str  # ran | failed | when false | lost on priority | no op
    conditions: list[Condition] = field(default_factory=list)
    detail: str | None = None

    def as_json(self) -> dict:
        out: dict[str, Any] = {"rule": self.rule, "file": self.file, "verdict": self.verdict}
        if self.conditions:
            out["conditions"] = [c.as_json() for c in self.conditions]
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class ScopeWhy:
    stage: str
    entered: bool
    rules: list[RuleWhy] = field(default_factory=list)
    detail: str | None = None

    def as_json(self) -> dict:
        out: dict[str, Any] = {"stage": self.stage, "entered": self.entered, "rules": [r.as_json() for r in self.rules]}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class Explanation:
    rid: str
    stack: str | None
    status: str | None
    how: str  # "walked again with the recorded op answers" | "from the summary trace"
    scopes: list[ScopeWhy]
    note: str | None = None

    def as_json(self) -> dict:
        out: dict[str, Any] = {"rid": self.rid, "stack": self.stack, "status": self.status, "how": self.how,
                               "scopes": [s.as_json() for s in self.scopes]}
        if self.note:
            out["note"] = self.note
        return out


def _side(node: Any, envelope: Any) -> Any:
    from txcl.evaluate.values import resolve

    if isinstance(node, ast.Regex):
        return f"/{node.pattern}/"
    try:
        return resolve(node, envelope)
    except Exception:  # noqa: BLE001 - shown as what it is: not computable here
        return "(not computable)"


def when_outcome(op: Any, envelope: Any) -> tuple[list[Condition], bool]:
    """Each WHEN condition of `op`'s rule on `envelope` (its text, both sides, its value) and
    whether the whole WHEN holds (a rule without WHEN, or `WHEN *`, holds with no condition)."""
    from txcl.evaluate.when import condition_leaves, condition_matches

    when = op.rule.when
    if when is None or isinstance(when.condition, ast.Star):
        return [], True
    conditions: list[Condition] = []
    source = op.source or ""
    for leaf in condition_leaves(when.condition):
        start, end = leaf.span.start.offset, leaf.span.end.offset
        text = source[start:end] if end > start else "?"
        try:
            value = bool(condition_matches(leaf, envelope))
        except Exception:  # noqa: BLE001 - evaluation never raises: false
            value = False
        conditions.append(Condition(text, _side(leaf.left, envelope), _side(leaf.right, envelope), value))
    try:
        matched = bool(condition_matches(when.condition, envelope))
    except Exception:  # noqa: BLE001
        matched = False
    return conditions, matched


class WhyObserver:
    """Records, at each scope's rule selection, every rule's WHEN outcome (Walker.observer)."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, list[RuleWhy]]] = []

    def scope_selected(self, frame: Any, rules: Any, selected: Any, envelope: Any) -> None:
        chosen = {id(op) for op in selected}
        top = max((op.facts.priority for op in selected if op.facts is not None), default=0)
        out: list[RuleWhy] = []
        for op in rules:
            rule = f"{frame.stack}/{frame.scope}/{op.name}"
            conditions, matched = when_outcome(op, envelope)
            if id(op) in chosen:
                verdict, detail = "ran", None
            elif matched:
                verdict = "lost on priority"
                mine = op.facts.priority if op.facts is not None else 0
                detail = f"its PRIORITY {mine} is below the {top} of the rules that ran"
            else:
                verdict, detail = "when false", None
            out.append(RuleWhy(rule, op.file, verdict, conditions, detail))
        self.scopes.append((f"{frame.stack}/{frame.scope}", out))


def _entered(record: Any) -> list[str]:
    """The stages a recorded walk entered, in order (events are `(seq, at_ms, kind, data)` or dicts)."""
    out: list[str] = []
    for e in record.events:
        kind, data = (e.get("kind"), e.get("data")) if isinstance(e, dict) else (e[2], e[3])
        if kind == "stage.enter" and isinstance(data, dict) and data.get("stage"):
            out.append(str(data["stage"]))
    return out


def _not_entered(tree: Any, stack: str, entered: list[str], status: str | None) -> list[ScopeWhy]:
    """The scopes of the entry stack the walk did not enter, and where it went instead."""
    out: list[ScopeWhy] = []
    seen = set(entered)
    order = [f"{stack}/{scope}" for scope in tree.own_scopes(stack)] if stack in tree.stacks() else []
    for stage in order:
        if stage in seen:
            continue
        scope = int(stage.rsplit("/", 1)[1])
        before = [s for s in entered if s.startswith(stack + "/") and int(s.rsplit("/", 1)[1]) < scope]
        after = [s for s in entered if s.startswith(stack + "/") and int(s.rsplit("/", 1)[1]) > scope]
        if before and after:
            detail = f"the walk went from {before[-1]} to {after[0]} (a jump past it)"
        elif not entered:
            detail = "the walk entered no scope"
        else:
            last = entered[-1]
            detail = (f"the walk halted at {last}" if status == "halted" else
                      f"the walk failed at {last}" if status == "failed" else
                      f"the walk left the stack at {last} (a jump elsewhere)" if not last.startswith(stack + "/")
                      else f"the walk ended at {last}")
        out.append(ScopeWhy(stage, False, detail=detail))
    return out


def _ops_status(steps: list[dict]) -> dict[str, dict]:
    return {f"{s.get('stack')}/{s.get('scope')}/{s.get('name')}": s for s in steps}


async def explain(tree: Any, settings: Any, record: Any) -> Explanation:
    """The explanation of one stored request (see the module docstring)."""
    from txcl.replay import NotReplayable, rewalk

    request = record.request
    rid, stack, status = request.get("rid") or "?", request.get("entry_stack"), request.get("status")
    observer = WhyObserver()
    note = None
    try:
        _, traces = await rewalk(tree, settings, record, observer=observer)
    except NotReplayable as exc:
        return _from_trace(tree, record, f"the conditions are not shown: {exc}")
    steps = _ops_status([s for t in traces for s in (t.steps or [])])
    recorded = _ops_status(list(record.steps))
    scopes: list[ScopeWhy] = []
    for stage, rules in observer.scopes:
        for why in rules:
            step = steps.get(why.rule)
            if why.verdict == "ran" and step is not None and step.get("status") not in ("ok", None):
                why.verdict = "failed"
                why.detail = f"{step.get('error') or step.get('status')}; the walk went on (a sync op is best effort)"
        scopes.append(ScopeWhy(stage, True, rules))
    ran_now = {k for k, s in steps.items() if s.get("status") not in ("skipped", "not_run")}
    ran_then = {k for k, s in recorded.items() if s.get("status") not in ("skipped", "not_run")}
    if ran_now != ran_then:
        note = ("the tree changed since this request: walked again, other rules run "
                f"({', '.join(sorted(ran_now ^ ran_then)[:5])}); `txcl replay` shows the difference")
    entered = [stage for stage, _ in observer.scopes]
    scopes += _not_entered(tree, stack, entered, status)
    scopes.sort(key=_stage_key)
    return Explanation(rid, stack, status, "walked again with the recorded op answers", scopes, note)


def _stage_key(scope: ScopeWhy) -> tuple[str, int]:
    stack, _, number = scope.stage.rpartition("/")
    return stack, int(number) if number.isdigit() else 0


def _from_trace(tree: Any, record: Any, note: str) -> Explanation:
    """What a summary trace alone tells: the scopes entered, the rules that ran."""
    request = record.request
    stack, status = request.get("entry_stack"), request.get("status")
    by_stage: dict[str, list[RuleWhy]] = {}
    for step in record.steps:
        stage = f"{step.get('stack')}/{step.get('scope')}"
        state = step.get("status")
        verdict = "ran" if state in ("ok", None) else "failed" if state not in ("skipped", "not_run") else str(state)
        by_stage.setdefault(stage, []).append(RuleWhy(f"{stage}/{step.get('name')}", None, verdict,
                                                      detail=step.get("error")))
    entered = _entered(record)
    scopes = [ScopeWhy(stage, True, by_stage.get(stage, [])) for stage in dict.fromkeys(entered)]
    scopes += _not_entered(tree, stack, entered, status)
    scopes.sort(key=_stage_key)
    return Explanation(request.get("rid") or "?", stack, status, "from the summary trace", scopes, note)


def explain_sync(tree: Any, settings: Any, record: Any) -> Explanation:
    return asyncio.run(explain(tree, settings, record))


def render(why: Explanation, *, scope: int | None = None, rule: str | None = None) -> str:
    lines = [f"request {why.rid}  stack {why.stack}  {why.status}  ({why.how})"]
    if why.note:
        lines.append(f"note: {why.note}")
    for s in why.scopes:
        if scope is not None and not s.stage.endswith(f"/{scope}"):
            continue
        rules = [r for r in s.rules if rule is None or _rule_matches(r, rule)]
        if rule is not None and not rules:
            continue
        lines.append(s.stage + ("" if s.entered else f"  not entered: {s.detail}"))
        for r in rules:
            lines.append(f"  {r.verdict:<17} {r.rule.rsplit('/', 1)[1]}" + (f"  ({r.detail})" if r.detail else ""))
            for c in r.conditions:
                lines.append(f"      {c.text}  ->  {str(c.value).lower()}   "
                             f"(left {json.dumps(c.left, ensure_ascii=False, default=str)[:60]}, "
                             f"right {json.dumps(c.right, ensure_ascii=False, default=str)[:60]})")
    return "\n".join(lines)


def _rule_matches(r: RuleWhy, wanted: str) -> bool:
    name = r.rule.rsplit("/", 1)[1]
    file = r.file or ""
    return wanted in (name, r.rule) or (bool(file) and (file == wanted or file.endswith("/" + wanted.lstrip("./"))))


__all__ = ["Explanation", "WhyObserver", "explain", "explain_sync", "render"]
