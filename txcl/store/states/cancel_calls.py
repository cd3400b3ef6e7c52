"""``cancel_calls.status``: a cancellation owed to a worker (its ``cancel_url``).

``pending`` until ``delivered``, or ``abandoned`` after its last attempt."""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

CancelStatus = Literal["pending", "delivered", "abandoned"]

MACHINE = StateMachine(
    "cancel_calls",
    states=("pending", "delivered", "abandoned"),
    initial=("pending",),
    transitions={
        "pending": frozenset({"delivered", "abandoned"}),
    },
)
