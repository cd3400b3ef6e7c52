"""Continuation store throughput on a SQLite file with durable commits (synchronous=FULL).

1. Cycles of park (suspend) + admit (callback terminal) + continue/release + claim + finish,
   beside the raw rate of bare single-row commits on a file with the same pragmas, measured in
   the same run (paired rounds, alternating order, medians: the disk is shared). A cycle is
   four durable commits — P2, P4, P5 and P7 must each commit before the next step may act
   (CONTINUATIONS.md §5.1, AU-7); the claim is a read. So two ratios are printed: store
   commits/s against raw commits/s (the cost of one store transaction against one bare commit;
   the ≥ 50 % target), and cycles/s against raw commits/s (at most 25 % by construction).
2. A 1,000-item itemized unit with window 25, completions answered at once: items/s and the
   store's commits per item (ack + admit + continue per item, plus the park).

Run: python bench/bench_store.py [--cycles N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from txcl.store.connection import open_sqlite, transaction
from txcl.store.records import Fence, RunSpec, UnitSpec
from txcl.store.continuations_sqlite import SqliteContinuations


class CountingStore(SqliteContinuations):
    commits = 0

    def _cs_tx(self):
        self.commits += 1
        return super()._cs_tx()


def unit(name: str = "enrich") -> UnitSpec:
    return UnitSpec(kind="unary", op_name=name, items=[{"q": 1}], op_stack="shop", op_scope=100,
                    dispatch_stage="shop/100", dispatch_stack="shop", budget_ms=600_000,
                    exec_target="https://worker.example/jobs", input_view={"q": 1})


def cycles(path: Path, n: int) -> tuple[float, float]:
    """Returns (cycles/s, commits per cycle)."""
    store = CountingStore(path, node_id="bench")
    snapshot = b'{"rules": ["..."]}'
    envelope = {"order": {"id": 1, "lines": [1, 2, 3]}, "_txc": {"rid": "x"}}
    start_commits = store.commits
    t0 = time.perf_counter()
    for i in range(n):
        rid = f"rid-{i}"
        park = store.park_suspend(
            RunSpec(rid, "shop", "http", "snap-1", snapshot), Fence(rid), stage="shop/100", kind="barrier",
            envelope=envelope, budgets={"ttl": 500, "fuel": 12}, units=[unit()])
        d = park.dispatches[0]
        admit = store.admit_terminal(d.opc, "completed", {"ok": True, "n": i}, source="callback", token=d.token)
        rel = store.continue_release(d.opc, child_version=admit.child_version)
        claim = rel.claim
        store.claim_resume(park.run.run_id, claim.claim_token)
        store.finish_segment(park.run.run_id, Fence(claim.segment_id, claim.claim_token), status="completed",
                             result={"done": True})
    elapsed = time.perf_counter() - t0
    per_cycle = (store.commits - start_commits) / n
    store.close()
    return n / elapsed, per_cycle


def raw_commits(path: Path, n: int) -> float:
    db = open_sqlite(path)
    db.conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
    t0 = time.perf_counter()
    for i in range(n):
        with transaction(db) as conn:
            conn.execute("INSERT INTO t (v) VALUES (?)", (f"row-{i}",))
    elapsed = time.perf_counter() - t0
    db.conn.close()
    return n / elapsed


def itemized(path: Path, n_items: int = 1000, window: int = 25) -> tuple[float, float]:
    """Returns (items/s, commits per item) for one itemized unit answered at once."""
    store = CountingStore(path, node_id="bench")
    spec = UnitSpec(kind="itemized", op_name="pay", items=[{"record": i} for i in range(n_items)], op_stack="shop",
                    op_scope=100, dispatch_stage="shop/100", dispatch_stack="shop", window=window,
                    into="receipts", budget_ms=600_000, exec_target="https://provider.example/pay")
    c0 = store.commits
    t0 = time.perf_counter()
    park = store.park_suspend(RunSpec("rid-items", "shop", "http", "snap-1", b"{}"), Fence("rid-items"),
                              stage="shop/100", kind="barrier", envelope={}, budgets={}, units=[spec])
    pending = list(park.dispatches)
    store.mark_ack([(d.opc, {"job_id": d.opc}) for d in pending])
    won = 0
    while pending:
        d = pending.pop(0)
        admit = store.admit_terminal(d.opc, "completed", {"approved": d.item_index % 3 != 0}, source="callback",
                                     token=d.token)
        if admit.dispatches:
            store.mark_ack([(p.opc, {"job_id": p.opc}) for p in admit.dispatches])
            pending += admit.dispatches
        won += store.continue_release(d.opc, child_version=admit.child_version).won
    elapsed = time.perf_counter() - t0
    assert won == 1
    out = store.get_unit(park.unit_ids[0]).output
    assert len(out) == n_items
    commits = store.commits - c0
    store.close()
    return n_items / elapsed, commits / n_items


def cpu_only_cycles(path: Path, n: int) -> float:
    """Cycles/s with synchronous=OFF: the store's own CPU cost, without waiting for the disk.
    (Informational only; every other figure uses durable commits.)"""
    import txcl.store.continuations_sqlite as impl

    original = impl.open_sqlite

    def no_sync(*args, **kwargs):
        db = original(*args, **kwargs)
        db.conn.execute("PRAGMA synchronous = OFF")
        return db

    impl.open_sqlite = no_sync
    try:
        return cycles(path, n)[0]
    finally:
        impl.open_sqlite = original


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=60, help="cycles per round")
    ap.add_argument("--repeats", type=int, default=21, help="rounds; store and raw alternate within a round")
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--item-repeats", type=int, default=3)
    args = ap.parse_args(argv)
    cyc, raw, ratios, per = [], [], [], 0.0
    items_s, per_item = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        cycles(Path(tmp) / "warm.db", 20)
        raw_commits(Path(tmp) / "warm-raw.db", 80)
        for r in range(args.repeats):
            # alternate which goes first: the disk is shared with other work, so compare neighbours
            if r % 2:
                w = raw_commits(Path(tmp) / f"raw-{r}.db", round(args.cycles * max(per, 4)))
                c, per = cycles(Path(tmp) / f"cycles-{r}.db", args.cycles)
            else:
                c, per = cycles(Path(tmp) / f"cycles-{r}.db", args.cycles)
                w = raw_commits(Path(tmp) / f"raw-{r}.db", round(args.cycles * per))
            cyc.append(c)
            raw.append(w)
            ratios.append(c * per / w)
        cpu = statistics.median(cpu_only_cycles(Path(tmp) / f"cpu-{r}.db", args.cycles) for r in range(3))
        for r in range(args.item_repeats):
            ips, per_item = itemized(Path(tmp) / f"items-{r}.db", args.items, 25)
            items_s.append(ips)
    c, w = statistics.median(cyc), statistics.median(raw)
    print(f"store cycles (park+admit+release+claim+finish): {c:9.1f} cycles/s  ({per:.0f} durable commits/cycle)")
    print(f"store commits inside the cycles:               {c * per:9.1f} commits/s")
    print(f"raw single-row commits, same pragmas:          {w:9.1f} commits/s")
    q = statistics.quantiles(ratios, n=4)
    print(f"ratio store commits/s : raw commits/s:         {statistics.median(ratios):9.0%}  "
          f"(median of {args.repeats} paired rounds, quartiles {q[0]:.0%}-{q[2]:.0%}; target >= 50%)")
    print(f"ratio cycles/s : raw commits/s:                {c / w:9.0%}  (a cycle is {per:.0f} commits, so <= 25%)")
    print(f"store CPU alone (synchronous=OFF, not durable): {cpu:9.1f} cycles/s = {1000 / cpu:.2f} ms/cycle")
    print(f"itemized {args.items} items, window 25:             {statistics.median(items_s):9.1f} items/s, "
          f"{per_item:.2f} store commits/item")
    return 0


if __name__ == "__main__":
    sys.exit(main())
