"""``suspends.status``: one place a run parked (a barrier, a join, a promotion).

``open`` while the run waits there; ``resuming`` once released; ``resumed`` when the resume
moved on, ``failed`` or ``expired`` when the run ended there. An operator's retry reopens it.
"""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

SuspendStatus = Literal["open", "resuming", "resumed", "failed", "expired"]
SuspendKind = Literal["barrier", "join", "promotion"]

MACHINE = StateMachine(
    "suspends",
    states=("open", "resuming", "resumed", "failed", "expired"),
    initial=("open",),
    transitions={
        "open": frozenset({"resuming", "failed", "expired"}),
        "resuming": frozenset({"resumed", "failed", "expired"}),
        "resumed": frozenset(),
        "failed": frozenset({"open"}),
        "expired": frozenset({"open"}),
    },
    groups={"unfinished": ("open", "resuming")},
)
