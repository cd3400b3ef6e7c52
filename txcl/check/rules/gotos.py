"""Stage jumps: TX230 unconditional-self-loop,
TX231 unconditional-two-stage-cycle, TX232 cross-stack-goto, TX233 goto-unknown-stack."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import tree_rule
from txcl.errors import Diagnostic


def _jumps(member):
    """(target stage, description, span) of each literal jump of a member."""
    for stack, scope, what, span in member.facts["gotos"]:
        yield f"{stack or member.stack}/{scope}", stack or member.stack, what, span


def _blind(member) -> bool:
    return member.facts["unconditional"] and not member.facts["halts"]


@tree_rule("TX230")
def self_loop(tree) -> Iterator[Diagnostic]:
    for m in tree.members:
        if not _blind(m):
            continue
        for stage, _, what, span in _jumps(m):
            if stage == m.stage:
                yield tree.diag(m, "TX230", span,
                                f"{what} jumps back to this rule's own stage {stage} unconditionally; "
                                "the flow repeats until its budget runs out",
                                hint="add a WHEN condition that turns false, or jump elsewhere")


@tree_rule("TX231")
def two_stage_cycle(tree) -> Iterator[Diagnostic]:
    edges: dict[tuple[str, str], tuple] = {}
    for m in tree.members:
        if not _blind(m):
            continue
        for stage, _, what, span in _jumps(m):
            if stage != m.stage:
                edges.setdefault((m.stage, stage), (m, what, span))
    for (a, b), (m, what, span) in sorted(edges.items(), key=lambda kv: kv[0]):
        back = edges.get((b, a))
        if back is None or not a < b:
            continue
        yield tree.diag(m, "TX231", span,
                        f"{what} jumps to {b} unconditionally, and {back[0].name} there jumps back to {a} "
                        "unconditionally: the two stages ping-pong",
                        hint="guard one of the jumps with a WHEN condition")


@tree_rule("TX233")
def unknown_stack(tree) -> Iterator[Diagnostic]:
    from txcl.suggest import did_you_mean

    known = sorted(tree.by_stack)
    for m in tree.members:
        for _stage, stack, what, span in _jumps(m):
            if not tree.effective_scopes(stack):
                close = did_you_mean(stack, known)
                yield tree.diag(m, "TX233", span, f"{what} jumps to the stack {stack}, which the OPS tree does not "
                                                  "have: the request fails there (txcl_bad_goto)",
                                hint=f"did you mean {close}?" if close else f"stacks: {', '.join(known)}")


@tree_rule("TX232")
def cross_stack(tree) -> Iterator[Diagnostic]:
    for m in tree.members:
        for stage, stack, what, span in _jumps(m):
            if stack != m.stack and tree.effective_scopes(stack):
                yield tree.diag(m, "TX232", span,
                                f"{what} jumps into another stack ({stack}); _txc.stack does not change "
                                "and outstanding deferred joins resolve at the first scope there")
