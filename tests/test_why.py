"""`txcl why`: a stored request explained — each WHEN condition with both sides and its value, a
rule that lost on PRIORITY, a scope a jump went past, an op that failed and the walk going on;
a request recorded in summary only is explained from its trace, and says what it lacks."""

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
    (Path(__file__).parent / "called").write_text("x")
    return {"price": inp.get("qty", 1) * 7}


def broken(inp, ctx):
    raise RuntimeError("the warehouse is closed")
'''

RULES = {
    "100/price.txcl": 'SELECT .qty\nEXEC "py://ops:price"',
    "100/stock.txcl": 'WHEN .qty > 0\nEXEC "py://ops:broken"',
    "250/cheap.txcl": 'WHEN .price < 10 && .qty == 1\nEMIT .label = "cheap"',
    "200/plain.txcl": 'WHEN .price < 100\nPRIORITY 0\nEMIT .label = "plain"',
    "200/vip.txcl": 'WHEN .price < 100\nPRIORITY 5\nEMIT .label = "vip"',
    "300/jump.txcl": 'EXEC "goto://500"',
    "400/never.txcl": "EMIT .never = true",
    "500/end.txcl": "EMIT .done = true",
}


def txcl(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, *args], cwd=ws, capture_output=True, text=True, timeout=120)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for rel, text in RULES.items():
        path = root / "OPS" / "shop" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    (root / "ops.py").write_text(OPS_PY)
    done = txcl(root, "run", ".", "--input", '{"qty": 1}', "--trace-ops", "answers")
    assert done.returncode == 0, done.stderr
    (root / "called").unlink()
    return root


def _why(ws: Path, *args: str) -> dict:
    done = txcl(ws, "why", "last", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _rule(why: dict, name: str) -> dict:
    return next(r for s in why["scopes"] for r in s["rules"] if r["rule"].endswith("/" + name))


def test_conditions_priority_jumps_and_failures_are_explained(ws):
    why = _why(ws)
    assert why["how"] == "walked again with the recorded op answers" and why["status"] == "completed"
    assert not (ws / "called").exists()  # the op was answered from the recording
    cheap = _rule(why, "cheap")
    assert cheap["verdict"] == "ran"
    assert [(c["condition"], c["left"], c["right"], c["value"]) for c in cheap["conditions"]] == [
        (".price < 10", 7, 10, True), (".qty == 1", 1, 1, True)]
    assert _rule(why, "vip")["verdict"] == "ran"
    plain = _rule(why, "plain")
    assert plain["verdict"] == "lost on priority" and "PRIORITY 0 is below the 5" in plain["detail"]
    stock = _rule(why, "stock")
    assert stock["verdict"] == "failed" and "the warehouse is closed" in stock["detail"]
    skipped = next(s for s in why["scopes"] if s["stage"] == "shop/400")
    assert skipped["entered"] is False and "from shop/300 to shop/500" in skipped["detail"]


def test_the_text_report_and_its_filters(ws):
    done = txcl(ws, "why", "last", "--scope", "250", "--rule", "cheap")
    assert done.returncode == 0, done.stderr
    assert ".price < 10  ->  true   (left 7, right 10)" in done.stdout
    assert "vip" not in done.stdout and "shop/100" not in done.stdout
    unknown = txcl(ws, "why", "01NOPE")
    assert unknown.returncode == 2 and "no stored request 01NOPE" in unknown.stderr


def test_a_summary_trace_is_explained_from_what_it_holds(ws):
    assert txcl(ws, "run", ".", "--input", '{"qty": 2}').returncode == 0
    why = _why(ws)
    assert why["how"] == "from the summary trace" and "--trace-ops answers" in why["note"]
    assert _rule(why, "price")["verdict"] == "ran"
    assert next(s for s in why["scopes"] if s["stage"] == "shop/400")["entered"] is False
