"""``lmtp_deliveries.status``: one (message, recipient) delivered over LMTP.

``walking`` while a session walks it, ``done`` once its final verdict is recorded (a 4xx
verdict deletes the row instead, so that the MTA's next attempt walks again)."""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

DeliveryStatus = Literal["walking", "done"]

MACHINE = StateMachine(
    "lmtp_deliveries",
    states=("walking", "done"),
    initial=("walking",),
    transitions={"walking": frozenset({"done"})},
)
