"""Per-file analysis: parse one rule, run the file rules, extract tree facts.

The result depends only on the file's bytes (not on its name or the configuration), so
it is what the parse cache stores.
"""

from __future__ import annotations

from typing import Any

import attrs

from txcl.check.facts import SpanT, extract, span_of, span_t
from txcl.check.rules import base as _base
from txcl.check.rules import load_rule_modules
from txcl.errors import Diagnostic, TxclSyntaxError

load_rule_modules()  # importing each module of txcl/check/rules registers its rules

DiagT = tuple[str, str, SpanT, str | None, str]  # code, message, span, hint, severity


@attrs.frozen
class Analysis:
    """What one file contributes: its findings (file-less) and its facts (None: no AST)."""

    diagnostics: tuple[DiagT, ...]
    facts: dict[str, Any] | None

    def materialize(self, file: str, source: str | None) -> list[Diagnostic]:
        return [Diagnostic(code, message, file=file, span=span_of(span), hint=hint, severity=sev,
                           source=source)
                for code, message, span, hint, sev in self.diagnostics]


def pack(d: Diagnostic) -> DiagT:
    return (d.code, d.message, span_t(d.span), d.hint, d.severity)


def parse(data: bytes | str, filename: str):
    """(Rule or None, parser diagnostics)."""
    from txcl.syntax.parser import parse_source
    try:
        return parse_source(data, filename), []
    except TxclSyntaxError as exc:
        diags = list(exc.diagnostics)
        rule = None
        if diags and all(d.code.startswith("TX1") for d in diags):
            rule = _rule_despite_load_errors(data, filename)
        return rule, diags


def _rule_despite_load_errors(data: bytes | str, filename: str):
    """The AST of a rule whose only problems are per-rule TX1xx checks, so the TX2xx/TX3xx
    rules still run on it (parse_rule raises without the AST in that case)."""
    try:
        from txcl.syntax.parser import get_parser
        text = data if isinstance(data, str) else data.decode("utf-8")
        rule, diags = get_parser().parse(text, filename)
    except Exception:
        return None
    return rule if not diags else None


def analyze(data: bytes | str, filename: str = "<string>", stack: str | None = None) -> Analysis:
    rule, diags = parse(data, filename)
    if rule is None:
        return Analysis(tuple(pack(d) for d in diags), None)
    text = data if isinstance(data, str) else data.decode("utf-8")
    ctx = _base.FileContext(rule, text, filename, stack)
    found: list[Diagnostic] = list(diags)
    for registered in _base.FILE_RULES:
        found.extend(registered.fn(ctx))
    return Analysis(tuple(pack(d) for d in found), extract(rule))
