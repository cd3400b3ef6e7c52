"""The claim heartbeat of resumed segments: one thread of the process beats every live claim
at a quarter of the stale period, stops beating a claim when its resume ends or the store says
the run is lost, and a slow or failing beat of one claim never stops the others."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from txcl.continuations.resume import _BEATS, ClaimKeeper
from txcl.store.errors import RunLost, StoreUnavailable


class _Store:
    def __init__(self, fail: dict[str, Exception] | None = None) -> None:
        self.beats: dict[str, int] = {}
        self.threads: set[str] = set()
        self.fail = fail or {}
        self.lock = threading.Lock()

    def heartbeat(self, run_id: str, token: str) -> None:
        with self.lock:
            self.beats[run_id] = self.beats.get(run_id, 0) + 1
            self.threads.add(threading.current_thread().name)
        if run_id in self.fail:
            raise self.fail[run_id]


def _service(store: _Store, stale_ms: int = 200) -> SimpleNamespace:
    return SimpleNamespace(store=store, settings=SimpleNamespace(continuation_stale_resume_after=stale_ms))


def _wait_for(predicate, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_one_thread_beats_every_live_claim_until_its_resume_stops() -> None:
    store = _Store()
    segment = SimpleNamespace(alive_ms=0)
    threads_before = threading.active_count()
    keepers = [ClaimKeeper(_service(store), f"run-{i}", "tok", segment if i == 0 else None).start()
               for i in range(5)]
    _wait_for(lambda: all(store.beats.get(f"run-{i}", 0) >= 3 for i in range(5)))
    assert store.threads == {"txcl-claim-heartbeats"}
    assert threading.active_count() <= threads_before + 1
    assert segment.alive_ms > 0  # each beat tells the segment when the store last saw it alive
    for keeper in keepers:
        keeper.stop()
    counts = dict(store.beats)
    time.sleep(0.2)  # four periods: nothing more
    assert store.beats == counts and _BEATS.live() == 0


def test_a_lost_run_stops_beating_and_a_failing_store_does_not_stop_the_others() -> None:
    store = _Store(fail={"lost": RunLost("taken over"), "down": StoreUnavailable("down")})
    lost, down, fine = (ClaimKeeper(_service(store), name, "tok").start() for name in ("lost", "down", "fine"))
    _wait_for(lambda: store.beats.get("fine", 0) >= 4 and store.beats.get("down", 0) >= 4)
    assert store.beats["lost"] == 1 and lost.lost  # the first beat learnt the run was lost
    for keeper in (down, fine):
        keeper.stop()


def test_no_beat_before_a_period_and_none_without_a_run() -> None:
    store = _Store()
    keeper = ClaimKeeper(_service(store, stale_ms=4_000), "run-slow", "tok").start()  # beats every second
    idle = ClaimKeeper(_service(store), None, "tok").start()
    time.sleep(0.3)
    keeper.stop()
    idle.stop()
    assert store.beats == {}
