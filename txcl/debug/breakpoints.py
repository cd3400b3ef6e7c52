"""Breakpoints of a debug session: where, on what condition, after how many hits, and what to log.

Conditions and the `{…}` parts of a log message are TXCL, evaluated on the envelope the scope
started with (the envelope its WHEN conditions see). `evaluate_text` is the debugger's
`evaluate`: a value expression gives what `txcl eval` gives, a condition gives true or false.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from txcl.errors import TxclError, TxclSyntaxError

_HIT = re.compile(r"^\s*(==|>=|<=|>|<|%)?\s*(\d+)\s*$")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


class BadBreakpoint(ValueError):
    """A condition, hit count or log message that cannot be used (the message says why)."""


def _first_problem(exc: TxclSyntaxError) -> str:
    diags = getattr(exc, "diagnostics", None) or []
    if diags:
        d = diags[0]
        return f"{d.code} {d.message} (column {d.span.start.column})"
    return str(exc).splitlines()[0]


def parse_condition(text: str) -> Any:
    """A TXCL condition (`.order.total > 100`) as its AST node; raises BadBreakpoint."""
    from txcl.syntax.parser import parse_rule

    prefix = "WHEN "
    try:
        rule = parse_rule(prefix + text, filename="<condition>")
    except TxclSyntaxError as exc:
        diags = getattr(exc, "diagnostics", None) or []
        if not diags:
            raise BadBreakpoint(str(exc).splitlines()[0]) from None
        d = diags[0]
        raise BadBreakpoint(f"{d.code} {d.message} (column {max(d.span.start.column - len(prefix), 1)})") from None
    if rule.when is None or len(rule.clauses) != 1:
        raise BadBreakpoint("expected one condition")
    return rule.when.condition


def evaluate_text(text: str, envelope: Any) -> tuple[Any, str]:
    """Evaluate `text` on `envelope`: (value, "expression") for a value expression, as `txcl
    eval` does, or (true/false, "condition") for a condition. Raises BadBreakpoint with the
    reason when it is neither, or when evaluating it fails."""
    from txcl.evaluate.expression import eval_expression
    from txcl.evaluate.when import condition_matches

    env = envelope if isinstance(envelope, dict) else {}
    try:
        return eval_expression(text, env), "expression"
    except TxclSyntaxError as exc:
        as_value = _first_problem(exc)
    except TxclError as exc:
        raise BadBreakpoint(str(exc)) from None
    try:
        condition = parse_condition(text)
    except BadBreakpoint:
        raise BadBreakpoint(f"neither an expression nor a condition: {as_value}") from None
    return condition_matches(condition, env), "condition"


@dataclass
class HitCount:
    """`N` or `==N` (the Nth hit), `>=N`, `>N`, `<N`, `<=N`, `%N` (every Nth)."""

    op: str
    n: int

    @classmethod
    def parse(cls, text: str | None) -> "HitCount | None":
        if text is None or not str(text).strip():
            return None
        m = _HIT.match(str(text))
        if m is None:
            raise BadBreakpoint(f"hit count {text!r}: write N, ==N, >=N, >N, <N, <=N or %N")
        n = int(m.group(2))
        if m.group(1) == "%" and n == 0:
            raise BadBreakpoint("hit count %0: every 0th hit never comes")
        return cls(m.group(1) or "==", n)

    def holds(self, hits: int) -> bool:
        n = self.n
        return {"==": hits == n, ">=": hits >= n, ">": hits > n, "<": hits < n, "<=": hits <= n,
                "%": n > 0 and hits % n == 0}[self.op]


def render_log(message: str, envelope: Any) -> str:
    """A log point's message with each `{expression}` replaced by its value (`{{`, `}}`: braces)."""
    import json

    def one(m: re.Match) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        try:
            value, _ = evaluate_text(m.group(1).strip(), envelope)
        except BadBreakpoint as exc:
            return f"<{exc}>"
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)

    return _PLACEHOLDER.sub(one, message)


@dataclass
class Breakpoint:
    """One line or function breakpoint as the client set it."""

    id: int
    condition: Any = None  # parsed condition node, or None
    condition_text: str | None = None
    hit: HitCount | None = None
    log_message: str | None = None
    hits: int = 0
    verified: bool = True
    message: str | None = None
    line: int | None = None  # line breakpoints: the first line of the clause it stands on
    clause: str | None = None  # the clause's kind (when, set_pre, select, …)
    name: str | None = None  # function breakpoints: stack/scope or stack/scope/rule

    @classmethod
    def of(cls, bid: int, spec: dict) -> "Breakpoint":
        """From a client's `SourceBreakpoint`/`FunctionBreakpoint`; a bad condition, hit count
        or message leaves it unverified with the reason."""
        bp = cls(bid)
        try:
            cond = spec.get("condition")
            if isinstance(cond, str) and cond.strip():
                bp.condition, bp.condition_text = parse_condition(cond), cond
            bp.hit = HitCount.parse(spec.get("hitCondition"))
            log = spec.get("logMessage")
            if isinstance(log, str) and log:
                bp.log_message = log
        except BadBreakpoint as exc:
            bp.verified, bp.message = False, str(exc)
        return bp

    def reached(self, envelope: Any) -> bool:
        """Whether reaching this breakpoint stops (or logs): its condition holds and, counting
        this hit, its hit count says so."""
        if not self.verified:
            return False
        if self.condition is not None:
            from txcl.evaluate.when import condition_matches

            if not condition_matches(self.condition, envelope if isinstance(envelope, dict) else {}):
                return False
        self.hits += 1
        return self.hit is None or self.hit.holds(self.hits)

    def as_dap(self, source: dict | None = None) -> dict:
        out: dict[str, Any] = {"id": self.id, "verified": self.verified}
        if self.line is not None:
            out["line"] = self.line
        if source is not None:
            out["source"] = source
        if self.message:
            out["message"] = self.message
        return out


@dataclass
class ClauseLines:
    """The clauses of one rule file: (kind, first line, last line), in file order."""

    clauses: list[tuple[str, int, int]] = field(default_factory=list)

    @classmethod
    def of_file(cls, path: str) -> "ClauseLines | None":
        """None when the file cannot be read or parsed as a rule."""
        from txcl.syntax.parser import parse_source

        try:
            with open(path, "rb") as fh:
                rule = parse_source(fh.read(), path)
        except (OSError, TxclError):
            return None
        return cls.of_rule(rule)

    @classmethod
    def of_rule(cls, rule: Any) -> "ClauseLines":
        return cls([(c.kind, c.span.start.line, max(c.span.end.line, c.span.start.line)) for c in rule.clauses])

    def at(self, line: int) -> tuple[str, int] | None:
        """The clause standing on `line` (its kind and first line)."""
        for kind, first, last in self.clauses:
            if first <= line <= last:
                return kind, first
        return None

    def line_of(self, kind: str) -> int | None:
        for k, first, _ in self.clauses:
            if k == kind:
                return first
        return None


EXCEPTION_FILTERS = [
    {"filter": "opError", "label": "Op error", "default": False,
     "description": "Stop when an op fails, times out or answers something that is not usable."},
    {"filter": "exhausted", "label": "Fuel or TTL exhausted", "default": True,
     "description": "Stop when the walk runs out of fuel or of its scope budget (TTL)."},
    {"filter": "suspend", "label": "Suspend", "default": False,
     "description": "Stop when the run suspends to wait for async ops or a join."},
]
