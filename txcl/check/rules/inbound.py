"""Events that are not web requests: cron ticks, scheduled events, mail.

- TX244 unknown-event-field: a read of `@cron.<field>`, `@scheduled.<field>` or
  `@lmtp.<field>` (`@lmtp.msg.<field>`) that the event never holds;
- TX245 schedule-missing-key / TX246 schedule-bad-time: a `txco://schedule` call without its
  idempotency key, or without a usable `schedule_at`;
- TX247 schedule-without-receiver: events are scheduled, but no `_scheduled` stack receives them;
- TX248 misspelled-inlet-stack: a stack named almost like an inlet stack, which receives nothing.
"""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule, literal_with, read_paths, tree_rule, with_map
from txcl.errors import Diagnostic

SCHEDULE = "txco://schedule"


def _unknown(field: str, known: dict[str, str], shown: str) -> tuple[str, str]:
    from txcl.suggest import did_you_mean

    close = did_you_mean(field, list(known))
    hint = f"did you mean {shown}.{close}?" if close else f"the fields are {', '.join(known)}"
    return f"{shown}.{field} is not a field of the event; the read is always missing", hint


@file_rule("TX244")
def unknown_event_field(ctx: FileContext) -> Iterator[Diagnostic]:
    from txcl.vocabulary import EVENT_FIELDS, LMTP_MSG_FIELDS

    for path in read_paths(ctx.rule):
        segments = tuple(path.segments)
        if len(segments) < 3 or segments[0] != "_txc" or segments[1] not in EVENT_FIELDS:
            continue
        inlet, field = segments[1], segments[2]
        known = EVENT_FIELDS[inlet]
        if field not in known:
            message, hint = _unknown(field, known, f"@{inlet}")
            yield ctx.diag("TX244", path.span, message, hint=hint)
        elif inlet == "lmtp" and field == "msg" and len(segments) > 3 and segments[3] not in LMTP_MSG_FIELDS:
            message, hint = _unknown(segments[3], LMTP_MSG_FIELDS, "@lmtp.msg")
            yield ctx.diag("TX244", path.span, message, hint=hint)


@file_rule("TX245", "TX246")
def schedule_call(ctx: FileContext) -> Iterator[Diagnostic]:
    from txcl.scheduling import ScheduleError, parse_schedule_at

    rule = ctx.rule
    if rule.exec is None or rule.exec.target != SCHEDULE:
        return
    pairs = with_map(rule)
    if "idempotency_key" not in pairs:
        yield ctx.diag("TX245", rule.exec.span, 'EXEC "txco://schedule" has no WITH idempotency_key: every call '
                                                "fails", hint='add WITH idempotency_key = "<a name for the event>"')
    cancel, _ = literal_with(rule, "cancel")
    if cancel is True:
        return
    at, pair = literal_with(rule, "schedule_at")
    if pair is None:
        yield ctx.diag("TX246", rule.exec.span, 'EXEC "txco://schedule" has no WITH schedule_at: every call fails',
                       hint='add WITH schedule_at = "2026-06-30T08:00:00Z" (RFC 3339), or cancel = true')
    elif at is not None:
        try:
            parse_schedule_at(at)
        except ScheduleError as exc:
            yield ctx.diag("TX246", pair.value.span, str(exc), hint='write it like "2026-06-30T08:00:00Z"')


@tree_rule("TX247")
def schedule_without_receiver(tree) -> Iterator[Diagnostic]:
    from txcl.scheduling import JOB

    if tree.effective_scopes(JOB):
        return
    for m in tree.members:
        if m.facts["exec"] == SCHEDULE:
            yield tree.diag(m, "TX247", m.facts["exec_span"],
                            f"this rule schedules events, but the OPS tree has no {JOB} stack to receive them: "
                            "they stay pending", hint=f"add OPS/{JOB}/<scope>/<rule>.txcl")


@tree_rule("TX248")
def misspelled_inlet_stack(tree) -> Iterator[Diagnostic]:
    from txcl.ops.layout import INLET_STACKS
    from txcl.suggest import did_you_mean

    for stack in sorted(tree.by_stack):
        if "/" in stack or not stack.startswith("_") or stack in INLET_STACKS:
            continue
        close = did_you_mean(stack, list(INLET_STACKS))
        if close is None:
            continue
        scopes = tree.by_stack[stack]
        member = scopes[min(scopes)][0]
        yield tree.diag(member, "TX248", None,
                        f"the stack {stack} is named almost like the inlet stack {close}, but nothing "
                        "sends it events", hint=f"rename OPS/{stack} to OPS/{close}")
