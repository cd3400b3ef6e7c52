"""The playground's evaluations: one rule over an envelope, or a whole stack with mocked EXECs.

Nothing here calls the network or writes a store: a rule's EXEC is not run (its output is what
the user typed), and a stack runs on an interpreter without a store whose every EXEC is
answered by the op's `mock-response.json` when it has one, else `{}` (HTTP targets included,
through a transport that never opens a connection).
"""

from __future__ import annotations

import json
from typing import Any

from txcl.errors import TxclError

MAX_TEXT = 256 * 1024  # characters of a rule or an envelope


def _diagnostics(text: str) -> list[dict]:
    from txcl.check.engine import check_source

    return [{"code": d.code, "severity": d.severity, "message": d.message, "line": d.line, "column": d.column,
             "hint": d.hint} for d in check_source(text, "playground.txcl")]


def highlight(text: str) -> str:
    """The rule as HTML with TXCL highlighting (Pygments classes; see static/ui.css)."""
    try:
        from pygments import highlight as _highlight
        from pygments.formatters import HtmlFormatter

        from txcl.highlight import TxclLexer
    except ImportError:  # the highlight extra is missing: plain text
        import html

        return html.escape(text)
    return _highlight(text, TxclLexer(), HtmlFormatter(nowrap=True, classprefix="tx-"))


def _json_object(text: str, what: str) -> tuple[Any, str | None]:
    from txcl.values.jsonio import JsonError, loads

    if not text.strip():
        return {}, None
    try:
        value = loads(text)
    except (JsonError, ValueError) as exc:
        return None, f"{what}: {exc}"
    if not isinstance(value, dict):
        return None, f"{what}: a JSON object is needed"
    return value, None


def _conditions(rule: Any, source: str, envelope: dict) -> list[dict]:
    """Each comparison of WHEN with its value on `envelope`, then each top-level condition."""
    from txcl.evaluate.when import condition_matches
    from txcl.syntax import ast

    when = rule.when
    if when is None or isinstance(when.condition, ast.Star):
        return []
    out: list[dict] = []

    def text_of(node: Any) -> str:
        start, end = node.span.start.offset, node.span.end.offset
        return source[start:end] if 0 <= start < end <= len(source) else ""

    def walk(node: Any, depth: int) -> None:
        out.append({"text": text_of(node), "value": condition_matches(node, envelope), "depth": depth,
                    "leaf": isinstance(node, ast.Comparison)})
        if isinstance(node, (ast.And, ast.Or)):
            for item in node.items:
                walk(item, depth + 1)
        elif isinstance(node, ast.Not):
            walk(node.operand, depth + 1)

    walk(when.condition, 0)
    return out


def evaluate_rule(text: str, envelope_text: str, output_text: str) -> dict:
    """What one rule does to an envelope, as the playground shows it."""
    from txcl.evaluate.rule import apply_rule
    from txcl.syntax.parser import parse_rule

    text, envelope_text, output_text = text[:MAX_TEXT], envelope_text[:MAX_TEXT], output_text[:MAX_TEXT]
    answer: dict[str, Any] = {"diagnostics": _diagnostics(text), "highlighted": highlight(text)}
    envelope, problem = _json_object(envelope_text, "envelope")
    output, output_problem = _json_object(output_text, "op output")
    answer["input_errors"] = [p for p in (problem, output_problem) if p]
    if envelope is None or output is None:
        return answer
    try:
        rule = parse_rule(text, filename="playground.txcl")
    except TxclError:
        return answer  # the diagnostics say why
    result = apply_rule(rule, envelope, output=output)
    answer.update({
        "matched": result.matched,
        "conditions": _conditions(rule, text, envelope),
        "exec": rule.exec.target if rule.exec is not None else None,
        "op_input": result.dispatched,
        "directives": result.directives,
        "output": result.output,
        "envelope": result.envelope if result.matched else envelope,
        "error": result.error,
        "dropped": list(result.dropped),
    })
    return answer


async def run_stack(tree: Any, stack: str, envelope_text: str) -> dict:
    """A whole stack over an envelope with every EXEC mocked (see the module docstring)."""
    import httpx

    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Completed, Failed, Interpreter

    envelope, problem = _json_object(envelope_text[:MAX_TEXT], "envelope")
    if envelope is None:
        return {"input_errors": [problem]}
    if stack not in tree.user_stacks():
        return {"input_errors": [f"no stack {stack!r} in the workspace"]}
    traces: list[Any] = []
    interp = Interpreter(tree, store=None, settings=Settings(trace_mode="full"), trace_sink=traces.append)
    calls: list[str] = []

    def answer_for(target: Any) -> dict:
        calls.append(target.text)
        return {}

    def stand_in(target: Any, op_input: dict, op: Any = None) -> Any:
        return answer_for(target)

    def http(request: Any) -> Any:
        calls.append(str(request.url))
        return httpx.Response(200, json={})

    interp.services.stand_in = stand_in
    interp.services.http_client = httpx.AsyncClient(transport=httpx.MockTransport(http))
    try:
        outcome = await interp.run(envelope, stack, src="playground", mocks=["*"])
    except TxclError as exc:
        return {"input_errors": [str(exc)]}
    finally:
        await interp.aclose_http()
        interp.close()
    steps = [{"stage": s.get("stage"), "name": s.get("name"), "status": s.get("status"),
              "transport": s.get("transport"), "error": s.get("error")}
             for record in traces for s in (record.steps or [])]
    result: dict[str, Any] = {"steps": steps, "mocked_calls": calls}
    if isinstance(outcome, Completed):
        result.update(status="halted" if outcome.halted else "completed", envelope=outcome.envelope)
    elif isinstance(outcome, Failed):
        result.update(status="failed", error=outcome.payload)
    else:
        result.update(status=getattr(outcome, "status", "suspended"))
    return result


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


__all__ = ["evaluate_rule", "run_stack", "highlight"]
