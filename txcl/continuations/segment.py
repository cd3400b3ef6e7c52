"""The segment driving a run: its identity in the store and the fence it writes with.

A *segment* is one stretch of a flow's walk: the origin request, then each resume. While the
run is ``active`` the origin request owns it by its segment id; a resuming segment owns it by
its claim token. Every write to the run's records carries this :class:`Fence`; a write whose
fence no longer holds raises :class:`RunLost`, which ends the segment with ``txcl_run_lost``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from txcl.runtime_codes import RUN_LOST
from txcl.store.records import ClaimRecord, Fence, ResumeBundle, RunRecord, RunSpec
from txcl.trace.recorder import TraceRecorder

if TYPE_CHECKING:
    from txcl.runtime.state import Frame, Run


@attrs.define
class Segment:
    claim_token: str | None = None  # set while a resume drives the run
    finished_in_store: bool = False  # the run was already finished by a store procedure (a failed join)
    # When the store last saw the claim alive (epoch ms): the claim's heartbeat, then each beat.
    alive_ms: int = 0


def segment_of(run: "Run") -> Segment:
    segment = run.segment
    if segment is None:
        segment = run.segment = Segment()
    return segment


def fence_of(run: "Run") -> Fence:
    """The fence of the segment driving `run` (origin request or resume claim)."""
    return Fence(run.segment_id or run.rid, segment_of(run).claim_token)


def set_claim(run: "Run", segment_id: str, claim_token: str | None, alive_ms: int = 0) -> None:
    """`run` is now driven by the resume that holds `claim_token`, whose heartbeat the store
    recorded at `alive_ms`."""
    run.segment_id = segment_id
    segment = segment_of(run)
    segment.claim_token = claim_token
    segment.alive_ms = alive_ms


def is_resuming(run: "Run") -> bool:
    return segment_of(run).claim_token is not None


def run_spec(run: "Run", snapshot: tuple[str, bytes]) -> RunSpec | str:
    """The run to write to: its id when it exists, else what creating it needs (the ops
    snapshot frozen now)."""
    if run.run_id is not None:
        return run.run_id
    snapshot_id, body = snapshot
    return RunSpec(origin_rid=run.origin_rid or run.rid, entry_stack=run.entry_stack, src=run.src,
                   snapshot_id=snapshot_id, snapshot_body=body)


def run_state(run: "Run", frame: "Frame") -> dict:
    """What a resume needs besides the envelope: position, visits, budgets (JSON)."""
    data = run.to_json()
    data.pop("envelope", None)
    data["frame"] = {"stack": frame.stack, "scope": frame.scope, "stage": frame.stage, "visit": frame.visit}
    return data


def adopt_run(run: "Run", record: RunRecord, rec: TraceRecorder | None = None) -> None:
    """Copy the store's run identity onto the Run (and its trace) after it was created."""
    if rec is not None and rec.enabled and rec.request.get("run_id") is None:
        rec.request["run_id"] = record.run_id
    run.run_id = record.run_id
    run.rcid = record.rcid
    run.origin_rid = record.origin_rid
    run.snapshot_id = record.snapshot_id


def run_lost(run: "Run", exc: Exception) -> None:
    """A failed fence ends the segment with `txcl_run_lost` and discards its work."""
    run.fail({"error": {"code": RUN_LOST.code, "message": str(exc)}}, 503, reason=RUN_LOST.code)


def recorder_of(frame: "Frame") -> TraceRecorder:
    rec = frame.rec
    if rec is None:
        rec = frame.rec = TraceRecorder("off", "", "", "")
    return rec


async def claimed_bundle(service: Any, claim: ClaimRecord) -> ResumeBundle:
    """What the claim's segment resumes from: the bundle its release built (the run's rows as
    the release left them; nobody but the claim holder writes them after), else read from the
    store. Raises RunLost when the claim is no longer current."""
    bundle = claim.bundle
    if bundle is not None and bundle.claim.claim_token == claim.claim_token:
        return bundle
    return await service.call(service.store.claim_resume, claim.run_id, claim.claim_token)


__all__ = ["Segment", "segment_of", "fence_of", "set_claim", "is_resuming", "run_spec", "run_state", "adopt_run",
           "run_lost", "recorder_of", "claimed_bundle"]
