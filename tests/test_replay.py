"""`txcl replay`: recorded requests (`txcl run --trace-ops answers`) walked again through a
changed tree, their ops answered from the recording and never called: a changed rule reports
exactly the requests it affects (exit 1), with a diff and the step where the walk went
otherwise; a changed op input or a new op is "not replayable" unless --mocks answers it; a
request recorded without op answers says how to record one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TXCL = str(Path(sys.executable).parent / "txcl")

OPS_PY = '''
from pathlib import Path


def price(inp, ctx):
    with open(Path(__file__).parent / "calls.txt", "a") as f:
        f.write("x")
    return {"price": inp.get("qty", 1) * 7}
'''


def txcl(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, *args], cwd=ws, capture_output=True, text=True, timeout=120)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "OPS" / "shop" / "100").mkdir(parents=True)
    (ws / "OPS" / "shop" / "200").mkdir(parents=True)
    (ws / "ops.py").write_text(OPS_PY)
    (ws / "OPS" / "shop" / "100" / "price.txcl").write_text('SELECT .qty\nEXEC "py://ops:price"\n')
    (ws / "OPS" / "shop" / "200" / "flag.txcl").write_text("WHEN .price > 10\nEMIT .expensive = true\n")
    for qty in (1, 2, 3):
        done = txcl(ws, "run", ".", "--input", json.dumps({"qty": qty}), "--trace-ops", "answers")
        assert done.returncode == 0, done.stderr
    (ws / "calls.txt").unlink()
    return ws


def _replay(ws: Path, *args: str) -> tuple[int, dict]:
    done = txcl(ws, "replay", "--json", *args)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


def test_an_unchanged_tree_replays_every_request_unchanged_and_calls_nothing(recorded):
    code, report = _replay(recorded)
    assert code == 0, report
    assert (report["replayed"], report["changed"], report["not_replayable"]) == (3, 0, 0)
    assert {r["verdict"] for r in report["requests"]} == {"unchanged"}
    assert not (recorded / "calls.txt").exists()  # the py:// op was answered from the recording


def test_a_changed_rule_reports_exactly_the_requests_it_affects(recorded):
    (recorded / "OPS" / "shop" / "200" / "flag.txcl").write_text("WHEN .price > 5\nEMIT .expensive = true\n")
    code, report = _replay(recorded)
    assert code == 1
    changed = [r for r in report["requests"] if r["verdict"] == "changed"]
    assert len(changed) == 1 and report["changed"] == 1  # qty 1 (price 7): the only one the change moves
    assert changed[0]["diff"] == [{"path": ".expensive", "after": True}]
    assert changed[0]["diverged_at"]["stage"] == "shop/200" and changed[0]["diverged_at"]["rule"] == "flag"
    text = txcl(recorded, "replay")
    assert text.returncode == 1 and "3 replayed, 1 changed, 0 not replayable" in text.stdout
    assert ".expensive: (absent) -> true" in text.stdout


def test_a_changed_op_input_is_not_replayable_unless_mocked(recorded, tmp_path):
    (recorded / "OPS" / "shop" / "100" / "price.txcl").write_text(
        'SELECT .qty AS .count\nEXEC "py://ops:price"\n')
    code, report = _replay(recorded)
    assert code == 0 and report["not_replayable"] == 3
    assert "the input of shop/100/price" in report["requests"][0]["reason"]
    mocks = tmp_path / "mocks.yaml"
    mocks.write_text("shop/100/price: {price: 100}\n")
    code, report = _replay(recorded, "--mocks", str(mocks))
    assert code == 1 and report["changed"] == 3 and report["not_replayable"] == 0
    assert not (recorded / "calls.txt").exists()


def test_a_tree_elsewhere_and_the_filters(recorded, tmp_path):
    other = tmp_path / "other"
    (other / "OPS" / "shop" / "100").mkdir(parents=True)
    (other / "OPS" / "shop" / "100" / "price.txcl").write_text('SELECT .qty\nEXEC "py://ops:price"\n')
    code, report = _replay(recorded, "--tree", str(other))
    assert code == 1 and report["changed"] == 2  # without the flag rule: qty 2 and 3 lose .expensive
    code, report = _replay(recorded, "--limit", "1")
    assert report["replayed"] == 1
    code, report = _replay(recorded, "--stack", "nope")
    assert report["requests"] == []
    bad = txcl(recorded, "replay", "--since", "yesterday")
    assert bad.returncode == 2 and "--since takes a duration" in bad.stderr


def test_a_request_recorded_without_op_answers_says_how_to_record_one(recorded):
    done = txcl(recorded, "run", ".", "--input", '{"qty": 9}')
    assert done.returncode == 0
    code, report = _replay(recorded)
    skipped = [r for r in report["requests"] if r["verdict"] == "not replayable"]
    assert len(skipped) == 1 and "--trace-ops answers" in skipped[0]["reason"]
