"""Walk throughput: a 10-scope stack of in-process rules (WHEN + SET + EMIT, one py:// op)
over a ~1 KB envelope, sequentially on one core.

    python bench/bench_walk.py [--n 3000] [--rounds 5]

Prints envelopes/s (median of rounds) with tracing off, in summary mode and in full mode,
each trace written to a SQLite file in a temporary directory, plus the ratios. The modes take
turns within each round (full mode with a tenth of the envelopes: it is ~10x slower), and
summary / off is the median of the rounds' own ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import headline  # noqa: E402

from txcl.ops.tree import load_ops
from txcl.runtime.config import Settings
from txcl.runtime.interpreter import Completed, Interpreter
from txcl.store import open_store

SCOPES = 10


def build_workspace(root: Path, sync_py: bool = False) -> Path:
    ops = root / "OPS" / "bench"
    for i in range(1, SCOPES + 1):
        scope = ops / f"{i * 100:04d}_s{i}"
        scope.mkdir(parents=True)
        if i == 5:
            rule = ('WHEN .customer.tier == "gold"\nSET .pricing.currency = "EUR"\nSELECT .order.total AS .total\n'
                    'EXEC "py://bench_ops:price"\nEMIT .s5.done = true\n')
        else:
            rule = (f'WHEN .customer.tier == "gold", .order.total > {i}\nSET .step{i}.seen = true\n'
                    f'EMIT .s{i}.total = .order.total, .s{i}.name = .customer.name\n')
        (scope / f"rule{i}.txcl").write_text(rule, encoding="utf-8")
    # `async def` runs on the event loop; a plain `def` runs in the --py-threads pool.
    prefix = "def" if sync_py else "async def"
    (root / "bench_ops.py").write_text(
        f"{prefix} price(inp, ctx):\n    return {{'price': {{'gross': inp['total'] * 1.2}}}}\n", encoding="utf-8")
    return root


def envelope() -> dict:
    env = {
        "customer": {"name": "Ada Lovelace", "tier": "gold", "email": "ada@example.com"},
        "order": {"id": "ord-1234", "total": 250, "items": [
            {"sku": f"sku-{n}", "qty": n, "price": 9.99 + n, "title": "a product title"} for n in range(11)]},
        "meta": {"source": "bench", "tags": ["a", "b", "c"]},
    }
    return env


MODES = ("off", "summary", "full")


async def _batch(interp: Interpreter, template: str, n: int) -> tuple[float, float]:
    """`n` envelopes through `interp`: (wall rate, CPU rate), the CPU rate (envelopes per
    second of this process's CPU time) being the steadier on a shared machine."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        outcome = await interp.run(json.loads(template), "bench", bytes_in=len(template))
    interp.flush_traces()
    elapsed, cpu_used = time.perf_counter() - start, time.process_time() - cpu
    assert isinstance(outcome, Completed) and outcome.envelope["s5"]["done"] is True
    return n / elapsed, n / max(cpu_used, 1e-9)


def measure(ws: Path, n: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(wall rate, CPU rate) of every round per trace mode. The modes take turns within each
    round, so a busy minute slows them alike and the per-round ratios stay comparable."""
    tree = load_ops(ws)
    stores = {mode: open_store(ws / ".txcl-data" / f"bench-{mode}.db") for mode in MODES}
    # Traces are group-committed (512 per transaction, at most 250 ms old): each trace is
    # still written whole in one transaction, but a commit's fsync is shared.
    interps = {mode: Interpreter(tree, store=stores[mode], settings=Settings(trace_mode=mode), trace_batch=512,
                                 trace_batch_delay_s=0.25) for mode in MODES}
    template = json.dumps(envelope())

    async def run() -> dict[str, list[tuple[float, float]]]:
        rates: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
        for mode in MODES:
            await _batch(interps[mode], template, max(n // 10, 10))  # warm-up
        for _ in range(rounds):
            for mode in MODES:
                # full tracing is ~10x slower: a tenth as many envelopes keep the rounds short
                rates[mode].append(await _batch(interps[mode], template, n if mode != "full" else max(n // 10, 10)))
        for interp in interps.values():
            await interp.aclose_http()
        return rates

    try:
        return asyncio.run(run())
    finally:
        for mode in MODES:
            interps[mode].close()
            stores[mode].close()


def stored_trace_bytes(ws: Path, mode: str) -> float:
    """The mean size of a trace row's steps and events as stored by `mode` (the disk a
    request's trace takes, besides the row's fixed columns)."""
    with sqlite3.connect(ws / ".txcl-data" / f"bench-{mode}.db") as conn:
        (mean,), = conn.execute("SELECT avg(length(steps_json) + length(events_json)) FROM traces")
    return float(mean or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="envelopes per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sync-py", action="store_true", help="make the py:// op a plain def (thread pool)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = build_workspace(Path(tmp), args.sync_py)
        size = len(json.dumps(envelope()))
        kind = "def (thread pool)" if args.sync_py else "async def (event loop)"
        print(f"10-scope stack, py:// op as {kind}, envelope {size} bytes, {args.n} envelopes x {args.rounds} rounds (median)")
        rates = measure(ws, args.n, args.rounds)
        results = {}
        for mode in MODES:
            wall = statistics.median(r[0] for r in rates[mode])
            cpu = results[mode] = statistics.median(r[1] for r in rates[mode])
            print(f"  trace {mode:<8} {cpu:7.0f} envelopes/s per CPU-second ({1e6 / cpu:4.0f} us each)"
                  f"   wall clock {wall:7.0f}/s")
        print(f"  stored per trace (steps and events): summary {stored_trace_bytes(ws, 'summary'):.0f} bytes, "
              f"full {stored_trace_bytes(ws, 'full'):.0f} bytes")
        paired = statistics.median(s[1] / o[1] for s, o in zip(rates["summary"], rates["off"]))
        print(f"  summary / off = {paired:.2f} (median of the rounds' ratios)   "
              f"full / summary = {results['full'] / results['summary']:.2f}")
        headline("10-scope walk, 1 KB envelope, summary tracing", results["summary"], "env/s/core",
                 baseline="the same walk, tracing off", ratio=paired,
                 goal="≥ 5,000/s; ratio ≥ 0.8")
        print(f"  target >= 5000 envelopes/s with summary tracing: "
              f"{'met' if results['summary'] >= 5000 else 'NOT met'}")


if __name__ == "__main__":
    main()
