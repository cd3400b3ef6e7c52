"""Continuation store throughput on each backend, beside the raw commit rate of the same
backend measured in the same run.

1. Store cycles: park (suspend) + admit (callback terminal) + continue/release + claim + finish,
   called directly on the store. Printed: cycles/s, CPU per cycle (this process), durable
   commits per cycle, the backend's raw single-row commit rate (paired rounds, alternating
   order, medians: the disk is shared), and cycles/s : raw commits/s.
2. One itemized unit of 1,000 items, window 25, completions answered at once: items/s and the
   store's commits per item.

Run: python bench/bench_store.py [--backend sqlite|postgresql|both] [--cycles N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _backends import Backends, raw_commits  # noqa: E402

from txcl.runoptions import unit_options  # noqa: E402
from txcl.store import open_store  # noqa: E402
from txcl.store.records import Fence, RunSpec, UnitSpec  # noqa: E402


def unit(name: str = "enrich") -> UnitSpec:
    return UnitSpec(kind="unary", op_name=name, items=[{"q": 1}], op_stack="shop", op_scope=100,
                    dispatch_stage="shop/100", dispatch_stack="shop", budget_ms=600_000,
                    exec_target="https://worker.example/jobs", input_view={"q": 1},
                    options=unit_options("unary", "fail", 1, {}))


def cycles(db: str, n: int) -> tuple[float, float, float]:
    """(cycles/s, CPU ms per cycle, commits per cycle)."""
    store = open_store(db, node_id="bench")
    snapshot = b'{"rules": ["..."]}'
    envelope = {"order": {"id": 1, "lines": [1, 2, 3]}, "_txc": {"rid": "x"}}
    c0 = store.commit_count()
    t0, cpu0 = time.perf_counter(), time.process_time()
    for i in range(n):
        rid = f"rid-{i}"
        park = store.park_suspend(
            RunSpec(rid, "shop", "http", "snap-1", snapshot), Fence(rid), stage="shop/100", kind="barrier",
            envelope=envelope, budgets={"ttl": 500, "fuel": 12}, units=[unit()])
        d = park.dispatches[0]
        admit = store.admit_terminal(d.opc, "completed", {"ok": True, "n": i}, source="callback", token=d.token)
        claim = store.continue_release(d.opc, child_version=admit.child_version).claim
        store.claim_resume(park.run.run_id, claim.claim_token)
        store.finish_segment(park.run.run_id, Fence(claim.segment_id, claim.claim_token), status="completed",
                             result={"done": True})
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    per = (store.commit_count() - c0) / n
    store.close()
    return n / elapsed, cpu / n * 1000, per


def itemized(db: str, n_items: int = 1000, window: int = 25) -> tuple[float, float, float]:
    """(items/s, CPU ms per item, commits per item) for one itemized unit answered at once."""
    store = open_store(db, node_id="bench")
    spec = UnitSpec(kind="itemized", op_name="pay", items=[{"record": i} for i in range(n_items)], op_stack="shop",
                    op_scope=100, dispatch_stage="shop/100", dispatch_stack="shop", window=window,
                    into="receipts", budget_ms=600_000, exec_target="https://provider.example/pay",
                    options=unit_options("itemized", "fail", n_items, {}))
    c0 = store.commit_count()
    t0, cpu0 = time.perf_counter(), time.process_time()
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
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert won == 1 and len(store.get_unit(park.unit_ids[0]).output) == n_items
    commits = store.commit_count() - c0
    store.close()
    return n_items / elapsed, cpu / n_items * 1000, commits / n_items


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--cycles", type=int, default=60, help="cycles per round")
    ap.add_argument("--repeats", type=int, default=9, help="rounds; store and raw alternate within a round")
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--item-repeats", type=int, default=3)
    args = ap.parse_args(argv)
    names = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    print(f"{'backend':<11} {'cycles/s':>9} {'CPU ms/cyc':>10} {'commits/cyc':>11} {'raw commits/s':>13} "
          f"{'cyc/raw':>8} | {'items/s':>8} {'CPU ms/item':>11} {'commits/item':>12}")
    with Backends(names) as backends:
        for name, fresh in backends:
            cycles(fresh(), 10)  # warm up
            rates, cpus, raws, ratios, per = [], [], [], [], 0.0
            for r in range(args.repeats):
                if r % 2:
                    raw = raw_commits(name, fresh(), max(50, round(args.cycles * max(per, 3))))
                    rate, cpu, per = cycles(fresh(), args.cycles)
                else:
                    rate, cpu, per = cycles(fresh(), args.cycles)
                    raw = raw_commits(name, fresh(), max(50, round(args.cycles * per)))
                rates.append(rate)
                cpus.append(cpu)
                raws.append(raw)
                ratios.append(rate / raw)
            items = [itemized(fresh(), args.items, 25) for _ in range(args.item_repeats)]
            print(f"{name:<11} {statistics.median(rates):>9.1f} {statistics.median(cpus):>10.2f} {per:>11.1f} "
                  f"{statistics.median(raws):>13.1f} {statistics.median(ratios):>8.1%} | "
                  f"{statistics.median(i[0] for i in items):>8.1f} {statistics.median(i[1] for i in items):>11.2f} "
                  f"{statistics.median(i[2] for i in items):>12.2f}")
    print("cyc/raw: store cycles per second against bare single-row commits per second on the same backend "
          "(medians of paired rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
