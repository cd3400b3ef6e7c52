"""Suspend + callback + resume cycles through the whole continuation engine, on each store
backend, beside bare single-row commits of the same backend measured in the same run.

One cycle = a request walks a 2-scope stack whose scope 100 holds a `mode = "async"` op:
classify, park, dispatch (the worker's 202 is simulated in-process: no HTTP, so the figure is
the engine and the store, not the loopback network), the worker's ack held back, then the
callback's admission (writing the held ack) and release with a token, then the resume: claim,
rebuild of the member op from the frozen snapshot, tail, merge, SET POST, the next scope and
finish. Traces are off (`txcl serve` writes them off the request path). Store calls go
through the lane's thread, as under `txcl serve`.

Printed per backend: cycles/s, CPU ms per cycle (this process), commits per cycle, trips to the
store's thread per cycle (each a hand-off and a wake-up back), raw commits/s and cycles/s : raw
commits/s (medians of paired rounds in alternating order).

With several clients (`--clients 1,16`, the default), that many make cycles at once, each one
after another: store calls that queue up while a commit is in progress share the next one.

`--baseline REF` makes the same cycles with the txcl of a git revision of this repository in
the same run (checked out into a temporary worktree and driven by this file's `cycles` in a
child process, its rounds taking turns with this code's): the ratio to an earlier txcl on the
same machine at the same minutes, which figures noted on another day cannot give. The
revision's continuation API must be the one this benchmark drives (it is from early December
2026 on). Only the parser has compiled modules, built for the current checkout; the worktree's
runs as plain Python, which the cycles do not use (their rules are parsed before the clock
starts).

Run: python bench/bench_continuations.py [--backend sqlite|postgresql|both] [--cycles N] [--repeats R]
     [--clients 1,16] [--baseline REF]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _backends import Backends, raw_commits  # noqa: E402
from _baseline import baseline_tree, call_in_baseline  # noqa: E402
from _timing import headline  # noqa: E402

from txcl.continuations.service import ContinuationService, open_run_store  # noqa: E402
from txcl.continuations.worker_client import AckResult  # noqa: E402
from txcl.ops.tree import load_ops  # noqa: E402
from txcl.runtime.config import Settings  # noqa: E402
from txcl.runtime.interpreter import Completed, Suspended  # noqa: E402


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


async def cycles(ws: Path, db: str, n: int, clients: int = 1) -> tuple[float, float, float, float]:
    """(cycles/s, CPU ms per cycle, commits per cycle, store-lane trips per cycle) of `n`
    cycles made by `clients` clients at once, each going through its cycles one after another."""
    store = open_run_store(db, node_id="bench")
    service = ContinuationService(store, Settings(trace_mode="off"), workspace=ws)
    sent: contextvars.ContextVar[list] = contextvars.ContextVar("sent")

    async def post(client, d, **kwargs):  # the worker's 202, without the network
        sent.get().append(d)  # the dispatch is sent from the client's own task
        return AckResult(d.opc, True, {"job_id": "j"})

    import txcl.continuations.service as service_mod

    service_mod.post_dispatch = post  # type: ignore[assignment]
    interp = service.interpreter(load_ops(ws))

    async def client(first: int, count: int) -> None:
        mine: list = []
        sent.set(mine)
        for i in range(first, first + count):
            outcome = await interp.run({"order": {"id": i, "amount": 10}}, "shop")
            assert isinstance(outcome, Suspended), outcome
            d = mine.pop()
            admit, release = await service.complete(d.opc, "completed", {"bonus": 5}, source="callback",
                                                    token=d.token)
            assert release is not None and release.won, admit
            final = await service.drive_resume(release.claim)
            assert isinstance(final, Completed) and final.envelope["total"] == 15, final

    shares = [n // clients + (1 if k < n % clients else 0) for k in range(clients)]
    lane = getattr(service, "lane", None)  # (an earlier txcl, driven by --baseline, may have none)
    c0, trips0 = store.commit_count(), getattr(lane, "trips", 0)
    t0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client(sum(shares[:k]), shares[k]) for k in range(clients)))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    per = (store.commit_count() - c0) / max(n, 1)
    trips = (getattr(lane, "trips", 0) - trips0) / max(n, 1)
    await service.aclose()
    interp.close()
    store.close()
    return n / elapsed, cpu / max(n, 1) * 1000, per, trips


GOALS = {1: "≥ 3 × 223/s (SQLite)", 16: "≥ 3 × 328/s (SQLite)"}  # the cycles/s measured before this work

def baseline_round(warm_db: str, db: str, n: int, clients: int) -> list[float]:
    """[cycles/s, CPU ms per cycle] of `n` cycles after a warm-up of 10, in a workspace of its
    own: what `--baseline` runs in a child process with the baseline revision's txcl (so both
    sides make exactly the same cycles)."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace(Path(tmp) / "ws")
        asyncio.run(cycles(ws, warm_db, 10, clients))
        got = asyncio.run(cycles(ws, db, n, clients))
    return [got[0], got[1]]


def baseline_cycles(tree: Path, warm_db: str, db: str, n: int, clients: int) -> tuple[float, float]:
    """(cycles/s, CPU ms per cycle) of the baseline's txcl, in a child process."""
    rate, cpu = call_in_baseline(tree, __file__, "baseline_round", warm_db, db, n, clients)
    return float(rate), float(cpu)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--cycles", type=int, default=100, help="cycles per round (default 100)")
    ap.add_argument("--repeats", type=int, default=5, help="rounds; medians are printed (default 5)")
    ap.add_argument("--clients", default="1,16",
                    help="comma-separated numbers of clients making cycles at once (default 1,16)")
    ap.add_argument("--baseline", metavar="REF", default=None,
                    help="also measure the code of this git revision (e.g. a tag or commit) in the same run")
    args = ap.parse_args(argv)
    names = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    try:
        client_counts = [int(c) for c in args.clients.split(",")]
    except ValueError:
        ap.error(f"--clients: comma-separated whole numbers, not {args.clients!r}")
    if any(c < 1 for c in client_counts):
        ap.error("--clients: each number must be at least 1")
    header = (f"{'backend':<11} {'clients':>7} {'cycles/s':>9} {'CPU ms/cycle':>12} {'commits/cycle':>13} "
              f"{'lane trips':>10} {'raw commits/s':>13} {'cycles/raw':>10}")
    if args.baseline:
        header += f" {'baseline/s':>10} {'base CPU ms':>11} {'× baseline':>10}"
    with contextlib.ExitStack() as stack:
        tree = stack.enter_context(baseline_tree(args.baseline)) if args.baseline else None
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        backends = stack.enter_context(Backends(names))
        print(header)
        ws = workspace(Path(tmp) / "ws")
        for name, fresh in backends:
            asyncio.run(cycles(ws, fresh(), 10))
            for clients in client_counts:
                n = max(args.cycles, clients)
                rows, based = [], []

                def ours() -> tuple:
                    return asyncio.run(cycles(ws, fresh(), n, clients))

                def theirs() -> tuple[float, float] | None:
                    return baseline_cycles(tree, fresh(), fresh(), n, clients) if tree is not None else None

                for r in range(args.repeats):
                    # the order changes every round, so a machine getting slower or faster
                    # during the run is shared out evenly
                    if r % 2:
                        raw = raw_commits(name, fresh(), args.cycles * 4)
                        base = theirs()
                        got = ours()
                    else:
                        got = ours()
                        base = theirs()
                        raw = raw_commits(name, fresh(), args.cycles * 4)
                    rows.append((*got, raw))
                    based.append(base)
                med = [statistics.median(r[i] for r in rows) for i in range(5)]
                ratio = statistics.median(r[0] / r[4] for r in rows)
                line = (f"{name:<11} {clients:>7} {med[0]:>9.1f} {med[1]:>12.2f} {med[2]:>13.2f} {med[3]:>10.2f} "
                        f"{med[4]:>13.1f} {ratio:>10.1%}")
                label = f"{name}" if clients == 1 else f"{name}, {clients} clients"
                if tree is not None:
                    times = statistics.median(r[0] / b[0] for r, b in zip(rows, based))
                    line += (f" {statistics.median(b[0] for b in based):>10.1f} "
                             f"{statistics.median(b[1] for b in based):>11.2f} {times:>9.2f}×")
                    print(line)
                    headline(f"suspend → callback → resume cycle, {label}", med[0], "cycles/s",
                             baseline=f"the same cycles at {args.baseline}", ratio=times, goal="≥ 3 ×")
                else:
                    print(line)
                    headline(f"suspend → callback → resume cycle, {label}", med[0], "cycles/s",
                             baseline=f"raw {name} single-row commits/s", ratio=ratio, goal=GOALS.get(clients, ""))
                headline(f"  CPU per cycle, {label}", med[1], "ms", goal="≤ 1 ms")
                headline(f"  commits per cycle, {label}", med[2], "commits", goal="≤ 3")
        if tree is not None:
            print(f"baseline: {args.baseline} (its txcl making the same cycles in a child process beside each round)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
