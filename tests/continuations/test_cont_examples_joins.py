"""The issue-5 examples run with one command each (their README's): examples/deferred-join
(an in-request merge, then a join suspend and its resume) and examples/payments (40 CSV
records through an out-of-order provider, joined in record order into an output file).
Each starts its worker on a fixed 127.0.0.1 port (named in the example's rules); the test
fails with a clear message when something else holds that port."""

from __future__ import annotations

import csv
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_deferred_join_example_runs_with_one_command():
    if not _port_free(8767):
        pytest.fail("127.0.0.1:8767 is busy; the example's worker needs it")
    result = subprocess.run([sys.executable, str(ROOT / "examples/deferred-join/run.py")], capture_output=True,
                            text=True, timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1. fast worker: HTTP 200 (merged in the request, no 202)" in result.stdout
    assert "2. slow worker: HTTP 202 (suspended at the join)" in result.stdout
    assert '"page": "Research on glaciers' in result.stdout


def test_payments_example_runs_with_one_command():
    if not _port_free(8768):
        pytest.fail("127.0.0.1:8768 is busy; the example's provider needs it")
    out = ROOT / "examples/payments/out/payments-results.csv"
    out.unlink(missing_ok=True)
    result = subprocess.run([sys.executable, str(ROOT / "examples/payments/run.py")], capture_output=True,
                            text=True, timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = list(csv.DictReader(out.open(newline="", encoding="utf-8")))
    with (ROOT / "examples/payments/payments.csv").open(newline="", encoding="utf-8") as f:
        source = list(csv.DictReader(f))
    assert [r["payment_id"] for r in rows] == [r["payment_id"] for r in source]  # record order
    assert {r["status"] for r in rows} == {"approved", "rejected"}
    assert all(r["status"] == "rejected" for r in rows if float(r["amount"]) > 2000)
