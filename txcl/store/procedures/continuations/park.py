"""Create and park: a request's run, its snapshot, its units and their first calls, and the suspend
a segment parks at."""

from __future__ import annotations

import zlib
from typing import Sequence

from txcl.ids import hash_token, new_opc, new_rcid, new_run_id, new_token, random_base58
from txcl.store.backend import Tx
from txcl.store.blobs import pack
from txcl.store.errors import RunLost, StoreError, UnknownRun
from txcl.store.procedures import write_procedure
from txcl.store.procedures.continuations.base import ProcedureBase, _next_beat, _unit_deadline, _units_deadline
from txcl.store.procedures.rows import Row, dumps, placeholders, run_record, write_blobs
from txcl.store.records import (
    DEFAULT_ROLE,
    CreateRunResult,
    Dispatch,
    DispatchResult,
    Fence,
    JsonValue,
    ParkResult,
    RunRecord,
    RunSpec,
    UnitSpec,
    evolve,
)


class ParkProcedures(ProcedureBase):
    def _insert_run(self, t: Tx, spec: RunSpec, created_as: str, **columns: object) -> Row | None:
        """Insert the request's run (its snapshot first) with `columns` besides those every new
        run has, and its `run.created` event (the run was created `created_as`). The new row
        comes back whole: inserted by this transaction, it is already locked by it. None when
        the request's run exists already."""
        run_id = new_run_id(t.now)
        values = dict(run_id=run_id, rcid=new_rcid(), origin_rid=spec.origin_rid, entry_stack=spec.entry_stack,
                      src=spec.src, snapshot_id=spec.snapshot_id, created_ms=t.now, updated_ms=t.now, **columns)
        into = f"INSERT INTO runs ({', '.join(values)}) "
        insert = (f"{into}VALUES ({placeholders(len(values))}) ON CONFLICT (origin_rid) DO NOTHING RETURNING *",
                  tuple(values.values()))
        if spec.snapshot_body is not None and spec.snapshot_id:
            # The rules' snapshot is almost always stored already: the run goes in with the
            # check (one round trip on PostgreSQL), inserted only where the snapshot exists,
            # and only when it did not is the snapshot stored and the run inserted after it.
            # (Each statement sees what was committed when it started: a snapshot another
            # request stored in between is missed by the check but found by the insert.)
            known, created = t.read_many(
                ("SELECT 1 FROM snapshots WHERE snapshot_id = ?", (spec.snapshot_id,)),
                (f"{into}SELECT {placeholders(len(values))} WHERE EXISTS "
                 "(SELECT 1 FROM snapshots WHERE snapshot_id = ?) ON CONFLICT (origin_rid) DO NOTHING RETURNING *",
                 (*values.values(), spec.snapshot_id)))
            if not known and not created:
                self._put_snapshot(t, spec.snapshot_id, spec.snapshot_body, known=False)
                created = t.returning(*insert)
        else:
            created = t.returning(*insert)
        if not created:
            return None
        self._event(t, run_id, "run.created", "created", {"origin_rid": spec.origin_rid, "status": created_as}, seq=1)
        return created[0]

    def _create_run(self, t: Tx, spec: RunSpec, status: str, segment_id: str | None) -> tuple[Row, bool]:
        created = self._insert_run(t, spec, status, status=status, version=0, segment_id=segment_id)
        if created is not None:
            return created, True
        row = t.one("SELECT run_id FROM runs WHERE origin_rid = ?", (spec.origin_rid,))
        if row is None:  # the other request's run was purged in between
            raise UnknownRun(spec.origin_rid)
        return self._lock(t, row["run_id"]), False

    @staticmethod
    def _put_snapshot(t: Tx, snapshot_id: str, body: bytes, *, known: bool | None = None) -> bool:
        """Store the rules' snapshot unless it is there (`known`: whether the caller found it
        there in this transaction; None: look)."""
        if known is None:
            known = t.one("SELECT 1 FROM snapshots WHERE snapshot_id = ?", (snapshot_id,)) is not None
        if known:
            return False  # content-addressed: never compress a large body twice
        return bool(
            t.returning(
                "INSERT INTO snapshots (snapshot_id, created_ms, body, bytes) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING RETURNING snapshot_id",
                (snapshot_id, t.now, zlib.compress(body), len(body)),
            )
        )

    def _resolve_run(self, t: Tx, run: RunSpec | str, fence: Fence, new_status: str) -> tuple[Row, bool]:
        if isinstance(run, RunSpec):
            row, created = self._create_run(t, run, new_status, fence.segment_id)
        else:
            row, created = self._lock(t, run), False
        self._check_fence(row, fence)
        return row, created

    def _insert_units(self, t: Tx, run_id: str, seq: int, units: Sequence[UnitSpec], segment_id: str | None,
                      blobs: dict[str, str] | None = None) -> tuple[list[str], list[Dispatch], int | None, int]:
        """Insert units and interactions (the first window ``dispatching``), numbered from
        ``seq`` (the run's ``next_seq``). Returns the unit ids, the dispatches, the latest
        deadline (:func:`_units_deadline`) and the run's next ``created_seq``."""
        node = self.node_id
        own_blobs = blobs if blobs is not None else {}
        unit_ids: list[str] = []
        dispatches: list[Dispatch] = []
        max_deadline: int | None = None
        for spec in units:
            if spec.options is None:
                raise ValueError(f"unit {spec.op_name} has no resolved options (txcl.runoptions.unit_options)")
            options = spec.options
            unit_id = "au_" + random_base58()
            failed = spec.failed_error is not None
            items = [] if failed else list(spec.items)
            window = max(1, int(spec.window)) if spec.kind == "itemized" else 1
            t.send(
                "INSERT INTO await_units (unit_id, run_id, created_seq, kind, op_name, op_stack, op_scope, "
                "dispatch_stage, dispatch_stack, join_at_scope, segment_id, status, expected, window_size, "
                "on_item_error, into_path, exec_target, directives_json, input_view_json, error_json, fuel_used, "
                "budget_ms, deadline_ms, join_deadline_ms, options_json, created_ms, closed_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (unit_id, run_id, seq, spec.kind, spec.op_name, spec.op_stack, spec.op_scope,
                 spec.dispatch_stage, spec.dispatch_stack, spec.join_at_scope, segment_id,
                 "failed" if failed else "waiting", len(items), window, spec.on_item_error, spec.into,
                 spec.exec_target, dumps(spec.directives), pack(spec.input_view, own_blobs), dumps(spec.failed_error),
                 spec.fuel_used, spec.budget_ms, spec.deadline_ms,
                 t.now + spec.join_deadline_ms if spec.join_deadline_ms is not None and not failed else None,
                 dumps(options.to_json()), t.now, t.now if failed else None),
            )
            seq += 1
            unit_ids.append(unit_id)
            if not items:
                continue
            first = len(items) if spec.kind != "itemized" else min(window, len(items))
            deadline = _unit_deadline(spec, t.now)
            due = _next_beat(deadline, options.heartbeat_ms if spec.tokened else None, t.now)
            cancel_url = options.cancel_url if spec.tokened else None
            rows = []
            for i, item in enumerate(items):
                opc = new_opc()
                input_json = pack(item, own_blobs)
                if i < first:  # the first window is promoted at once
                    token = new_token() if spec.tokened else None
                    rows.append((opc, unit_id, i, run_id, hash_token(token) if token else None,
                                 "dispatching", 1, input_json, due, node, t.now, 1, t.now, cancel_url,
                                 token if cancel_url else None))
                    dispatches.append(Dispatch(
                        opc=opc, token=token, run_id=run_id, unit_id=unit_id, op_name=spec.op_name,
                        op_stack=spec.op_stack, stage=spec.dispatch_stage, exec_target=spec.exec_target,
                        directives=options.call_directives, item_index=i, item_count=len(items), kind=spec.kind,
                        input=item, deadline_ms=deadline, attempts=1))
                else:
                    rows.append((opc, unit_id, i, run_id, None, "queued", 0, input_json, None, None,
                                 None, 0, t.now, None, None))
            t.many(
                "INSERT INTO interactions (opc, unit_id, item_index, run_id, token_hash, status, version, "
                "input_json, deadline_ms, dispatch_owner, dispatch_ms, attempts, created_ms, cancel_url, "
                "cancel_token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            if deadline is not None:
                max_deadline = deadline if max_deadline is None else max(max_deadline, deadline)
        if blobs is None:  # (a caller that passes `blobs` writes them with its own documents)
            write_blobs(t, run_id, own_blobs)
        return unit_ids, dispatches, max_deadline, seq

    @staticmethod
    def _raise_expiry(t: Tx, run_id: str, deadline: int | None) -> None:
        """A run's expiry is raised by later deadlines, never lowered."""
        if deadline is not None:
            t.send("UPDATE runs SET expires_ms = ? WHERE run_id = ? AND (expires_ms IS NULL OR expires_ms < ?)",
                  (deadline, run_id, deadline))

    def _park(self, t: Tx, run: Row, fence: Fence, *, stage: str, kind: str, envelope: JsonValue,
              budgets: JsonValue, units: Sequence[UnitSpec], members: Sequence[tuple[str, str]],
              fresh: bool = False) -> tuple[int, list[str], list[Dispatch], RunRecord]:
        """Write a suspend with its member units and move the run to ``waiting``. Returns the
        visit, the new unit ids, the dispatches to send and the run as the park left it.
        `fresh`: the run was created by this transaction (it has no suspend yet: visit 1)."""
        run_id = run["run_id"]
        if run["status"] == "resuming":
            t.send(
                "UPDATE suspends SET status = 'resumed', closed_ms = ? "
                "WHERE run_id = ? AND stage = ? AND visit = ? AND status = 'resuming'",
                (t.now, run_id, run["cur_stage"], run["cur_visit"]),
            )
        visit = 1 if fresh else t.one(
            "SELECT COALESCE(MAX(visit), 0) + 1 AS v FROM suspends WHERE run_id = ? AND stage = ?", (run_id, stage))["v"]
        unit_ids, dispatches, deadline, next_seq = self._write_suspend(
            t, run_id, run["next_seq"], fence, stage=stage, visit=visit, kind=kind, envelope=envelope,
            budgets=budgets, units=units, members=members)
        if fence.claim_token is not None:
            t.send("DELETE FROM resume_claims WHERE run_id = ? AND claim_token = ?", (run_id, fence.claim_token))
        expires = run["expires_ms"] if deadline is None else max(run["expires_ms"] or 0, deadline)
        changed = t.run(
            "UPDATE runs SET status = 'waiting', cur_stage = ?, cur_visit = ?, claim_token = NULL, "
            "segment_id = NULL, version = version + 1, updated_ms = ?, next_seq = ?, expires_ms = ? "
            "WHERE run_id = ? AND version = ?",
            (stage, visit, t.now, next_seq, expires, run_id, run["version"]),
        )
        if changed != 1:  # cannot happen under the run lock; guard the CAS anyway
            raise RunLost(f"run {run_id} changed under the park")
        self._event(t, run_id, "stage.suspended", f"suspend:{stage}:{visit}",
                    {"stage": stage, "visit": visit, "kind": kind, "units": unit_ids})
        t.notify_run(run_id)
        parked = evolve(
            run_record(run, t), status="waiting", cur_stage=stage, cur_visit=visit, claim_token=None, segment_id=None,
            version=run["version"] + 1, updated_ms=t.now, next_seq=next_seq, expires_ms=expires)
        return visit, unit_ids, dispatches, parked

    def _park_new_run(self, t: Tx, spec: RunSpec, fence: Fence, *, stage: str, kind: str, envelope: JsonValue,
                      budgets: JsonValue, units: Sequence[UnitSpec], members: Sequence[tuple[str, str]]
                      ) -> tuple[list[str], list[Dispatch], RunRecord] | None:
        """A request's first park when it creates its run: the run row is inserted already
        parked (``waiting`` at visit 1, version 1), the same rows and events as creating it
        ``active`` and then parking it, in one statement fewer. None when the request's run
        exists already (another node's retry of the same request created it): the caller
        parks that one the usual way."""
        expires = _units_deadline(units, t.now)
        after = 1 + len(units)  # the run's next created_seq once its units are in
        created = self._insert_run(t, spec, "active", status="waiting", version=1, cur_stage=stage, cur_visit=1,
                                   expires_ms=expires, next_seq=after)
        if created is None:
            return None
        run_id = created["run_id"]
        unit_ids, dispatches, deadline, next_seq = self._write_suspend(
            t, run_id, 1, fence, stage=stage, visit=1, kind=kind, envelope=envelope, budgets=budgets, units=units,
            members=members)
        if (deadline, next_seq) != (expires, after):  # the run row was written from these in advance
            raise StoreError(f"run {run_id}: its units' deadline or count changed while they were written")
        self._event(t, run_id, "stage.suspended", f"suspend:{stage}:1",
                    {"stage": stage, "visit": 1, "kind": kind, "units": unit_ids}, seq=2)
        t.notify_run(run_id)
        return unit_ids, dispatches, run_record(created, t)

    def _write_suspend(self, t: Tx, run_id: str, seq: int, fence: Fence, *, stage: str, visit: int, kind: str,
                       envelope: JsonValue, budgets: JsonValue, units: Sequence[UnitSpec],
                       members: Sequence[tuple[str, str]]) -> tuple[list[str], list[Dispatch], int | None, int]:
        """The suspend row, its new units (numbered from `seq`) and their interactions, and its
        members. Returns what :meth:`_insert_units` returns."""
        blobs: dict[str, str] = {}  # big strings of the documents below, stored once (txcl.store.blobs)
        # dispatch_complete = 1 is written with the suspend: every member unit and interaction is
        # inserted by this same transaction, so no reader can see the suspend without them
        t.send(
            "INSERT INTO suspends (run_id, stage, visit, kind, status, envelope_json, budget_json, segment_id, "
            "dispatch_complete, suspended_ms) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, 1, ?)",
            (run_id, stage, visit, kind, pack(envelope, blobs), pack(budgets, blobs), fence.segment_id, t.now),
        )
        unit_ids, dispatches, deadline, next_seq = self._insert_units(t, run_id, seq, units, fence.segment_id, blobs)
        write_blobs(t, run_id, blobs)
        rows = [(run_id, stage, visit, uid, spec.role or DEFAULT_ROLE.get(spec.kind, "op"))
                for uid, spec in zip(unit_ids, units)]
        rows += [(run_id, stage, visit, uid, role) for uid, role in members]
        t.many(
            "INSERT INTO suspend_members (run_id, stage, visit, unit_id, role) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            rows,
        )
        return unit_ids, dispatches, deadline, next_seq

    @write_procedure
    def create_or_reuse_run(self, t: Tx, spec: RunSpec, *, status: str = "active",
                            fence_segment: str | None = None) -> CreateRunResult:
        """Create the request's run (or find it: one run per origin request)."""
        row, created = self._create_run(t, spec, status, fence_segment or spec.origin_rid)
        return CreateRunResult(run_record(row, t), created)

    @write_procedure
    def put_snapshot(self, t: Tx, snapshot_id: str, body: bytes) -> bool:
        return self._put_snapshot(t, snapshot_id, body)

    @write_procedure
    def dispatch_deferred(self, t: Tx, run: RunSpec | str, fence: Fence, units: Sequence[UnitSpec]) -> DispatchResult:
        """A deferred op's dispatch: create or reuse the run, insert the units (first window
        ``dispatching``), raise the run's expiry — the flow goes on without waiting."""
        row, created = self._resolve_run(t, run, fence, "active")
        unit_ids, dispatches, deadline, next_seq = self._insert_units(t, row["run_id"], row["next_seq"], units,
                                                                      fence.segment_id)
        if units:
            t.send("UPDATE runs SET next_seq = ? WHERE run_id = ?", (next_seq, row["run_id"]))
        self._raise_expiry(t, row["run_id"], deadline)
        t.fault("deferred-dispatch")
        result_run = t.one("SELECT * FROM runs WHERE run_id = ?", (row["run_id"],))
        return DispatchResult(run_record(result_run, t), created, tuple(unit_ids), tuple(dispatches))

    @write_procedure
    def park_suspend(self, t: Tx, run: RunSpec | str, fence: Fence, *, stage: str, kind: str,
                     envelope: JsonValue, budgets: JsonValue, units: Sequence[UnitSpec] = (),
                     member_unit_ids: Sequence[str] = ()) -> ParkResult:
        """Park the flow: the suspend, its units and interactions, the run ``waiting`` — all
        committed before anything is sent."""
        members = [(u, "join") for u in member_unit_ids]
        if isinstance(run, RunSpec) and fence.claim_token is None:
            new = self._park_new_run(t, run, fence, stage=stage, kind=kind, envelope=envelope, budgets=budgets,
                                     units=units, members=members)
            if new is not None:
                unit_ids, dispatches, parked = new
                t.fault("promote" if kind == "promotion" else "park")
                return ParkResult(parked, True, stage, 1, tuple(unit_ids), tuple(dispatches))
        row, created = self._resolve_run(t, run, fence, "active")
        visit, unit_ids, dispatches, parked = self._park(
            t, row, fence, stage=stage, kind=kind, envelope=envelope, budgets=budgets, units=units,
            members=members, fresh=created,
        )
        t.fault("promote" if kind == "promotion" else "park")
        return ParkResult(parked, created, stage, visit, tuple(unit_ids), tuple(dispatches))
