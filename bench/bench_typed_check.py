"""Benchmark the typed-envelope checks: `txcl check` on the same generated tree with and
without schemas, at 1,000, 2,000 and 4,000 rules, in the same run.

- cold: a fresh `txcl check --no-cache` process (parse, per-file rules, tree rules, typed flow);
- warm: the in-process `run_check` with every file's analysis cached in memory, so what is
  left is the tree-wide work — where the typed flow's cost shows undiluted.

Prints medians, the typed/untyped ratio (goal: ≤ 2× for 1,000 rules) and µs per rule at each
size (linear growth: about the same at every size).

    python bench/bench_typed_check.py [--sizes 1000,2000,4000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import headline  # noqa: E402
from bench_check import TEMPLATES  # noqa: E402

STACKS = 10

SCHEMA = {"$defs": {
    "input": {"type": "object", "properties": {
        "order": {"type": "object", "properties": {"total": {"type": "number"}, "id": {"type": "string"},
                                                   "currency": {"type": "string"}}},
        "customer": {"type": "object", "properties": {"tier": {"enum": ["basic", "gold", "platinum"]}}},
        "status": {"enum": ["open", "closed"]}, "retries": {"type": "integer"}, "id": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        "flag": {"type": "boolean"}, "done": {"type": "boolean"}, "seen": {"type": "integer"},
        "audit": {"type": "object", "additionalProperties": True}}},
    "output": {"type": "object", "additionalProperties": True, "properties": {
        "next": {"type": "string"}, "n": {"type": "integer"}}},
}}


def generate(root: Path, count: int, typed: bool) -> None:
    ops = root / "OPS"
    for i in range(count):
        stack = f"stack{i % STACKS}"
        scope = 100 * (1 + (i // STACKS) % 10)
        path = ops / stack / f"{scope:04d}_s" / f"rule_{i:05d}.txcl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TEMPLATES[i % len(TEMPLATES)].format(n=i), encoding="utf-8")
    if typed:
        for s in range(STACKS):
            (ops / f"stack{s}" / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")


def cold(root: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "txcl", "check", "--no-cache", "-q", "--exit-zero",
                           "--output-format", "concise"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"txcl check failed: {proc.stderr}")
    return time.perf_counter() - start


def warm(root: Path) -> float:
    from txcl.check.engine import run_check

    cwd = os.getcwd()
    os.chdir(root)
    try:
        run_check(["."], cache_dir=False)  # fills the in-memory analysis cache
        start = time.perf_counter()
        run_check(["."], cache_dir=False)
        return time.perf_counter() - start
    finally:
        os.chdir(cwd)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,2000,4000")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="txcl-bench-typed-"))
    try:
        print(f"{'rules':>6} {'cold untyped':>13} {'cold typed':>11} {'x':>5} {'warm untyped':>13} "
              f"{'warm typed':>11} {'x':>5} {'typed µs/rule (warm)':>21}")
        for size in sizes:
            trees = {}
            for typed in (False, True):
                root = base / f"{size}-{'typed' if typed else 'plain'}"
                generate(root, size, typed)
                trees[typed] = root
            times: dict[tuple[str, bool], list[float]] = {}
            for _ in range(args.runs):  # rounds take turns, so drift hits both alike
                for typed in (False, True):
                    times.setdefault(("cold", typed), []).append(cold(trees[typed]))
                    times.setdefault(("warm", typed), []).append(warm(trees[typed]))
            med = {k: statistics.median(v) for k, v in times.items()}
            if size == sizes[0]:
                headline(f"txcl check, {size:,} rules with schemas, cold", med[("cold", True)] * 1000, "ms",
                         baseline="the same tree without schemas", ratio=med[("cold", True)] / med[("cold", False)],
                         goal="ratio ≤ 2")
            print(f"{size:>6} {med[('cold', False)]:>12.3f}s {med[('cold', True)]:>10.3f}s "
                  f"{med[('cold', True)] / med[('cold', False)]:>5.2f} {med[('warm', False)] * 1000:>11.1f}ms "
                  f"{med[('warm', True)] * 1000:>9.1f}ms {med[('warm', True)] / med[('warm', False)]:>5.2f} "
                  f"{med[('warm', True)] / size * 1e6:>21.1f}")
        print("goal: cold typed / untyped <= 2.00 at 1,000 rules; µs per rule about flat across sizes")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
