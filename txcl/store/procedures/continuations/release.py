"""Release and resume: the compare-and-swap that moves a parked run to ``resuming``, the resume's
claim, the end of a segment and of a run, and claim take-over."""

from __future__ import annotations

from txcl.ids import new_claim_token
from txcl.runtime_codes import resume_exhausted_error
from txcl.store.backend import Tx
from txcl.store.blobs import pack
from txcl.store.errors import RunLost, UnknownRun
from txcl.store.procedures import read_procedure, write_procedure
from txcl.store.procedures.continuations.base import _CHILD_OF_OPC, PASSED_OVER, ProcedureBase
from txcl.store.procedures.continuations.settle import FIRST_FAILED_CHILD
from txcl.store.procedures.rows import (
    UNIT_ROW,
    Row,
    claim_record,
    dumps,
    placeholders,
    run_record,
    unit_record,
    write_blobs,
)
from txcl.store.records import (
    UNIT_BAD,
    UNIT_TERMINAL,
    ClaimRecord,
    Fence,
    JsonValue,
    ReleaseResult,
    ResumeBundle,
    RunRecord,
    TakeoverResult,
    evolve,
    resume_segment_id,
)


def _waiting_units(run_id: str) -> tuple[str, tuple]:
    """The read of a run's units still waiting, each with whether it is a deferred op never
    joined (what a finishing run lets go of)."""
    return ("SELECT unit_id, (join_at_scope IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM joined_markers m WHERE m.unit_id = u.unit_id AND m.segment_id != ?)) AS unjoined "
            "FROM await_units u WHERE run_id = ? AND status = 'waiting'", (PASSED_OVER, run_id))


class ReleaseProcedures(ProcedureBase):
    def _let_go(self, t: Tx, run: Row, *, expired: bool, keep_unjoined_deferred: bool, reason: str,
                waiting: list[Row] | None = None) -> None:
        """A finished run lets go of its interactions, children, units and claims. After a
        completion, a deferred op that was never joined (or was passed over at its join
        deadline) keeps what was already sent open until its deadline (its worker may still
        answer; the answer is recorded, never merged), and what was never sent never will be.
        Every worker with a cancel URL is told the flow gave up (``reason``)."""
        run_id = run["run_id"]
        rows = t.all(*_waiting_units(run_id)) if waiting is None else waiting
        kept = [r["unit_id"] for r in rows if keep_unjoined_deferred and r["unjoined"]]
        self._close_units(t, [r["unit_id"] for r in rows if r["unit_id"] not in kept],
                          "timed_out" if expired else "cancelled", reason=reason)
        for start in range(0, len(kept), 500):
            chunk = kept[start:start + 500]
            self._owe_cancels(t, f"unit_id IN ({placeholders(len(chunk))})", tuple(chunk), reason)
            t.send(
                "UPDATE interactions SET status = 'cancelled', closed_ms = ?, version = version + 1 "
                f"WHERE unit_id IN ({placeholders(len(chunk))}) AND status = 'queued'",
                (t.now, *chunk),
            )
        if run["status"] == "resuming":  # only a resuming run holds a claim
            t.send("DELETE FROM resume_claims WHERE run_id = ?", (run_id,))

    def _release(self, t: Tx, run_id: str, segment_id: str | None = None) -> ClaimRecord | None:
        """The single compare-and-swap that releases a parked run: only when its current suspend
        is open, was written completely, and every member is terminal (or one failed — then the
        open members are cancelled with the release)."""
        # the run's current suspend and its members, read together (one round trip on PostgreSQL),
        # with everything the resume starts from (see _resume_bundle)
        runs, members = t.read_many(
            ("SELECT r.*, s.status AS s_status, s.dispatch_complete, s.resume_round, s.kind AS s_kind, "
             "s.envelope_json AS s_envelope, s.budget_json AS s_budgets, s.segment_id AS s_segment, "
             "s.suspended_ms AS s_suspended FROM runs r "
             "JOIN suspends s ON s.run_id = r.run_id AND s.stage = r.cur_stage AND s.visit = r.cur_visit "
             "WHERE r.run_id = ? AND r.status = 'waiting'", (run_id,)),
            ("SELECT u.*, m.role AS member_role FROM runs r "
             "JOIN suspend_members m ON m.run_id = r.run_id AND m.stage = r.cur_stage AND m.visit = r.cur_visit "
             "JOIN await_units u ON u.unit_id = m.unit_id WHERE r.run_id = ? ORDER BY u.op_name, u.created_seq",
             (run_id,)),
        )
        run = runs[0] if runs else None
        if run is None or run["s_status"] != "open" or not run["dispatch_complete"]:
            return None
        stage, visit = run["cur_stage"], run["cur_visit"]
        statuses = [m["status"] for m in members]
        any_bad = any(s in UNIT_BAD for s in statuses)
        if not (any_bad or all(s in UNIT_TERMINAL for s in statuses)):
            return None
        # The run's row, its current suspend and its claim are written only under the run's
        # lock, which this transaction holds since before the reads above: the three writes
        # below change exactly what those reads saw, so none waits for its answer. (A claim
        # row left behind would break that; the INSERT then fails the transaction at its next
        # wait instead of passing silently.)
        t.send("UPDATE suspends SET status = 'resuming' WHERE run_id = ? AND stage = ? AND visit = ? "
               "AND status = 'open'", (run_id, stage, visit))
        token = new_claim_token()
        segment = segment_id or resume_segment_id(run_id, stage, visit, 1, run["resume_round"] or 1)
        t.send(
            "UPDATE runs SET status = 'resuming', claim_token = ?, segment_id = ?, version = version + 1, "
            "updated_ms = ? WHERE run_id = ? AND status = 'waiting' AND version = ?",
            (token, segment, t.now, run_id, run["version"]),
        )
        t.send(
            "INSERT INTO resume_claims (run_id, stage, visit, claim_token, owner, segment_id, attempt, claimed_ms, "
            "heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (run_id, stage, visit, token, self.node_id, segment, t.now, t.now),
        )
        joins = [m["unit_id"] for m in members if m["member_role"] == "join"]
        t.many(
            "INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [(u, run_id, segment, t.now) for u in joins],
        )
        if any_bad:  # fail-fast: the remaining open members are cancelled with the release
            self._close_units(t, [m["unit_id"] for m in members if m["status"] == "waiting"], "cancelled",
                              reason="sibling_failed")
        self._event(t, run_id, "run.released", f"release:{stage}:{visit}", {"stage": stage, "visit": visit,
                                                                          "fail_fast": any_bad})
        t.notify_run(run_id)
        t.fault("release")
        claim = ClaimRecord(run_id=run_id, stage=stage, visit=visit, claim_token=token, owner=self.node_id,
                            segment_id=segment, attempt=1, claimed_ms=t.now, heartbeat_ms=t.now)
        # fail-fast closed members above: their rows as read are no longer what the resume needs
        return claim if any_bad else evolve(claim, bundle=self._resume_bundle(t, run, members, claim))

    def _resume_bundle(self, t: Tx, run: Row, members: list[Row], claim: ClaimRecord) -> ResumeBundle:
        """What the released run's resume starts from, as `claim_resume` would read it once the
        release commits — built from the rows the release read under the run's lock and the
        writes it made (the claim holder is then the only writer of the run), so a resume in
        this process reads nothing more."""
        record = evolve(run_record(run, t), status="resuming", claim_token=claim.claim_token,
                        segment_id=claim.segment_id, version=run["version"] + 1, updated_ms=t.now)
        suspend = self._suspend_of(t, {
            "run_id": claim.run_id, "stage": claim.stage, "visit": claim.visit, "kind": run["s_kind"],
            "status": "resuming", "envelope_json": run["s_envelope"], "budget_json": run["s_budgets"],
            "segment_id": run["s_segment"], "dispatch_complete": 1, "suspended_ms": run["s_suspended"],
            "closed_ms": None,
        }, tuple((m["unit_id"], m["member_role"]) for m in sorted(members, key=lambda m: m["created_seq"])))
        return ResumeBundle(record, suspend, claim, tuple(unit_record(m, t) for m in members))

    def _current_members(self, t: Tx, run: Row) -> list[str]:
        return [m["unit_id"] for m in t.all(
            "SELECT unit_id FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ?",
            (run["run_id"], run["cur_stage"], run["cur_visit"]))]

    @write_procedure
    def continue_release(self, t: Tx, opc: str, *, child_version: int | None = None) -> ReleaseResult:
        """After an admitted terminal committed: materialise the item's child, record its
        continuation fact, settle the unit and try the release."""
        failed_index = t.backend.dialect.using_index("item_children_failed")
        run, (its, units, children, failed) = t.lock_run_of_reading(
            "interactions", "opc", opc,
            ("SELECT * FROM interactions WHERE opc = ?", (opc,)),
            (f"{UNIT_ROW} WHERE unit_id = (SELECT unit_id FROM interactions WHERE opc = ?)", (opc,)),
            (_CHILD_OF_OPC, (opc,)),
            (FIRST_FAILED_CHILD.format(index=failed_index, unit="(SELECT unit_id FROM interactions WHERE opc = ?)"),
             (opc,)))
        if run is None:
            return ReleaseResult("recorded")
        run_id = run["run_id"]
        it, unit = its[0], units[0]
        child = children[0] if children else None
        status = self._materialize_child(t, unit, opc, child_version, it, child)
        unit = self._record_continuation_fact(t, unit, it["item_index"], status,
                                              bool(child["continuation_fact"]) if child is not None else None)
        # the failed child read above still is the first, unless this item's child just failed
        unit_status = self._settle_unit(t, it["unit_id"], unit=unit,
                                        **({} if status == "failed" else {"first_failed": failed[0] if failed else None}))
        # a unit still waiting keeps its suspend parked: only a member's end can release it
        # (and each member's end tries), so the check is skipped for every item but the last
        claim = self._release(t, run_id) if unit_status != "waiting" else None
        return ReleaseResult("resumed" if claim else "recorded", run_id, unit_status, claim,
                             materialized="materialize" in t.fired)

    @write_procedure
    def try_release(self, t: Tx, run_id: str, *, reconcile: bool = False,
                    segment_id: str | None = None) -> ReleaseResult:
        """The drain and the sweeper's release check: settle each member of the run's current
        suspend from its stored facts and children, and release the run if that makes it
        releasable.

        Children are *not* materialised here: a completion admitted whose materialisation is
        still on its way keeps its own release (it answers ``resumed``); one whose never comes
        is materialised by the sweeper's stuck-children pass after ``--reconcile-after``.

        ``reconcile=True`` (the sweeper) skips a run another node holds and records a
        ``reconcile.release`` event when it wins: a parked run nobody released is a repair.
        ``segment_id`` names the segment that will hold the claim when it is not a background
        resume — a request that drains its own suspend continues inline as ``<rid>/v<visit>``."""
        run = t.lock_run(run_id, skip_locked=reconcile)
        if run is None or run["status"] != "waiting":
            return ReleaseResult("recorded", run_id)
        for unit_id in self._current_members(t, run):
            self._settle_unit(t, unit_id)
        claim = self._release(t, run_id, segment_id)
        if claim is not None and reconcile:
            self._event(t, run_id, "reconcile.release", f"reconcile.release:{claim.stage}:{claim.visit}",
                        {"run_id": run_id})
        return ReleaseResult("resumed" if claim else "recorded", run_id, None, claim)

    @write_procedure
    def settle_and_release(self, t: Tx, unit_id: str, *, skip_locked: bool = True) -> ReleaseResult:
        """Reconciliation of one unit from stored records only: repair missing continuation
        facts of settled children, settle, release. Children still ``queued`` are left to the
        stuck-children pass (claimed with a lease, then materialised), so a live completion on
        its way is never overtaken."""
        run = t.lock_run_of("await_units", "unit_id", unit_id, skip_locked=skip_locked)
        if run is None:
            return ReleaseResult("recorded")
        run_id = run["run_id"]
        unit = t.one(f"{UNIT_ROW} WHERE unit_id = ?", (unit_id,))
        before = unit["continuation_done"]
        status = self._settle_unit(t, unit_id, reconcile=True)
        claim = self._release(t, run_id)
        if claim is not None:
            self._event(t, run_id, "reconcile.release", f"reconcile.release:{claim.stage}:{claim.visit}",
                        {"unit_id": unit_id})
        elif status != unit["status"] or t.one("SELECT continuation_done FROM await_units WHERE unit_id = ?",
                                                (unit_id,))["continuation_done"] != before:
            self._event(t, run_id, "reconcile.settle", f"reconcile.settle:{unit_id}:{status}",
                        {"unit_id": unit_id, "status": status})
        return ReleaseResult("resumed" if claim else "recorded", run_id, status, claim)

    @read_procedure
    def claim_resume(self, t: Tx, run_id: str, claim_token: str) -> ResumeBundle:
        """Load a released suspend for the claim holder. A read: the release (or takeover) that
        created the claim stamped its heartbeat; while the claim is current only its holder
        writes the run, and every later write of the segment is fenced."""
        # Four reads sent together (one round trip on PostgreSQL): the suspend and its members
        # are those of the stage and visit the run row names as it is read by each of them.
        runs, claims, rows, suspends = t.read_many(
            ("SELECT * FROM runs WHERE run_id = ?", (run_id,)),
            ("SELECT * FROM resume_claims WHERE run_id = ? AND claim_token = ?", (run_id, claim_token)),
            ("SELECT u.*, m.role AS member_role FROM runs r "
             "JOIN suspend_members m ON m.run_id = r.run_id AND m.stage = r.cur_stage AND m.visit = r.cur_visit "
             "JOIN await_units u ON u.unit_id = m.unit_id "
             "WHERE r.run_id = ? ORDER BY u.op_name, u.created_seq", (run_id,)),
            ("SELECT s.* FROM runs r JOIN suspends s "
             "ON s.run_id = r.run_id AND s.stage = r.cur_stage AND s.visit = r.cur_visit WHERE r.run_id = ?", (run_id,)),
        )
        if not runs:
            raise UnknownRun(run_id)
        run = runs[0]
        if run["status"] != "resuming" or run["claim_token"] != claim_token or not claims:
            raise RunLost(f"claim on run {run_id} is not current")
        members = tuple((r["unit_id"], r["member_role"]) for r in sorted(rows, key=lambda r: r["created_seq"]))
        susp = self._suspend_of(t, suspends[0], members) if suspends else None
        if susp is not None and (susp.stage, susp.visit) != (run["cur_stage"], run["cur_visit"]):
            # the run moved between the reads: whoever moved it holds it now
            raise RunLost(f"claim on run {run_id} is not current")
        return ResumeBundle(run_record(run, t), susp, claim_record(claims[0]), tuple(unit_record(r, t) for r in rows))

    @write_procedure
    def finish_segment(self, t: Tx, run_id: str, fence: Fence, *, status: str, result: JsonValue = None,
                       error: JsonValue = None, fail_reason: str | None = None) -> RunRecord:
        """The run ends (``completed`` or ``failed``) with the segment that owns it."""
        if status not in ("completed", "failed"):
            raise ValueError("finish status must be completed or failed")
        # the run's units still waiting are read with the lock (one round trip on PostgreSQL)
        run, (waiting,) = t.lock_run_reading(run_id, _waiting_units(run_id))
        if run is None:
            raise UnknownRun(run_id)
        self._check_fence(run, fence)
        self._finish(t, run, status=status, result=result, error=error, fail_reason=fail_reason, waiting=waiting)
        t.fault("finish")
        return evolve(
            run_record(run, t), status=status, result=result, error=error, fail_reason=fail_reason, finished_ms=t.now,
            updated_ms=t.now, claim_token=None, segment_id=None, version=run["version"] + 1)

    def _finish(self, t: Tx, run: Row, *, status: str, result: JsonValue, error: JsonValue,
                fail_reason: str | None, waiting: list[Row] | None = None) -> None:
        """End the run. `run`: its row, read with the lock this transaction holds and not
        written since (its version is the compare-and-swap's); `waiting`: its units still
        waiting, when read with that lock too (else they are read here)."""
        run_id = run["run_id"]
        if run["status"] == "resuming":
            t.send(
                "UPDATE suspends SET status = ?, closed_ms = ? WHERE run_id = ? AND stage = ? AND visit = ? "
                "AND status = 'resuming'",
                ("resumed" if status == "completed" else "failed", t.now, run_id, run["cur_stage"], run["cur_visit"]),
            )
        blobs: dict[str, str] = {}
        # the row was read under the lock: the compare-and-swap changes it, without waiting
        t.send(
            "UPDATE runs SET status = ?, result_json = ?, error_json = ?, fail_reason = ?, finished_ms = ?, "
            "updated_ms = ?, claim_token = NULL, segment_id = NULL, version = version + 1 "
            "WHERE run_id = ? AND version = ?",
            (status, pack(result, blobs), dumps(error), fail_reason, t.now, t.now, run_id, run["version"]),
        )
        write_blobs(t, run_id, blobs)
        self._let_go(t, run, expired=False, keep_unjoined_deferred=(status == "completed"),
                     reason=fail_reason or ("run_finished" if status == "completed" else "run_failed"),
                     waiting=waiting)
        self._event(t, run_id, f"run.{status}", f"finish:{status}", {"fail_reason": fail_reason})
        t.notify_run(run_id)

    @write_procedure
    def take_over_claim(self, t: Tx, run_id: str, *, stale_after_ms: int, max_attempts: int,
                        owner: str | None = None, skip_locked: bool = True) -> TakeoverResult:
        """A resume claim whose heartbeat is older than ``stale_after_ms`` goes to a new owner
        (attempt + 1, a new segment id); after ``max_attempts`` the run fails instead."""
        run = t.lock_run(run_id, skip_locked=skip_locked)
        if run is None or run["status"] != "resuming":
            return TakeoverResult("gone")
        claim = t.one("SELECT * FROM resume_claims WHERE run_id = ? AND claim_token = ?",
                      (run_id, run["claim_token"]))
        if claim is None:
            return TakeoverResult("gone")
        if t.now - claim["heartbeat_ms"] <= stale_after_ms:
            return TakeoverResult("not_stale", claim_record(claim))
        stage, visit, old_segment = claim["stage"], claim["visit"], claim["segment_id"]
        if claim["attempt"] >= max_attempts:
            error = resume_exhausted_error(claim["attempt"])
            self._finish(t, run, status="failed", result=None, error=error, fail_reason="resumer-stale")
            return TakeoverResult("failed")
        attempt = claim["attempt"] + 1
        token = new_claim_token()
        resume_round = t.one("SELECT resume_round FROM suspends WHERE run_id = ? AND stage = ? AND visit = ?",
                             (run_id, stage, visit))
        segment = resume_segment_id(run_id, stage, visit, attempt, resume_round["resume_round"] if resume_round else 1)
        node = owner or self.node_id
        t.send(
            "UPDATE resume_claims SET claim_token = ?, owner = ?, segment_id = ?, attempt = ?, claimed_ms = ?, "
            "heartbeat_ms = ? WHERE run_id = ? AND stage = ? AND visit = ? AND claim_token = ?",
            (token, node, segment, attempt, t.now, t.now, run_id, stage, visit, claim["claim_token"]),
        )
        t.send("UPDATE runs SET claim_token = ?, segment_id = ?, version = version + 1, updated_ms = ? "
              "WHERE run_id = ? AND version = ?", (token, segment, t.now, run_id, run["version"]))
        dead_units = [r["unit_id"] for r in t.all(
            "SELECT unit_id FROM await_units WHERE run_id = ? AND segment_id = ? AND status = 'waiting'",
            (run_id, old_segment))]
        self._close_units(t, dead_units, "cancelled", reason="resume_lost")
        t.send("DELETE FROM joined_markers WHERE run_id = ? AND segment_id = ?", (run_id, old_segment))
        joins = [r["unit_id"] for r in t.all(
            "SELECT unit_id FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ? AND role = 'join'",
            (run_id, stage, visit))]
        t.many(
            "INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING", [(u, run_id, segment, t.now) for u in joins])
        self._event(t, run_id, "claim.takeover", f"takeover:{stage}:{visit}:{attempt}",
                    {"attempt": attempt, "owner": node, "previous_owner": claim["owner"]})
        return TakeoverResult("taken", ClaimRecord(run_id, stage, visit, token, node, segment, attempt, t.now, t.now))

    @write_procedure
    def heartbeat(self, t: Tx, run_id: str, claim_token: str) -> None:
        """The claim holder is alive. One compare-and-swap on the claim row (a takeover that
        replaced the token makes it match nothing)."""
        changed = t.run(
            "UPDATE resume_claims SET heartbeat_ms = ? WHERE run_id = ? AND claim_token = ? AND EXISTS "
            "(SELECT 1 FROM runs r WHERE r.run_id = ? AND r.status = 'resuming' AND r.claim_token = ?)",
            (t.now, run_id, claim_token, run_id, claim_token),
        )
        if changed != 1:
            raise RunLost(f"claim on run {run_id} is not current")
