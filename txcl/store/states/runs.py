"""``runs.status``: a durable run from its request to its end.

``active`` while the request that created it walks; ``waiting`` parked at a suspend;
``resuming`` released and claimed by one resume; then ``completed``, ``failed`` or
``expired``. An operator's ``txcl runs retry`` moves a failed or expired run back to ``waiting``.
"""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

RunStatus = Literal["active", "waiting", "resuming", "completed", "failed", "expired"]

OPEN: tuple[RunStatus, ...] = ("active", "waiting", "resuming")
FINISHED: tuple[RunStatus, ...] = ("completed", "failed", "expired")

MACHINE = StateMachine(
    "runs",
    states=("active", "waiting", "resuming", "completed", "failed", "expired"),
    initial=("active", "waiting"),
    transitions={
        "active": frozenset({"waiting", "completed", "failed", "expired"}),
        "waiting": frozenset({"resuming", "failed", "expired"}),
        "resuming": frozenset({"waiting", "completed", "failed", "expired"}),
        "failed": frozenset({"waiting"}),
        "expired": frozenset({"waiting"}),
    },
    groups={"open": OPEN, "finished": FINISHED},
)
