"""Fuel and TTL: counters, charges, the repeated-transition penalty and the
exhaustion payloads. Pure state; the walk decides when to charge."""

from __future__ import annotations

from typing import Any

import attrs

from txcl import runtime_codes as rc

FRAME_FUEL = 10
DISPATCH_FUEL = 25
REPEAT_FUEL = 50

FUEL_EXHAUSTED = "txco_fuel_exhausted"
TTL_EXHAUSTED = rc.SCOPE_TTL_EXHAUSTED.code


@attrs.define(slots=False)
class Budget:
    """Live budget state of a run; JSON-serialisable with `to_json`/`from_json`."""

    max_fuel: int = 100_000  # 0 = meter only
    max_ttl: int = 500  # starting TTL; 0 = TTL off
    ttl: int = 500
    fuel_used: int = 0
    seen: list[str] = attrs.field(factory=list)  # "from->to" transitions, in first-seen order
    transitions: list[str] = attrs.field(factory=list)  # every transition taken (last few kept)
    _index: set[str] = attrs.field(factory=set, init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._index = set(self.seen)

    @classmethod
    def fresh(cls, max_fuel: int, max_ttl: int) -> "Budget":
        return cls(max_fuel=max_fuel, max_ttl=max_ttl, ttl=max_ttl)

    # ------------------------------------------------------------ charges
    def enter_frame(self, previous_stage: str | None, stage: str, only_new: bool = False) -> bool | None:
        """Charge a frame entry; returns True when the transition was seen before (penalty).
        `only_new`: charge nothing and return None when it was."""
        repeated = False
        transition = None
        if previous_stage is not None:
            transition = f"{previous_stage}->{stage}"
            repeated = transition in self._index
            if repeated and only_new:
                return None
        self.fuel_used += FRAME_FUEL
        if self.max_ttl:
            self.ttl -= 1
        if transition is not None:
            if repeated:
                self.fuel_used += REPEAT_FUEL
            else:
                self.seen.append(transition)
                self._index.add(transition)
            transitions = self.transitions
            transitions.append(transition)
            if len(transitions) > 3:
                del transitions[0]
        return repeated

    def charge(self, fuel: int) -> None:
        self.fuel_used += fuel

    def fuel_exhausted(self) -> bool:
        return self.max_fuel > 0 and self.fuel_used > self.max_fuel

    def ttl_exhausted(self) -> bool:
        return self.max_ttl > 0 and self.ttl <= 0

    def lower_ttl(self, value: Any) -> str:
        """EMIT @ttl: 'lowered', 'ignored' (raise or equal) or 'invalid'."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "invalid"
        if value != value:  # NaN
            return "invalid"
        n = int(value // 1) if isinstance(value, float) else value
        if not self.max_ttl:
            return "ignored"
        if n < self.ttl:
            self.ttl = max(n, 0)
            return "lowered"
        return "ignored"

    # ------------------------------------------------------------ payloads
    def exhaustion_payload(self, last_stage: str) -> dict[str, Any] | None:
        """The error payload when a budget is exhausted (TTL checked first), else None."""
        if self.ttl_exhausted():
            return {"code": TTL_EXHAUSTED, "max_ttl": self.max_ttl, "consumed": self.max_ttl,
                    "last_stage": last_stage, "last_transitions": list(self.transitions[-3:])}
        if self.fuel_exhausted():
            return {"code": FUEL_EXHAUSTED, "max_fuel": self.max_fuel, "fuel_used": self.fuel_used,
                    "last_stage": last_stage, "last_transitions": list(self.transitions[-3:])}
        return None

    # ------------------------------------------------------------ persistence
    def write_into(self, envelope: dict[str, Any]) -> None:
        """Write the counters into `_txc` (before transitions, suspends and the end)."""
        txc = envelope.get("_txc")
        if not isinstance(txc, dict):
            txc = {}
            envelope["_txc"] = txc
        txc["ttl"] = self.ttl
        txc["fuel_used"] = self.fuel_used
        seen = txc.get("_seen")
        if type(seen) is not list or len(seen) != len(self.seen):
            txc["_seen"] = list(self.seen)

    def to_json(self) -> dict[str, Any]:
        return {"max_fuel": self.max_fuel, "max_ttl": self.max_ttl, "ttl": self.ttl,
                "fuel_used": self.fuel_used, "seen": list(self.seen), "transitions": list(self.transitions)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Budget":
        return cls(max_fuel=int(data["max_fuel"]), max_ttl=int(data["max_ttl"]), ttl=int(data["ttl"]),
                   fuel_used=int(data["fuel_used"]), seen=list(data.get("seen", [])),
                   transitions=list(data.get("transitions", [])))


BUDGET_FIELDS = ("ttl", "fuel_used", "_seen")


def strip_budget_fields(envelope: dict[str, Any]) -> None:
    """Remove `_txc.ttl`, `_txc.fuel_used`, `_txc._seen` (never shown in responses)."""
    txc = envelope.get("_txc")
    if isinstance(txc, dict):
        for key in BUDGET_FIELDS:
            txc.pop(key, None)
