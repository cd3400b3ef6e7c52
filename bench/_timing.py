"""Tiny timing helpers shared by the benchmarks: medians of repeated batches."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def median_us(fn: Callable[[], object], number: int = 2000, repeat: int = 9) -> float:
    """Median over `repeat` batches of the per-call CPU time of `fn`, in microseconds.

    CPU time of this thread, not wall time: the machines are shared, and another busy
    process should not count against the code being measured.
    """
    fn()  # warm caches
    samples = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(number):
            fn()
        samples.append((time.thread_time() - start) / number * 1e6)
    return statistics.median(samples)


def report(name: str, value: float, unit: str, target: str = "") -> None:
    extra = f"   (target {target})" if target else ""
    print(f"{name:<58} {value:>10.2f} {unit}{extra}")


def headline(measure: str, value: float, unit: str, *, baseline: str = "", ratio: float | None = None,
             goal: str = "") -> None:
    """One line of `run_all.py`'s closing table: a median, and its ratio against a baseline
    measured in the same run. Written to the file named by TXCL_BENCH_HEADLINES (one JSON
    object per line) when run_all runs the benchmark; a benchmark run alone prints as usual."""
    import json
    import os

    path = os.environ.get("TXCL_BENCH_HEADLINES")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"measure": measure, "value": value, "unit": unit, "baseline": baseline,
                              "ratio": ratio, "goal": goal}) + "\n")
