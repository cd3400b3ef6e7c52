"""Pure path rules of the OPS tree: numbered directories, stacks,
scopes, op names, system stacks and overlay lineage. No file system access here."""

from __future__ import annotations

import re

NUMBERED_RE = re.compile(r"^([0-9]+)([ _-].*)?$", re.DOTALL)
NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_SCOPE = 999_999_999
MAX_STACK_LEN = 128
MAX_NAME_LEN = 64


def numbered_value(segment: str) -> int | None:
    """The scope number of a numbered directory segment, or None when it is not numbered."""
    match = NUMBERED_RE.match(segment)
    if match is None:
        return None
    return int(match.group(1))


#: stacks that receive events of another inlet, never a web request by default: clock ticks,
#: scheduled events, and mail no other stack takes
INLET_STACKS: tuple[str, ...] = ("_cron", "_scheduled", "_mail")


def is_inlet_stack(stack: str) -> bool:
    return stack in INLET_STACKS


def is_system_stack(stack: str) -> bool:
    """`_sys/health` is a system stack; a one-segment `_jobs` is not."""
    parts = stack.split("/")
    return len(parts) >= 2 and parts[0].startswith("_")


def lineage(stack: str) -> list[str]:
    """The stack, then its parents, never climbing from a `_`-prefixed last segment."""
    out = [stack]
    if is_system_stack(stack):
        return out
    parts = stack.split("/")
    while len(parts) > 1 and not parts[-1].startswith("_"):
        parts = parts[:-1]
        out.append("/".join(parts))
    return out


def stage(stack: str, scope: int) -> str:
    return f"{stack}/{scope}"


def stage_name_problems(stack_segments: list[str], name: str, scope_text: str) -> list[str]:
    """TX123 messages for a bad stack segment, op name or scope (empty list when fine)."""
    problems: list[str] = []
    for seg in stack_segments:
        if not NAME_RE.match(seg):
            problems.append(f'stack segment "{seg}" may only contain letters, digits, "_" and "-"')
    stack = "/".join(stack_segments)
    if len(stack) > MAX_STACK_LEN:
        problems.append(f'stack "{stack}" is longer than {MAX_STACK_LEN} characters')
    if not NAME_RE.match(name):
        problems.append(f'op name "{name}" may only contain letters, digits, "_" and "-"')
    elif len(name) > MAX_NAME_LEN:
        problems.append(f'op name "{name}" is longer than {MAX_NAME_LEN} characters')
    digits = NUMBERED_RE.match(scope_text)
    if digits is not None and int(digits.group(1)) > MAX_SCOPE:
        problems.append(f'scope "{scope_text}" is above {MAX_SCOPE}')
    return problems
