"""``interactions.status``: one call to a worker (one item of a unit).

``queued`` until its window opens; ``dispatching`` while it is being sent; ``dispatched`` once
the worker acknowledged it; then ``completed``, ``failed``, ``timed_out`` or ``cancelled``. A
retry (``WITH retries``, or an operator's retry of the run) queues it again.
"""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

InteractionStatus = Literal["queued", "dispatching", "dispatched", "completed", "failed", "timed_out", "cancelled"]

OPEN: tuple[InteractionStatus, ...] = ("queued", "dispatching", "dispatched")
IN_FLIGHT: tuple[InteractionStatus, ...] = ("dispatching", "dispatched")
CLOSED: tuple[InteractionStatus, ...] = ("completed", "failed", "timed_out", "cancelled")

MACHINE = StateMachine(
    "interactions",
    states=("queued", "dispatching", "dispatched", "completed", "failed", "timed_out", "cancelled"),
    initial=("queued", "dispatching", "completed", "failed"),  # completed/failed: local and sync calls
    transitions={
        "queued": frozenset({"dispatching", *CLOSED}),
        "dispatching": frozenset({"dispatched", "queued", *CLOSED}),
        "dispatched": frozenset({"queued", *CLOSED}),
        "failed": frozenset({"queued"}),
        "timed_out": frozenset({"queued"}),
        "cancelled": frozenset({"queued"}),
        "completed": frozenset(),
    },
    groups={"open": OPEN, "in_flight": IN_FLIGHT, "closed": CLOSED},
)
