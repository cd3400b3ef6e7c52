"""LOOP rules: TX210 loop-until-true-when-missing, TX211 loop-max-above-ceiling,
TX212 loop-on-mock (per file) and TX213 loop-cut-by-sibling-halt (tree)."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule, iter_comparisons, tree_rule
from txcl.errors import Diagnostic
from txcl.syntax import ast

DEFAULT_LOOP_CEILING = 1000


@file_rule("TX210")
def until_true_when_missing(ctx: FileContext) -> Iterator[Diagnostic]:
    loop = ctx.rule.loop
    if loop is None or loop.until is None:
        return
    for cmp, nots in iter_comparisons(loop.until):
        if not isinstance(cmp.right, ast.BoolLit) or cmp.op not in (ast.CmpOp.EQ, ast.CmpOp.NE):
            continue
        # A missing path compares as "": `== false` and `!= true` hold at once.
        holds = (cmp.op is ast.CmpOp.EQ) != cmp.right.value
        if nots % 2:
            holds = not holds
        if holds:
            yield ctx.diag("TX210", cmp.span,
                           f"this UNTIL comparison is already true while {cmp.left.source_text} is missing, "
                           "so the loop may stop after one pass",
                           hint='test a value only the op sets when it is finished, such as .status == "done"')


def loop_max_findings(facts, ceiling: int | None, file: str, source: str | None) -> list[Diagnostic]:
    """TX211 for one file. It depends on the configured ceiling (`op-loop-max` of
    [tool.txcl.serve]), so it is computed from the cached facts, not cached itself."""
    from txcl.check.facts import span_of
    limit = DEFAULT_LOOP_CEILING if ceiling is None else ceiling
    if not facts or facts.get("loop_max") is None:
        return []
    value, span = facts["loop_max"]
    if value <= limit:
        return []
    which = "default ceiling" if ceiling is None else "configured ceiling (op-loop-max)"
    return [Diagnostic("TX211", f"LOOP MAX {value} is above the {which} {limit}; the runtime refuses "
                       "this loop unless --op-loop-max is raised", file=file, span=span_of(span),
                       source=source)]


@file_rule("TX212")
def loop_on_mock(ctx: FileContext) -> Iterator[Diagnostic]:
    rule = ctx.rule
    if rule.loop is None or rule.exec is None:
        return
    if rule.exec.target == "txco://mock":
        yield ctx.diag("TX212", rule.exec.span,
                       "LOOP repeats txco://mock, which answers the same fixture on every pass",
                       hint="loop over the real op; use mocks through _txc.mocks in tests")


@tree_rule("TX213")
def cut_by_sibling_halt(tree) -> Iterator[Diagnostic]:
    for stage, members in tree.stages.items():
        halting = [m for m in members if m.facts["unconditional"] and m.facts["halt_emit"]]
        if not halting:
            continue
        for member in members:
            if member.facts["loop"] is None:
                continue
            others = [h for h in halting if h is not member]
            if not others:
                continue
            yield tree.diag(member, "TX213", member.facts["loop"],
                            f"{others[0].name} at the same stage ({stage}) halts unconditionally, "
                            "which stops this loop after its first pass",
                            hint="guard the halting rule with a WHEN, or move one of them to another scope")
