"""Every benchmark in one command, with the machine's yardsticks measured in the same run.

    python bench/run_all.py [--quick] [--only NAME[,NAME…]] [--backend sqlite|postgresql|both]

First the yardsticks (medians): `json.loads` + `json.dumps` of a 1 KB envelope, a bare Lark
parse of one rule with txcl's own grammar, and single-row durable SQLite commits — so a figure
from another day or machine can be read against the speed of the machine it came from. Then
each benchmark runs in its own process (so one's warm caches and garbage do not bend the
next) and prints its medians and its ratios against the baselines it measures itself (bare
Starlette on uvicorn, raw commits of the same backend, …); in a git clone, bench_continuations
also makes its cycles with the txcl the cycle's speed work started from (`CYCLE_BASELINE`), so
the cycle's goal — a multiple of that code's cycles/s — is read in the same run. At the end a table lists every
benchmark with its time and exit status. `--quick` uses smaller sizes (a smoke run of a few
minutes); the default sizes are the ones the notes report. Last comes the headline table:
the figures the speed work is judged by (each benchmark writes its own lines through
`_timing.headline`), each a median with its ratio against a baseline of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _timing import median_us  # noqa: E402

# name -> (arguments for a full run, arguments for --quick); None: the benchmark takes no backend
BENCHMARKS: dict[str, tuple[list[str], list[str], bool]] = {
    "bench_parse": ([], [], False),
    "bench_evaluate": ([], [], False),
    "bench_functions": ([], [], False),
    "bench_walk": ([], ["--n", "500", "--rounds", "3"], False),
    "bench_growth": ([], [], False),
    "bench_scaling": ([], ["--quick", "--rounds", "3"], False),
    "bench_check": ([], ["--files", "200", "--runs", "3"], False),
    "bench_typed_check": ([], ["--sizes", "500,1000", "--runs", "2"], False),
    "bench_validate": ([], ["--requests", "1000", "--rounds", "3"], False),
    "bench_tooling": ([], [], False),
    "bench_ruletest": ([], [], False),
    "bench_serve": ([], ["--seconds", "2", "--rounds", "1"], False),
    "bench_observability": ([], ["--seconds", "2", "--rounds", "1"], False),
    "bench_scale": ([], ["--seconds", "2", "--rounds", "1"], True),
    "bench_pg_driver": ([], ["--n", "500", "--rounds", "1"], False),
    "bench_lsp_navigation": ([], ["--repeat", "10"], False),
    "bench_bigbody": ([], ["--mib", "5"], False),
    "bench_dispatch": ([], ["--posts", "500", "--rounds", "3"], False),
    "bench_store": ([], ["--cycles", "100", "--repeats", "3"], True),
    # (320 cycles a round: with 16 clients, 100 cycles last about a tenth of a second, too short
    # to be steady on a shared machine)
    "bench_continuations": ([], ["--cycles", "320", "--repeats", "3"], True),
    "bench_itemized": ([], ["--items", "200"], True),
    "bench_nodes": ([], ["--runs", "2", "--items", "100", "--repeat", "1"], False),
    "bench_queue": ([], ["--runs", "2", "--items", "100", "--rounds", "1"], True),
    "bench_run_ops": ([], ["--runs", "50", "--beats", "300", "--rounds", "1", "--storm", "200", "--storms", "1"],
                      True),
    "bench_mcp": ([], ["50"], False),
    "bench_ui": ([], ["2000"], False),
    "bench_instructions": ([], ["--n", "128"], False),
}

# bench_continuations measures the durable cycle beside the code it was sped up from (its goal
# is a multiple of that code's cycles/s), when this is a git clone holding that revision.
CYCLE_BASELINE = "b7bf330"  # December 2, 2026: before the work on the cycle's speed


def has_revision(revision: str) -> bool:
    """Whether git can check `revision` out of this repository."""
    if shutil.which("git") is None:
        return False
    found = subprocess.run(["git", "-C", str(HERE.parent), "cat-file", "-e", f"{revision}^{{commit}}"],
                           capture_output=True)
    return found.returncode == 0


ENVELOPE = {"order": {"id": 42, "items": [{"sku": f"sku-{i}", "qty": i, "price": 9.5 + i} for i in range(12)],
                      "customer": {"tier": "gold", "email": "a@example.com", "tags": ["x", "y", "z"]}},
            "_txc": {"rid": "r" * 26, "stack": "shop", "web": {"req": {"method": "POST", "path": "/order"}}}}
RULE = 'WHEN .order.total > 100 && .customer.tier == "gold"\nEMIT .discount = 10, .tagged = true\n'


def yardsticks() -> list[tuple[str, str]]:
    text = json.dumps(ENVELOPE)
    json_us = median_us(lambda: json.dumps(json.loads(text)), 5000)
    from lark import Lark

    from txcl.syntax.parser import grammar_path

    parser = Lark(grammar_path().read_text(encoding="utf-8"), parser="lalr", lexer="contextual")
    lark_us = median_us(lambda: parser.parse(RULE), 300)
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(str(Path(tmp) / "raw.db"), isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        rates = []
        for _ in range(3):
            started = time.perf_counter()
            for i in range(300):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO t (v) VALUES (?)", (f"row-{i}",))
                conn.execute("COMMIT")
            rates.append(300 / (time.perf_counter() - started))
        conn.close()
    return [(f"json.loads + json.dumps, {len(text)} B envelope", f"{json_us:.1f} µs"),
            ("bare Lark parse of one rule (txcl's grammar)", f"{lark_us:.1f} µs"),
            ("raw SQLite commits (WAL, synchronous=FULL)", f"{statistics.median(rates):.0f}/s")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    parser.add_argument("--only", default=None, help="comma-separated benchmark names (e.g. bench_walk)")
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default=None,
                        help="for the benchmarks with a store backend (default: their own, both)")
    args = parser.parse_args()
    wanted = [n.strip() for n in args.only.split(",")] if args.only else list(BENCHMARKS)
    unknown = [n for n in wanted if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    print("== yardsticks of this machine, this run (medians)")
    for what, value in yardsticks():
        print(f"   {what:<55} {value:>12}")
    summary = []
    headlines = Path(tempfile.mkdtemp()) / "headlines.jsonl"
    os.environ["TXCL_BENCH_HEADLINES"] = str(headlines)
    for name in wanted:
        full, quick, has_backend = BENCHMARKS[name]
        extra = list(quick if args.quick else full)
        if has_backend and args.backend:
            extra += ["--backend", args.backend]
        if name == "bench_continuations" and has_revision(CYCLE_BASELINE):
            extra += ["--baseline", CYCLE_BASELINE]
        print(f"\n== {name} {' '.join(extra)}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / f"{name}.py"), *extra])
        summary.append((name, time.perf_counter() - started, code))
    print("\n== summary")
    print(f"   {'benchmark':<22} {'seconds':>8}  status")
    for name, seconds, code in summary:
        print(f"   {name:<22} {seconds:>8.1f}  {'ok' if code == 0 else f'exit {code}'}")
    print_headlines(headlines)
    sys.exit(1 if any(code for _, _, code in summary) else 0)


def print_headlines(path: Path) -> None:
    """The closing table: every headline the benchmarks wrote, in the order they ran."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    if not rows:
        return
    print("\n== headlines (medians; ratio = the figure / its baseline, both measured in this run)")
    wide = max(52, *(len(row["measure"]) for row in rows))  # columns as wide as their longest entry
    base = max(36, *(len(row["baseline"]) for row in rows))
    print(f"   {'measure':<{wide}} {'median':>20}  {'ratio':>6}  {'baseline':<{base}} goal")
    for row in rows:
        value = f"{row['value']:,.1f} {row['unit']}" if row["value"] < 100 else f"{row['value']:,.0f} {row['unit']}"
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else ""
        print(f"   {row['measure']:<{wide}} {value:>20}  {ratio:>6}  {row['baseline']:<{base}} {row['goal']}".rstrip())


if __name__ == "__main__":
    main()
