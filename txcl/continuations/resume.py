"""Resuming a released run.

After the release (one compare-and-swap) the winner holds the resume claim. :func:`resume_run`
loads the suspend (envelope, budgets, position) and its member units, rebuilds the walk over
the run's frozen ops snapshot and drives it as a new segment whose trace id is
``resume-<run>-<stage>-v<visit>`` (``-a<n>`` after a takeover). Every frame entry of a resumed
segment heartbeats its claim, and so does a thread while the segment runs; a failed fence ends
the segment with ``txcl_run_lost``.

Each suspend kind has its resumer: ``barrier`` and ``promotion`` merge their members' stored
outcomes into the scope (its ops already ran) and finish the scope; ``join`` merges the joined
results and then runs the join scope's own ops.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from txcl.continuations.apply import apply_members
from txcl.continuations.deferred import resume_join
from txcl.continuations.segment import claimed_bundle, run_lost, segment_of, set_claim
from txcl.logs import bind
from txcl.runtime.state import Frame, Run
from txcl.runtime_codes import RESUME_FAILED, RUN_LOST
from txcl.store.errors import RunLost, StoreUnavailable
from txcl.store.records import ClaimRecord, Fence, ResumeBundle
from txcl.testing.faults import fault_point
from txcl.trace.recorder import TraceRecorder
from txcl.values.merge import deep_copy

if TYPE_CHECKING:
    from txcl.continuations.ports import OpRunner, ContinuationServices

log = logging.getLogger("txcl.continuations")


async def resume_members(service: "ContinuationServices", walker: "OpRunner", run: Run, frame: Frame,
                         bundle: ResumeBundle, rec: TraceRecorder) -> None:
    """Barrier and promotion resumes: the members' outcomes into the scope, then its end."""
    apply_members(walker, run, frame, bundle.members, rec)
    if not run.finished:
        walker.complete_scope(run, frame, rec)


Resumer = Callable[["ContinuationServices", "OpRunner", Run, Frame, ResumeBundle, TraceRecorder], Awaitable[None]]
RESUMERS: dict[str, Resumer] = {"barrier": resume_members, "promotion": resume_members, "join": resume_join}


async def heartbeat_at_frame(service: "ContinuationServices", run: Run) -> bool:
    """The claim's heartbeat at a frame entry of a resumed segment; False (the run is lost)
    when the fence failed.

    Skipped (no commit) while the store saw the claim alive less than a quarter of the stale
    period ago: another node may take a claim over only once it has been silent for the
    whole period, so within that window the claim is certainly still this segment's. Every
    write of the segment is fenced anyway; the frame heartbeat only stops a segment that lost
    its claim (a process paused past the stale period) before it runs more frames."""
    segment = segment_of(run)
    token = segment.claim_token
    if token is None or run.run_id is None:
        return True
    now_ms = int(time.time() * 1000)
    if not 0 <= now_ms - segment.alive_ms < service.settings.continuation_stale_resume_after // 4:
        try:
            await service.call(service.store.heartbeat, run.run_id, token)
        except RunLost as exc:
            run_lost(run, exc)
            return False
        segment.alive_ms = now_ms
    fault_point("resume-frame")
    return True


def run_from_suspend(bundle: ResumeBundle) -> tuple[Run, dict]:
    """The Run as it was parked, and the frame it parked in."""
    state = dict(bundle.suspend.budgets or {})
    frame_info = state.pop("frame", None) or {}
    state["envelope"] = deep_copy(bundle.suspend.envelope)
    run = Run.from_json(state)
    run.status = "running"
    run.error = None
    run.http_status = None
    run.reason = None
    record = bundle.run
    run.run_id, run.rcid, run.origin_rid, run.snapshot_id = (record.run_id, record.rcid, record.origin_rid,
                                                           record.snapshot_id)
    return run, frame_info


async def resume_run(service: Any, claim: ClaimRecord) -> Any:
    """Drive one released (or taken-over) suspend to its next park or the run's end (its log
    lines carry the run id and the segment's request id)."""
    with bind(run_id=claim.run_id, request_id=claim.segment_id, stack=None):
        return await _resume_run(service, claim)


async def _resume_run(service: Any, claim: ClaimRecord) -> Any:
    try:
        bundle = await claimed_bundle(service, claim)
    except RunLost as exc:
        log.info("txcl: resume of %s abandoned: %s", claim.run_id, exc)
        return None
    fault_point("resume-frame")
    interp = service.interpreter(service.tree_for_snapshot(bundle.run.snapshot_id))
    walker = interp.walker
    run, info = run_from_suspend(bundle)
    set_claim(run, claim.segment_id, claim.claim_token, claim.heartbeat_ms)
    settings = service.settings
    rec = TraceRecorder(settings.trace_mode, claim.segment_id, "continuation", run.entry_stack,
                        body_cap=settings.trace_body_cap_bytes, origin_rid=run.origin_rid, run_id=run.run_id,
                        answers=settings.trace_ops == "answers")
    if rec.enabled:  # the segment's first event, before the outcomes it resumes with are merged
        rec.set_input(run.envelope, None)
        rec.request_start(run.entry_stack, run.src)
    rec.event("continuation.resume", {"run_id": run.run_id, "origin_rid": run.origin_rid, "stage": claim.stage,
                                      "visit": claim.visit, "snapshot_id": run.snapshot_id, "attempt": claim.attempt})
    frame = Frame(info.get("stack", run.stack), int(info.get("scope", run.requested_scope)),
                  info.get("stage", claim.stage), int(info.get("visit", 1)))
    frame.rec = rec
    if rec.full:  # the resumed scope's changes start from the envelope as it was stored
        frame.before = rec.scope_entered(run.envelope)
    for name in run.stacks_seen:
        omit, redact = walker.redaction_paths(name)
        if omit or redact:
            rec.add_redactions(omit, redact)
    resumer = RESUMERS.get(bundle.suspend.kind)
    beat = ClaimKeeper(service, run.run_id, claim.claim_token, segment_of(run)).start()
    try:
        if resumer is None:  # a suspend written by a newer txcl
            run.fail({"error": {"code": RUN_LOST.code, "message": f"no resumer for suspend kind {bundle.suspend.kind!r}"}},
                     503, reason="unsupported_suspend")
        else:
            await resumer(service, walker, run, frame, bundle, rec)
        return await interp.drive(run, rec, resumed=True)
    except (asyncio.CancelledError, RunLost, StoreUnavailable):
        raise  # shutting down, or the store decides (the claim goes stale and is taken over)
    except Exception as exc:  # noqa: BLE001 - a resume that cannot go on fails its run now
        await _fail_resume(service, run, claim, exc)
        return None
    finally:
        beat.stop()


async def _fail_resume(service: "ContinuationServices", run: Run, claim: ClaimRecord, exc: Exception) -> None:
    """The run fails at once with the real error — a takeover would only repeat it until the
    attempts run out, leaving the run `resuming` meanwhile."""
    log.exception("txcl: the resume of %s failed", run.run_id)
    error = {"code": RESUME_FAILED.code, "message": f"the resume failed: {type(exc).__name__}: {exc}"}
    try:
        await service.call_batched_on(claim.run_id, service.store.finish_segment, claim.run_id,
                                   Fence(claim.segment_id, claim.claim_token),
                                   status="failed", error=error, fail_reason="resume_failed")
    except (RunLost, StoreUnavailable) as lost:
        log.warning("txcl: could not record the failed resume of %s: %s", run.run_id, lost)


class ClaimKeeper:
    """The claim's heartbeat every quarter of the stale period while a resumed segment runs
    (frame entries heartbeat too), so a long resume never looks stale and is never taken over
    while it is alive. It beats from a thread, not the event loop, calling the (thread-safe)
    store directly: a resume that keeps the event loop busy (a 40 MiB envelope is parsed,
    copied and encoded on it) cannot hold the heartbeat back. One thread of the process
    beats every live claim (`_BEATS`): starting a thread per resume cost more CPU than the
    rest of a short resume's bookkeeping."""

    def __init__(self, service: "ContinuationServices", run_id: str | None, token: str, segment: Any = None) -> None:
        self.store = service.store
        self.run_id = run_id
        self.token = token
        self.segment = segment  # told when each beat landed (the frame heartbeat may then skip)
        self.period = service.settings.continuation_stale_resume_after / 4000.0
        self.next_at = 0.0  # monotonic time of the next beat (kept by _BEATS)
        self.lost = False

    def start(self) -> "ClaimKeeper":
        if self.run_id and self.period > 0:
            _BEATS.add(self)
        return self

    def stop(self) -> None:
        _BEATS.remove(self)

    def beat(self) -> None:
        try:
            started_ms = int(time.time() * 1000)
            self.store.heartbeat(self.run_id, self.token)
            if self.segment is not None:
                self.segment.alive_ms = started_ms
        except RunLost:
            self.lost = True  # taken over or finished elsewhere: no more beats
            _BEATS.remove(self)
        except StoreUnavailable as exc:  # the next heartbeat (or fenced write) decides
            log.warning("txcl: heartbeat of %s failed: %s", self.run_id, exc)
        except Exception:  # noqa: BLE001 - a heartbeat must never take the node down
            log.exception("txcl: heartbeat of %s failed", self.run_id)


class _ClaimBeats:
    """The process's claim heartbeat thread: beats each registered keeper every `period`
    seconds, oldest due first; started with the first keeper, idle (waiting) without one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._keepers: dict[int, ClaimKeeper] = {}
        self._thread: threading.Thread | None = None

    def add(self, keeper: ClaimKeeper) -> None:
        with self._cond:
            keeper.next_at = time.monotonic() + keeper.period
            self._keepers[id(keeper)] = keeper
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="txcl-claim-heartbeats", daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, keeper: ClaimKeeper) -> None:
        with self._cond:
            self._keepers.pop(id(keeper), None)

    def live(self) -> int:
        return len(self._keepers)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [k for k in self._keepers.values() if k.next_at <= now]
                for keeper in due:
                    keeper.next_at = now + keeper.period
                if not due:
                    wake = min((k.next_at for k in self._keepers.values()), default=None)
                    self._cond.wait(None if wake is None else wake - now)
                    continue
            for keeper in due:
                if self._keepers.get(id(keeper)) is keeper:  # not stopped meanwhile
                    keeper.beat()


_BEATS = _ClaimBeats()


__all__ = ["resume_run", "resume_members", "heartbeat_at_frame", "run_from_suspend", "RESUMERS"]
