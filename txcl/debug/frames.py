"""What a stopped walk shows the client: frames (stack → scope → rule → clause) and variables.

Built from the live objects of the held walk (nothing is copied until asked for); a `StopView`
lives until the walk resumes, and its frame ids and variable references with it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from txcl.debug.engine import Point
from txcl.vocabulary import json_type as _type

TITLES = {"when": "WHEN", "set_pre": "SET", "select": "SELECT", "set_post": "SET", "with": "WITH",
          "exec": "EXEC", "loop": "LOOP", "emit": "EMIT", "answer": "answer", "scope": "entry", "end": "end"}
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PREVIEW = 2000  # a longer string is cut in its preview (its whole text: evaluate it)


@dataclass
class FrameView:
    id: int
    name: str
    kind: str  # clause | rule | scope | stack
    path: str | None = None
    line: int = 0
    envelope: Any = None  # what `evaluate` in this frame sees
    scopes: list[tuple[str, Any, bool]] = field(default_factory=list)  # (name, value, holds envelope paths)

    def as_dap(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "line": self.line, "column": 1 if self.line else 0}
        if self.path:
            out["source"] = {"name": os.path.basename(self.path), "path": self.path}
        else:
            out["presentationHint"] = "subtle"
        return out


def _json_preview(value: Any) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{k}: {_json_preview(v) if not isinstance(v, (dict, list)) else '…'}"
                          for k, v in list(value.items())[:5])
        more = ", …" if len(value) > 5 else ""
        return "{" + inner + more + "}"
    if isinstance(value, list):
        return f"[{len(value)} item{'s' if len(value) != 1 else ''}]"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _PREVIEW else text[:_PREVIEW - 1] + "…"


class StopView:
    """The frames and variables of one stop."""

    def __init__(self, point: Point, path_of: Any = None) -> None:
        self.point = point
        self.path_of = path_of or (lambda op: op.file)
        self.frames: list[FrameView] = []
        self._handles: dict[int, tuple[Any, str | None]] = {}
        self._build()

    # ------------------------------------------------------------ frames
    def _build(self) -> None:
        point = self.point
        run, scope, op = point.run, point.scope, point.op
        facts = self._run_facts(run)
        if scope is not None:
            waiting = [f"{v.op.stack}/{v.op.scope}/{v.op.name}" for v in scope.ops.values() if v.status == "pending"]
            if waiting:
                facts["async ops sent from this scope"] = waiting
        common = [("Run", facts, False)]
        entry = scope.envelope if scope is not None else None
        if op is not None:
            view = scope.of(op) if scope is not None else None
            rule_scopes = self._rule_scopes(point, view)
            name = f"{op.stack}/{op.scope}/{op.name}"
            path = self.path_of(op)
            clause_line = point.line or 0
            if point.kind != "answer":
                title = TITLES.get(point.kind, point.kind)
                if point.kind == "loop":
                    title += f" pass {point.detail.get('pass')}"
                self._frame(f"{title}  {name}", "clause", path, clause_line, entry,
                            rule_scopes + [("Envelope at scope entry", entry, True)] + common)
            first = op.rule.clauses[0].span.start.line if op.rule.clauses else 1
            self._frame(name + ("  (answered)" if point.kind == "answer" else ""), "rule", path,
                        clause_line if point.kind == "answer" else first, entry,
                        rule_scopes + [("Envelope at scope entry", entry, True)] + common)
        if scope is not None:
            frame = scope.frame
            visit = f"  visit {frame.visit}" if getattr(frame, "visit", 1) > 1 else ""
            self._frame(f"{frame.stack}/{frame.scope}{visit}", "scope", None, 0, entry,
                        [("Envelope at scope entry", entry, True), ("Rules", self._rules(scope), False)] + common)
        if run is not None:
            segment = " (resumed)" if getattr(run, "run_id", None) and point.kind != "end" and _resumed(run) else ""
            self._frame(f"stack {run.stack}{segment}", "stack", None, 0, run.envelope,
                        [("Envelope now", run.envelope, True)] + common)

    def _frame(self, name: str, kind: str, path: str | None, line: int, envelope: Any,
               scopes: list[tuple[str, Any, bool]]) -> None:
        self.frames.append(FrameView(len(self.frames) + 1, name, kind, path, line, envelope, scopes))

    def _rule_scopes(self, point: Point, view: Any) -> list[tuple[str, Any, bool]]:
        out: list[tuple[str, Any, bool]] = []
        if view is None:
            return out
        if view.op.rule.when is not None and view.matched is not None:
            conditions = {c.text: {"value": c.value, "left": c.left, "right": c.right} for c in view.conditions}
            conditions["(WHEN holds)"] = bool(view.matched)
            if view.matched and not view.selected:
                conditions["(lost on PRIORITY)"] = True
            out.append(("Conditions", conditions, False))
        if point.kind == "loop":
            out.append(("LOOP pass", {"pass": point.detail.get("pass"), "input": point.detail.get("input"),
                                      "answer": point.detail.get("answer"), "accumulated view": point.detail.get("view")},
                        False))
        if view.input is not None or view.prepare_error:
            out.append(("Op input", view.input if view.prepare_error is None else
                        {"error": view.prepare_error, "input": view.input}, False))
        if view.status is not None or view.answer is not None:
            answer: dict[str, Any] = {"status": view.status}
            if point.detail.get("async"):
                answer["status"] = "sent; the answer comes later"
                if point.detail.get("join_at_scope") is not None:
                    answer["joins at scope"] = point.detail["join_at_scope"]
            if view.answer is not None:
                answer["answer"] = view.answer
            if view.output is not None:
                answer["output (after EMIT)"] = view.output
            if view.error:
                answer["error"] = view.error
            out.append(("Answer", answer, False))
        return out

    @staticmethod
    def _rules(scope: Any) -> dict:
        out: dict[str, Any] = {}
        for view in scope.ops.values():
            op = view.op
            verdict = ("runs" if view.selected else "lost on PRIORITY" if view.matched else "WHEN false")
            out[op.name] = {"verdict": verdict, "file": op.file}  # as the tree names it
        return out

    @staticmethod
    def _run_facts(run: Any) -> dict:
        if run is None:
            return {}
        budget = run.budget
        facts: dict[str, Any] = {"rid": run.rid, "status": run.status, "stack": run.stack,
                                 "fuel used": budget.fuel_used}
        if budget.max_fuel:
            facts["fuel left"] = max(budget.max_fuel - budget.fuel_used, 0)
        if budget.max_ttl:
            facts["TTL left"] = budget.ttl
        if getattr(run, "run_id", None):
            facts["run id"] = run.run_id
        facts["outstanding joins"] = list(run.joins or [])
        facts["scopes visited"] = dict(run.visits or {})
        return facts

    # ------------------------------------------------------------ protocol bodies
    def stack_trace(self) -> dict:
        return {"stackFrames": [f.as_dap() for f in self.frames], "totalFrames": len(self.frames)}

    def frame(self, frame_id: Any) -> FrameView | None:
        for f in self.frames:
            if f.id == frame_id:
                return f
        return None

    def scopes(self, frame_id: Any) -> list[dict]:
        frame = self.frame(frame_id)
        if frame is None:
            return []
        return [{"name": name, "variablesReference": self._handle(value, "" if paths else None),
                 "expensive": False, **({"presentationHint": "locals"} if paths else {})}
                for name, value, paths in frame.scopes]

    def _handle(self, value: Any, path: str | None) -> int:
        ref = len(self._handles) + 1
        self._handles[ref] = (value, path)
        return ref

    def variables(self, ref: Any) -> list[dict]:
        found = self._handles.get(ref)
        if found is None:
            return []
        value, path = found
        items = (list(value.items()) if isinstance(value, dict)
                 else [(f"[{i}]", v) for i, v in enumerate(value)] if isinstance(value, list) else [])
        out: list[dict] = []
        for key, child in items:
            child_path = None
            if path is not None:
                if isinstance(value, list):
                    child_path = f"{path}{key}"
                elif _PLAIN_KEY.match(str(key)):
                    child_path = f"{path}.{key}"
            var: dict[str, Any] = {"name": str(key), "value": _json_preview(child), "type": _type(child),
                                   "variablesReference": (self._handle(child, child_path)
                                                          if isinstance(child, (dict, list)) and child else 0)}
            if child_path:
                var["evaluateName"] = child_path
            out.append(var)
        return out

    def value_body(self, value: Any) -> dict:
        """An `evaluate` answer: the JSON text, and a reference to open a container."""
        text = json.dumps(value, ensure_ascii=False, default=str)
        return {"result": text, "type": _type(value),
                "variablesReference": self._handle(value, None) if isinstance(value, (dict, list)) and value else 0}


def _resumed(run: Any) -> bool:
    from txcl.continuations.segment import is_resuming

    try:
        return bool(is_resuming(run))
    except Exception:  # noqa: BLE001 - a run outside the continuations layer
        return False
