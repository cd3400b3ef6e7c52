"""``queue_jobs.status``: one call of a ``queue://`` op in its pull queue.

``ready`` until a worker claims it; ``leased`` while the worker holds it (each heartbeat moves
the lease on); ``lapsed`` once the lease ran out without an answer (the call is then retried
under ``WITH retries``, or fails). A call sent again (a retry) is ``ready`` once more. A job
whose call closed (answered, cancelled, timed out) is deleted when a claim comes across it.
"""

from __future__ import annotations

from typing import Literal

from txcl.store.states.machine import StateMachine

QueueJobStatus = Literal["ready", "leased", "lapsed"]

MACHINE = StateMachine(
    "queue_jobs",
    states=("ready", "leased", "lapsed"),
    initial=("ready",),
    transitions={
        "ready": frozenset({"leased"}),
        "leased": frozenset({"lapsed", "ready"}),
        "lapsed": frozenset({"ready"}),
    },
)
