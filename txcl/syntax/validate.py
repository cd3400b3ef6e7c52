"""Per-rule load checks TX101–TX112, run on rules without syntax errors."""

from __future__ import annotations

from typing import Any, Iterator

from txcl.errors import Diagnostic, Position, Span
from txcl.syntax import ast
from txcl.syntax.targets import ASYNC_KINDS, WORKER_TAKES, ExecTarget, classify_exec_target

__all__ = ["validate_rule", "iter_calls"]


def _children(node: Any) -> tuple:
    """The parts of `node` that may hold calls."""
    t = type(node)
    if t is ast.Rule:
        return (node.when, node.set_pre, node.select, node.set_post, node.with_, node.loop,
                node.emit)
    if t is ast.Call or t is ast.And or t is ast.Or:
        return node.args if t is ast.Call else node.items
    if t is ast.Assignment or t is ast.WithPair:
        return (node.value,)
    if t is ast.Comparison:
        return (node.right,)
    if t is ast.When:
        return (node.condition,)
    if t is ast.Not:
        return (node.operand,)
    if t is ast.Select:
        return tuple(item.default for item in node.items)
    if t is ast.Loop:
        return (node.until, node.set)
    if t is tuple:
        return node
    return ()


def iter_calls(node: Any) -> Iterator[ast.Call]:
    """Every call in `node` (a rule, clause, condition or value), nested ones included,
    in source order."""
    stack = [node]
    while stack:
        item = stack.pop()
        if item is None:
            continue
        if type(item) is ast.Call:
            yield item
        parts = _children(item)
        if parts:
            stack.extend(reversed(parts))


def _check_calls(calls: Any, filename: str, out: list[Diagnostic]) -> None:
    from txcl.functions.registry import lookup, suggest

    for call in calls:
        spec = lookup(call.name)
        if spec is None:
            alt = suggest(call.name)
            out.append(Diagnostic("TX101", f"unknown function &{call.name}", filename,
                                  call.name_span, f"did you mean &{alt}?" if alt else None))
            continue
        n = len(call.args)
        if not spec.is_try and not spec.accepts(n):
            arity = spec.arity_text()
            if not arity.startswith("takes "):
                arity = "takes " + arity
            out.append(Diagnostic("TX102", f"&{call.name} {arity}, got {n}", filename,
                                  call.span))


def _literal_with(rule: ast.Rule) -> dict[str, ast.WithPair]:
    """The last pair of each WITH key (later writes win)."""
    return {pair.key_text: pair for pair in rule.with_}


def _string(pair: ast.WithPair | None) -> str | None:
    if pair is not None and isinstance(pair.value, ast.StringLit):
        return pair.value.value
    return None


def _is_literal(value: Any) -> bool:
    return isinstance(value, (ast.IntLit, ast.FloatLit, ast.StringLit, ast.BoolLit,
                              ast.ArrayLit))


def _literal_text(value: Any) -> str:
    if isinstance(value, (ast.IntLit, ast.FloatLit)):
        return value.text
    if isinstance(value, ast.StringLit):
        return f'"{value.value}"'
    if isinstance(value, ast.BoolLit):
        return "true" if value.value else "false"
    return "[...]"


def _keyword_span(span: Span, width: int) -> Span:
    s = span.start
    return Span(s, Position(s.line, s.column + width, s.offset + width))


def validate_rule(rule: ast.Rule, filename: str = "<string>",
                  calls: list[ast.Call] | None = None) -> list[Diagnostic]:
    """TX101–TX115 for one parsed rule, in source order.

    `calls` (every call of the rule, as the parser collects them) saves walking the AST.
    """
    out: list[Diagnostic] = []
    _check_calls(iter_calls(rule) if calls is None else calls, filename, out)

    target: ExecTarget | None = None
    if rule.exec is not None:
        result = classify_exec_target(rule.exec.target)
        if isinstance(result, ExecTarget):
            target = result
        else:
            out.append(Diagnostic(result.code, result.message, filename,
                                  rule.exec.target_span))

    withs = _literal_with(rule)
    mode_pair = withs.get("mode")
    mode = _string(mode_pair)
    t = rule.exec.target if rule.exec is not None else ""

    if rule.loop is not None:
        loop_kw = _keyword_span(rule.loop.span, 4)
        if rule.exec is None:
            out.append(Diagnostic("TX106", "LOOP has no EXEC to repeat", filename, loop_kw))
        elif target is not None:
            if target.kind == "builtin" and target.builtin == "noop":
                out.append(Diagnostic(
                    "TX107", "LOOP over txco://noop repeats an op that returns nothing; UNTIL "
                    "could never turn true", filename, rule.exec.target_span))
            elif target.is_stage_jump:
                out.append(Diagnostic(
                    "TX108", f'LOOP cannot repeat a stage jump ("{t}"); put the LOOP on the op '
                    "that produces the data", filename, rule.exec.target_span))
        if mode in ("async", "continuable"):
            out.append(Diagnostic(
                "TX109", f'mode = "{mode}" leaves the request but a LOOP repeats inside it; '
                "drop one of them", filename, mode_pair.span))

    join = withs.get("join_at_scope")
    if join is not None and _is_literal(join.value):
        n = _literal_text(join.value)
        if mode_pair is None or (_is_literal(mode_pair.value) and mode != "async"):
            if mode == "continuable":
                msg = (f'join_at_scope (= {n}) requires mode = "async"; it is not honored with '
                       'mode = "continuable"')
            else:
                shown = ("sync, the default" if mode_pair is None
                         else mode if mode is not None else _literal_text(mode_pair.value))
                msg = f'join_at_scope (= {n}) requires mode = "async" (mode here: {shown})'
            out.append(Diagnostic("TX110", msg, filename, join.span))

    if mode == "async" and target is not None and target.kind not in ASYNC_KINDS:
        out.append(Diagnostic(
            "TX111", f'mode = "async" needs an http(s)://, mcp+http(s)://, queue:// or nats:// target; "{t}" cannot run '
            "asynchronously", filename, rule.exec.target_span))
    if target is not None and target.kind in WORKER_TAKES and (
            mode_pair is None or (_is_literal(mode_pair.value) and mode != "async")):
        shown = "sync, the default" if mode_pair is None else mode if mode is not None else _literal_text(mode_pair.value)
        out.append(Diagnostic(
            "TX115", f'"{t}" waits for a worker to take the job: it needs mode = "async" (mode here: {shown})',
            filename, rule.exec.target_span))

    each = withs.get("each")
    if each is not None and (mode != "async" or "into" not in withs):
        out.append(Diagnostic("TX112", 'each needs mode = "async" and into = "<path>"',
                              filename, each.span))

    _check_secrets(rule, filename, out)
    out.sort(key=lambda d: (d.span.start.offset, d.code))
    return out


def _check_secrets(rule: ast.Rule, filename: str, out: list[Diagnostic]) -> None:
    """TX114: every `secrets.*` WITH pair is a well-formed literal reference."""
    pairs = [p for p in rule.with_ if p.key and p.key[0] == "secrets"]
    if not pairs:
        return
    from txcl.secrets import PLACES
    from txcl.secrets import refs_from_pairs

    for pair in pairs:
        literal = isinstance(pair.value, (ast.StringLit, ast.BoolLit, ast.IntLit, ast.FloatLit))
        value = pair.value.value if isinstance(pair.value, (ast.StringLit, ast.BoolLit)) else None
        _, problems = refs_from_pairs([(tuple(pair.key), value, literal)])
        if problems and not problems[0].endswith("has no .secret naming the secret"):
            out.append(Diagnostic("TX114", problems[0], filename, pair.span))
    pairs = [p for p in pairs if len(p.key) > 1 and p.key[1] in PLACES]  # what txcl itself splices
    if not pairs:
        return
    by_place = {tuple(p.key[:-1]) for p in pairs if len(p.key) >= 4}
    named = {tuple(p.key[:-1]) for p in pairs if p.key[-1] == "secret"}
    for place in sorted(by_place - named):
        first = next(p for p in pairs if tuple(p.key[:-1]) == place)
        out.append(Diagnostic("TX114", f"WITH {'.'.join(place)} has no .secret naming the secret", filename,
                              first.span))
    target = classify_exec_target(rule.exec.target) if rule.exec is not None else None
    if not isinstance(target, ExecTarget) or target.kind not in ("http", "mcp"):
        out.append(Diagnostic("TX114", "secrets are spliced into http(s) and mcp+ requests only; this op makes none",
                              filename, pairs[0].span))
    elif any(p.key[1] == "body" for p in pairs) and (target.kind == "mcp" or _string(_literal_with(rule).get("mode")) == "async"):
        body = next(p for p in pairs if p.key[1] == "body")
        out.append(Diagnostic("TX114", "secrets.body is for sync http(s) ops; an async dispatch or an MCP "
                              "session carries secrets in headers only", filename, body.span))
