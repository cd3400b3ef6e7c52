"""``scheduled_events.status``: an event placed with ``txco://schedule``.

``pending`` until a node ``claimed`` it to fire it, then ``fired`` (or ``failed``: the walk
raised); a pending event can be ``cancelled``, and a cancelled key scheduled again (``pending``).
A claim whose node stopped is taken over by another node: the row stays ``claimed``."""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

EventStatus = Literal["pending", "claimed", "fired", "failed", "cancelled"]

MACHINE = StateMachine(
    "scheduled_events",
    states=("pending", "claimed", "fired", "failed", "cancelled"),
    initial=("pending",),
    transitions={
        "pending": frozenset({"claimed", "cancelled"}),
        "claimed": frozenset({"fired", "failed"}),
        "cancelled": frozenset({"pending"}),
    },
    groups={"open": ("pending", "claimed"), "terminal": ("fired", "failed", "cancelled")},
)
