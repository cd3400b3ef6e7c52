"""Stage-jump EXEC targets: a trusted `{"_txc": {"goto": …}}` output."""

from __future__ import annotations

from txcl.syntax.targets import ExecTarget


def jump_output(target: ExecTarget, current_stack: str) -> dict:
    stack = target.stack if target.stack is not None else current_stack
    return {"_txc": {"goto": f"{stack}/{target.scope}"}}
