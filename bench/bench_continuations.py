"""Suspend + callback + resume cycles through the whole continuation engine on a SQLite file
with durable commits (WAL, synchronous=FULL), beside bare SQLite commits measured in the same
run.

One cycle = a request walks a 2-scope stack whose scope 100 holds a `mode = "async"` op:
classify, park (P1+P2), dispatch (the worker's 202 is simulated in-process: no HTTP, so the
figure is the engine and the store, not the loopback network), mark the ack (P3), the drain
check, then the callback's admit (P4) and release (P5) with a token, then the resume: claim,
rebuild of the member op from the frozen snapshot, tail, merge, SET POST, the next scope and
finish (P7). Traces are off (they are written off the request path by `txcl serve`).

Printed: cycles/s and durable commits per cycle; the raw rate of the same number of bare
single-row commits (same pragmas, same directory, paired rounds alternating order, medians);
and the ratio of the engine's commit throughput to the raw commit throughput (target >= 50%),
plus cycles/s : raw commits/s for reference (bounded by 1 / commits-per-cycle).

Run: python bench/bench_continuations.py [--cycles N] [--repeats R] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from txcl.continuations.service import ContinuationService, DurableStore
from txcl.continuations.worker_client import AckResult
from txcl.ops.tree import load_ops
from txcl.runtime.config import Settings
from txcl.runtime.interpreter import Completed, Suspended
from txcl.store.connection import open_sqlite, transaction


class _Counted:
    """A write transaction that counts as a durable commit only if it changed a row (SQLite
    writes nothing to the WAL, and syncs nothing, for a transaction without changes)."""

    def __init__(self, inner):
        self.inner = inner

    def __enter__(self):
        self.t = self.inner.__enter__()
        conn = getattr(self.t, "conn", self.t)
        self.conn, self.before = conn, conn.total_changes
        return self.t

    def __exit__(self, *exc):
        result = self.inner.__exit__(*exc)
        CountingStore.transactions += 1
        if self.conn.total_changes > self.before:
            CountingStore.commits += 1
        return result


class CountingStore(DurableStore):
    commits = 0
    transactions = 0

    def _cs_tx(self):
        return _Counted(super()._cs_tx())

    def write(self):
        return _Counted(super().write())


def workspace(root: Path) -> Path:
    files = {
        "OPS/shop/100/enrich.txcl": 'WITH mode = "async", timeout = "10m", into = "enriched"\n'
                                    'EXEC "http://127.0.0.1:9/jobs"',
        "OPS/shop/200/total.txcl": "EMIT .total = &add(.order.amount, .enriched.bonus)",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return root


async def cycles(ws: Path, db: Path, n: int, inline: bool = False) -> tuple[float, float, float]:
    """(cycles/s, durable commits per cycle, write transactions per cycle)."""
    store = CountingStore(db, node_id="bench")
    service = ContinuationService(store, Settings(trace_mode="off"), workspace=ws)
    service.inline_store = inline
    sent: list = []

    async def post(client, d, **kwargs):  # the worker's 202, without the network
        sent.append(d)
        return AckResult(d.opc, True, {"job_id": "j"})

    import txcl.continuations.service as service_mod

    service_mod.post_dispatch = post  # type: ignore[assignment]
    interp = service.interpreter(load_ops(ws))
    c0, x0 = CountingStore.commits, CountingStore.transactions
    t0 = time.perf_counter()
    for i in range(n):
        outcome = await interp.run({"order": {"id": i, "amount": 10}}, "shop")
        assert isinstance(outcome, Suspended), outcome
        d = sent.pop()
        admit, release = await service.complete(d.opc, "completed", {"bonus": 5}, source="callback", token=d.token)
        assert release is not None and release.won, admit
        final = await service.drive_resume(release.claim)
        assert isinstance(final, Completed) and final.envelope["total"] == 15, final
    elapsed = time.perf_counter() - t0
    per = (CountingStore.commits - c0) / n
    per_tx = (CountingStore.transactions - x0) / n
    await service.aclose()
    interp.close()
    store.close()
    return n / elapsed, per, per_tx


def raw_commits(db: Path, n: int) -> float:
    conn_db = open_sqlite(db)
    conn_db.conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
    t0 = time.perf_counter()
    for i in range(n):
        with transaction(conn_db) as conn:
            conn.execute("INSERT INTO t (v) VALUES (?)", (f"row-{i}",))
    elapsed = time.perf_counter() - t0
    conn_db.conn.close()
    return n / elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--dir", default=None, help="directory for the database files (default: a temp dir)")
    args = ap.parse_args(argv)
    modes = {"thread": False, "inline": True}
    results: dict[str, list[tuple[float, float, float, float]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        ws = workspace(root / "ws")
        asyncio.run(cycles(ws, root / "warm.db", 10))
        raw_commits(root / "warm-raw.db", 50)
        per = 6.0
        for r in range(args.repeats):
            # paired rounds, alternating order: the disk is shared with other work
            order = ["raw", *modes] if r % 2 else [*modes, "raw"]
            got: dict[str, tuple[float, float, float]] = {}
            raw = 0.0
            for what in order:
                if what == "raw":
                    raw = raw_commits(root / f"raw-{r}.db", round(args.cycles * per))
                else:
                    got[what] = asyncio.run(cycles(ws, root / f"{what}-{r}.db", args.cycles, modes[what]))
                    per = got[what][1]
            for m, (c, p, x) in got.items():
                results[m].append((c, p, x, raw))
    raw_med = statistics.median(r[3] for rows in results.values() for r in rows)
    print(f"raw single-row commits, same pragmas, same run: {raw_med:8.1f} commits/s  "
          f"(as many commits per round as the cycles made)")
    for m, rows in results.items():
        c = statistics.median(r[0] for r in rows)
        per, per_tx = rows[-1][1], rows[-1][2]
        ratio = statistics.median(r[0] * r[1] / r[3] for r in rows)
        label = "store calls in a worker thread (txcl serve)" if m == "thread" else \
            "store calls inline (txcl run / complete)"
        print(f"\n{label}:")
        print(f"  suspend+callback+resume cycles:           {c:8.1f} cycles/s ({1000 / c:.2f} ms/cycle)")
        note = f"  ({per_tx:.0f} write transactions, {per_tx - per:.0f} of them changed nothing)" if per_tx > per else ""
        print(f"  durable commits per cycle:                {per:8.1f}{note}")
        print(f"  engine commits/s : raw commits/s:         {ratio:8.0%}  (median of {args.repeats} paired rounds; "
              f"target >= 50%)")
        print(f"  cycles/s : raw commits/s:                 {c / raw_med:8.0%}  (at most 1/{per:.0f} by construction)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
