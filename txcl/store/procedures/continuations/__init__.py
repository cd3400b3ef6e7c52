"""The continuation procedures, written once for every backend.

Each public method is one transaction (see :mod:`txcl.store.procedures`). Every write to a
run's records first locks the run (``tx.lock_run``), then touches suspends → units →
interactions → children → facts, markers and claims, so work on one run is serialised and the
lock order never deadlocks. Coordination is by unique keys and compare-and-swap only
(``UPDATE … WHERE status = ? AND version = ?``, ``INSERT … ON CONFLICT DO NOTHING
RETURNING``): nothing depends on process memory, so any number of processes — on one host
with SQLite, on several nodes with PostgreSQL — may share the database.

The procedures record facts and apply what they are given: a unit's options (which failures
fail it at once, how many it tolerates, when each retry is due, its heartbeat period, its
cancel URL, what its join deadline does) were resolved by the continuations layer when it
built the unit and are stored with it (``await_units.options_json``, see
:mod:`txcl.runoptions`); the errors they write come from :mod:`txcl.runtime_codes`; each
table's states and transitions are in :mod:`txcl.store.states`. Nothing here calls back into
the continuations layer. Sweeper procedures take ``skip_locked=True``: a run another node is
working on right now is left to it (the answer says ``busy``/``recorded``), and the next pass
sees it again.

Vocabulary: a *fence* proves that a segment still owns the run it writes (the origin request
while the run is ``active``, a resume by its claim token while it is ``resuming``; a failed
fence raises :class:`RunLost`). A *provider fact* says a worker's terminal was recorded for an
item, a *continuation fact* that its child outcome was materialised; a unit is complete when
it holds a continuation fact per item. The *release* is the one compare-and-swap that moves a
parked run to ``resuming`` and creates its resume claim.
"""

from __future__ import annotations

from txcl.store.procedures.continuations.admit import AdmitProcedures
from txcl.store.procedures.continuations.base import PASSED_OVER, ProcedureBase
from txcl.store.procedures.continuations.joins import JoinProcedures
from txcl.store.procedures.continuations.park import ParkProcedures
from txcl.store.procedures.continuations.queues import QueueProcedures
from txcl.store.procedures.continuations.reads import ReadProcedures
from txcl.store.procedures.continuations.release import ReleaseProcedures
from txcl.store.procedures.continuations.settle import SettleProcedures
from txcl.store.procedures.continuations.sweep import SweepProcedures


class ContinuationProcedures(ParkProcedures, AdmitProcedures, SettleProcedures, ReleaseProcedures, JoinProcedures,
                             SweepProcedures, QueueProcedures, ReadProcedures):
    """Durable runs: every procedure of the continuation store, one mixin per stage of a run's life."""


__all__ = ["ContinuationProcedures", "PASSED_OVER", "ProcedureBase"]
