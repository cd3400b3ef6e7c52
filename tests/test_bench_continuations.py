"""bench_continuations' same-run baseline: another revision's code measured beside this one's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench" / "bench_continuations.py"


def _worktrees() -> list[str]:
    listed = subprocess.run(["git", "-C", str(REPO), "worktree", "list", "--porcelain"],
                            capture_output=True, text=True, check=True)
    return [line for line in listed.stdout.splitlines() if line.startswith("worktree ")]


def test_a_baseline_revision_is_measured_in_the_same_run_and_its_worktree_removed():
    before = _worktrees()
    done = subprocess.run([sys.executable, str(BENCH), "--backend", "sqlite", "--cycles", "8", "--repeats", "1",
                           "--clients", "1,2", "--baseline", "HEAD"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^sqlite\s+(\d+)\s.*$", done.stdout, re.M)}
    assert set(rows) == {1, 2}, done.stdout
    for row in rows.values():
        # our columns, then the baseline's cycles/s, its CPU ms and the ratio to it
        *_, base_rate, base_cpu, times = row.split()
        assert float(base_rate) > 0 and float(base_cpu) > 0, row
        assert times.endswith("×") and float(times[:-1]) > 0, row
    assert "baseline: HEAD" in done.stdout
    assert _worktrees() == before  # the temporary checkout is gone


def test_a_revision_git_cannot_check_out_is_a_clear_error():
    before = _worktrees()
    done = subprocess.run([sys.executable, str(BENCH), "--backend", "sqlite", "--cycles", "4", "--repeats", "1",
                           "--baseline", "no-such-revision-x"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "--baseline no-such-revision-x: git could not check it out" in done.stderr
    assert "Traceback" not in done.stderr
    assert _worktrees() == before


def test_the_itemized_benchmark_measures_a_baseline_revision_in_the_same_run():
    before = _worktrees()
    done = subprocess.run([sys.executable, str(REPO / "bench" / "bench_itemized.py"), "--backend", "sqlite",
                           "--items", "12", "--window", "4", "--repeat", "1", "--skip-serve", "--baseline", "HEAD"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rate = re.search(r"baseline HEAD: items/s\s+([0-9.]+) items/s", done.stdout)
    ratio = re.search(r"this build / baseline, items/s\s+([0-9.]+) ×", done.stdout)
    assert rate and float(rate.group(1)) > 0 and ratio and float(ratio.group(1)) > 0, done.stdout
    assert _worktrees() == before
