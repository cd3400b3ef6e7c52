"""Cost against size: the walk over 10, 100 and 1,000 scopes, and over 1 KB, 100 KB and 1 MB
envelopes, with summary tracing into a SQLite file.

    python bench/bench_scaling.py [--rounds 5]

Linear cost shows as a flat cost per scope and a flat cost per KB. The ratios compare the
largest size with a smaller one measured in the same run (1.0 is linear; 10 would mean the
cost per unit grew tenfold). Each scope holds one rule that reads the envelope (WHEN), writes a
flag (SET) and copies a value into its output (EMIT); the envelope is padded with an array
of order lines. CPU time of this process, medians of rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import headline  # noqa: E402

from txcl.ops.tree import load_ops  # noqa: E402
from txcl.runtime.config import Settings  # noqa: E402
from txcl.runtime.interpreter import Completed, Interpreter  # noqa: E402
from txcl.store import open_store  # noqa: E402
from txcl.values.jsonio import loads  # noqa: E402


def build_stack(root: Path, scopes: int) -> Path:
    for i in range(1, scopes + 1):
        scope = root / "OPS" / "grow" / f"{i * 10:05d}_s{i}"
        scope.mkdir(parents=True)
        (scope / "rule.txcl").write_text(
            f'WHEN .customer.tier == "gold"\nSET .flags.s{i} = true\nEMIT .seen.s{i} = .order.total\n',
            encoding="utf-8")
    return root


def envelope(target_bytes: int) -> str:
    env: dict = {"customer": {"name": "Ada", "tier": "gold"}, "order": {"total": 250, "lines": []}}
    line = {"sku": "sku-000000", "qty": 3, "price": 9.99, "title": "a product title"}
    per_line = len(json.dumps(line)) + 1
    env["order"]["lines"] = [dict(line, sku=f"sku-{n:06d}") for n in range(max(target_bytes // per_line - 2, 0))]
    return json.dumps(env)


def per_envelope_us(root: Path, text: str, n: int, rounds: int) -> float:
    """CPU µs per envelope: parse the body as txcl serve does, walk, trace (group-committed)."""
    store = open_store(root / ".txcl-data" / f"scaling-{time.monotonic_ns()}.db")
    interp = Interpreter(load_ops(root), store=store, settings=Settings(trace_mode="summary", op_scope_ttl_max=0, max_fuel_per_request=0),
                         trace_batch=512, trace_batch_delay_s=0.25)

    async def walk(count: int) -> None:
        for _ in range(count):
            outcome = await interp.run(loads(text), "grow", bytes_in=len(text), from_json=True)
        assert isinstance(outcome, Completed) and outcome.envelope["seen"]
        interp.flush_traces()

    try:
        asyncio.run(walk(max(n // 5, 2)))
        samples = []
        for _ in range(rounds):
            cpu = time.process_time()
            asyncio.run(walk(n))
            samples.append((time.process_time() - cpu) / n * 1e6)
    finally:
        interp.close()
        store.close()
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer envelopes per round")
    args = parser.parse_args()
    scale = 5 if args.quick else 1
    with tempfile.TemporaryDirectory() as tmp:
        print("scopes (1 KB envelope)        µs per envelope   µs per scope")
        per_scope = {}
        small = envelope(1024)
        for scopes, n in ((10, 2000), (100, 300), (1000, 30)):
            root = build_stack(Path(tmp) / f"scopes{scopes}", scopes)
            us = per_envelope_us(root, small, max(n // scale, 3), args.rounds)
            per_scope[scopes] = us / scopes
            print(f"  {scopes:>5}                      {us:>14.0f}   {us / scopes:>12.1f}")
        growth = per_scope[1000] / per_scope[10]
        print(f"  cost per scope, 1,000 scopes / 10 scopes: {growth:.2f} (1.0 = linear)")
        headline("walk, µs per scope at 1,000 scopes", per_scope[1000], "µs", baseline="µs per scope at 10 scopes",
                 ratio=growth, goal="linear (ratio ≈ 1)")

        print("envelope size (10 scopes)     µs per envelope   µs per KB")
        root = build_stack(Path(tmp) / "sizes", 10)
        per_kb = {}
        for label, size, n in (("1 KB", 1024, 2000), ("100 KB", 100 * 1024, 100), ("1 MB", 1024 * 1024, 10)):
            text = envelope(size)
            us = per_envelope_us(root, text, max(n // scale, 3), args.rounds)
            per_kb[label] = us / (len(text) / 1024)
            print(f"  {label:<8} ({len(text):>8} B)         {us:>12.0f}   {per_kb[label]:>10.1f}")
        growth = per_kb["1 MB"] / per_kb["100 KB"]
        print(f"  cost per KB, 1 MB / 100 KB: {growth:.2f} (1.0 = linear)")
        headline("walk, µs per KB at 1 MB (incl. parsing the body)", per_kb["1 MB"], "µs",
                 baseline="µs per KB at 100 KB", ratio=growth, goal="linear (ratio ≈ 1)")


if __name__ == "__main__":
    main()
