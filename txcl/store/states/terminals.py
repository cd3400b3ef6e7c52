"""``terminals.status``: a worker's final answer for one call, written once and never changed.
A ``completed`` answer's payload becomes the item's output, a ``failed`` one's its error."""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

TerminalStatus = Literal["completed", "failed"]
TerminalSource = Literal["callback", "ack", "local", "sync", "cli"]

# what an item's child becomes from its terminal
CHILD_OUTCOME = {"completed": "succeeded", "failed": "failed"}

MACHINE = StateMachine(
    "terminals",
    states=("completed", "failed"),
    initial=("completed", "failed"),
    transitions={},
)
