"""The instruction-count benchmark's workloads run (without valgrind, which would take
minutes), and its reading of valgrind's summary line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_instructions.py"


@pytest.mark.parametrize("workload", ["walk-off", "walk-summary", "parse", "parse-plain", "cycle", "serve-off", "serve-summary"])
def test_each_workload_runs(workload):
    done = subprocess.run([sys.executable, str(BENCH), "--child", workload, "--n", "3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_an_unknown_workload_is_refused():
    done = subprocess.run([sys.executable, str(BENCH), "--child", "nope", "--n", "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "unknown workload" in done.stderr


def test_the_count_is_read_from_valgrinds_summary():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_instructions
    finally:
        sys.path.remove(str(BENCH.parent))
    found = bench_instructions._COLLECTED.search("==123== Events    : Ir\n==123== Collected : 1816488712\n")
    assert found is not None and int(found.group(1)) == 1816488712
