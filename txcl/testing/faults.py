"""Fault injection for crash tests.

With ``TXCL_TESTING=1``, ``TXCL_FAULT=<point>[:<n>][:<action>]`` makes the process act right
after the n-th commit (default 1) at the named point. Points: ``park``, ``deferred-dispatch``,
``promote``, ``ack``, ``admit``, ``materialize``, ``release``, ``resume-frame``, ``finish``.
Actions: ``kill`` (default: SIGKILL to itself, the crash the spec's tests need), ``exit``
(``os._exit(137)``) and ``raise`` (raise :class:`FaultInjected`, for in-process tests).
Several faults may be given separated by commas. Without ``TXCL_TESTING=1`` the switch is
inert: production processes never read ``TXCL_FAULT``.

Callers invoke :func:`fault_point` immediately after the commit of the named point.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass

POINTS = frozenset(
    {"park", "deferred-dispatch", "promote", "ack", "admit", "materialize", "release", "resume-frame", "finish"}
)
ACTIONS = frozenset({"kill", "exit", "raise"})


class FaultInjected(RuntimeError):
    """Raised by a fault point whose action is ``raise``."""


@dataclass(frozen=True)
class Fault:
    point: str
    nth: int
    action: str


_lock = threading.Lock()
_counts: dict[str, int] = {}
_cache: tuple[str | None, str | None, tuple[Fault, ...]] | None = None


def parse_faults(spec: str) -> tuple[Fault, ...]:
    """Parse ``TXCL_FAULT``; unknown points or actions raise ValueError (a test bug)."""
    faults = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        fields = part.split(":")
        point = fields[0]
        if point not in POINTS:
            raise ValueError(f"TXCL_FAULT: unknown fault point {point!r}")
        nth, action = 1, "kill"
        for extra in fields[1:]:
            if extra.isdigit():
                nth = int(extra)
            elif extra in ACTIONS:
                action = extra
            else:
                raise ValueError(f"TXCL_FAULT: bad field {extra!r} in {part!r}")
        if nth < 1:
            raise ValueError("TXCL_FAULT: n must be >= 1")
        faults.append(Fault(point, nth, action))
    return tuple(faults)


def _active_faults() -> tuple[Fault, ...]:
    """The faults of ``TXCL_FAULT`` (read again at every call: tests change it in process)."""
    global _cache
    testing = os.environ.get("TXCL_TESTING")
    if testing != "1":
        return ()  # TXCL_FAULT is not even read
    spec = os.environ.get("TXCL_FAULT")
    if _cache is None or _cache[0] != testing or _cache[1] != spec:
        faults = parse_faults(spec) if spec else ()
        _cache = (testing, spec, faults)
    return _cache[2]


def enabled() -> bool:
    return bool(_active_faults())


def reset() -> None:
    """Forget the per-process commit counts (tests that reuse one process)."""
    with _lock:
        _counts.clear()


def fault_point(name: str) -> None:
    """Mark one commit at ``name``; act if TXCL_FAULT selects this occurrence."""
    faults = _active_faults()
    if not faults:
        return
    if name not in POINTS:
        raise ValueError(f"unknown fault point {name!r}")
    with _lock:
        count = _counts.get(name, 0) + 1
        _counts[name] = count
    for fault in faults:
        if fault.point == name and fault.nth == count:
            if fault.action == "raise":
                raise FaultInjected(f"fault injected at {name} (commit {count})")
            if fault.action == "exit":
                os._exit(137)
            os.kill(os.getpid(), signal.SIGKILL)
