"""``item_children.status``: an item's child outcome (what the join merges).

``queued`` until its terminal is materialised (``running`` while a repair holds its lease);
then ``succeeded``, ``failed`` or ``cancelled``. An operator's retry queues it again.
"""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

ChildStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]

PENDING: tuple[ChildStatus, ...] = ("queued", "running")

MACHINE = StateMachine(
    "item_children",
    states=("queued", "running", "succeeded", "failed", "cancelled"),
    initial=("queued", "failed"),  # failed: an item whose call failed at its dispatch
    transitions={
        "queued": frozenset({"running", "succeeded", "failed", "cancelled"}),
        "running": frozenset({"queued", "succeeded", "failed", "cancelled"}),
        "failed": frozenset({"queued"}),
        "cancelled": frozenset({"queued"}),
        "succeeded": frozenset(),
    },
    groups={"pending": PENDING},
)
