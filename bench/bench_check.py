"""Benchmark `txcl check` over a generated OPS tree of 1,000 rule files.

cold: a fresh process with no parse cache (`--no-cache`);
warm: a fresh process reading the content-hash cache under <workspace>/.txcl/cache/.
Also the in-process library call (`check_paths`) with the cache warm in memory.
Prints medians, files/s and the ratio to the targets (cold <= 1 s, warm <= 250 ms).

    python bench/bench_check.py [--files 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEMPLATES = [
    'WHEN .order.total >= {n} && @src == "http"\nSET .order.currency = "EUR"\n'
    'SELECT .order.id AS .id, .order.total AS .amount, .customer.tier AS .tier DEFAULT "basic"\n'
    'WITH timeout = "3s", into = "pricing_{n}"\nEXEC "https://pricing.example.net/discount"\n'
    'EMIT .pricing.checked_at = &now("rfc3339")\n',
    '# rule {n}\nWHEN .status == "open", .retries < {n}\nEMIT .next = &concat("step-", .id), .n = {n}\n',
    'WHEN .items.0.sku =~ /^SKU-[0-9]+$/ || !(.flag == true)\nSET .seen = {n}\nEXEC "txco://echo"\n'
    'LOOP UNTIL .done == true EVERY "250ms" MAX 5\n',
    'SELECT *\nSET .audit.at = &now("rfc3339")\nWITH mode = "async", join_at_scope = 900\n'
    'EXEC "https://worker.example.net/job/{n}"\n',
]


def generate(root: Path, count: int) -> None:
    ops = root / "OPS"
    for i in range(count):
        stack = f"stack{i % 10}"
        scope = 100 * (1 + (i // 10) % 10)
        path = ops / stack / f"{scope:04d}_s" / f"rule_{i:04d}.txcl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TEMPLATES[i % len(TEMPLATES)].format(n=i), encoding="utf-8")


def run_cli(root: Path, *extra: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "txcl", "check", "-q", "--exit-zero",
                           "--output-format", "concise", *extra], cwd=root, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"txcl check failed: {proc.stderr}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="txcl-bench-check-"))
    try:
        generate(root, args.files)
        startup = statistics.median(_time([sys.executable, "-c", "import txcl.cli.main"], root) for _ in range(3))
        cold, cold1 = [], []
        for _ in range(args.runs):  # interleaved, so load from other processes hits both alike
            cold.append(run_cli(root, "--no-cache"))
            cold1.append(run_cli(root, "--no-cache", "--jobs", "2"))
        shutil.rmtree(root / ".txcl-data", ignore_errors=True)
        run_cli(root)  # fills the cache
        warm = [run_cli(root) for _ in range(args.runs)]
        if os.environ.get("TXCL_BENCH_VERBOSE"):
            print("warm samples:", " ".join(f"{w * 1000:.0f}" for w in warm))

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        os.chdir(root)
        from txcl.check import check_paths
        check_paths(["."], cache_dir=False)
        from txcl.ops.scan import scan_ops
        scan = []
        for _ in range(args.runs):
            t = time.perf_counter()
            scan_ops(root / "OPS")
            scan.append(time.perf_counter() - t)
        lib = []
        for _ in range(args.runs):
            t = time.perf_counter()
            check_paths(["."], cache_dir=False)
            lib.append(time.perf_counter() - t)

        n = args.files
        for label, samples, target in (("cold (fresh process, no cache)", cold, 1.0),
                                       ("cold, two processes (--jobs 2)", cold1, 1.0),
                                       ("warm (fresh process, disk cache)", warm, 0.25),
                                       ("library, warm in memory", lib, None),
                                       ("  of which the OPS tree scan", scan, None)):
            med = statistics.median(samples)
            ratio = f"  {med / target:.2f}x of target {target * 1000:.0f} ms" if target else ""
            print(f"{label:36s} median {med * 1000:7.1f} ms  {n / med:8.0f} files/s{ratio}")
        print(f"{'CLI import (txcl.cli.main)':36s} median {startup * 1000:7.1f} ms")
        print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _time(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
