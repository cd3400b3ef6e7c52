"""``await_units.status``: one op's outstanding work (one call, or an itemized op's items).

``waiting`` until every item's outcome is in; then ``completed``, or ``failed``,
``timed_out`` or ``cancelled``. An operator's retry of the run sends a failed unit again.
"""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

UnitKind = Literal["unary", "itemized", "local", "sync"]
UnitStatus = Literal["waiting", "completed", "failed", "timed_out", "cancelled"]

TERMINAL: tuple[UnitStatus, ...] = ("completed", "failed", "timed_out", "cancelled")
BAD: tuple[UnitStatus, ...] = ("failed", "timed_out", "cancelled")

MACHINE = StateMachine(
    "await_units",
    states=("waiting", "completed", "failed", "timed_out", "cancelled"),
    initial=("waiting", "failed"),  # failed: the op failed at its dispatch
    transitions={
        "waiting": frozenset(TERMINAL),
        "failed": frozenset({"waiting"}),
        "timed_out": frozenset({"waiting"}),
        "cancelled": frozenset({"waiting"}),
        "completed": frozenset(),
    },
    groups={"terminal": TERMINAL, "bad": BAD},
)
