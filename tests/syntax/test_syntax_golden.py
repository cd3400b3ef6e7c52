"""Golden ASTs: each tests/syntax/golden/NAME.txcl parses to the JSON form in NAME.json.

Regenerate after a deliberate AST change with either
    python tests/syntax/test_syntax_golden.py --regen
or  TXCL_REGEN_GOLDEN=1 pytest tests/syntax/test_syntax_golden.py
and review the diff.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from txcl.syntax.ast import to_json
from txcl.syntax.parser import parse_rule

GOLDEN = Path(__file__).resolve().parent / "golden"
SOURCES = sorted(GOLDEN.glob("*.txcl"))


def _render(source: Path) -> str:
    rule = parse_rule(source.read_text(encoding="utf-8"), source.name)
    return json.dumps(to_json(rule), indent=1, ensure_ascii=False) + "\n"


def regenerate() -> None:
    for source in SOURCES:
        source.with_suffix(".json").write_text(_render(source), encoding="utf-8")


def test_there_are_goldens():
    assert len(SOURCES) >= 10


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_golden(source: Path):
    expected_file = source.with_suffix(".json")
    actual = _render(source)
    if os.environ.get("TXCL_REGEN_GOLDEN"):
        expected_file.write_text(actual, encoding="utf-8")
    assert expected_file.exists(), f"missing {expected_file.name}; run with --regen"
    assert json.loads(actual) == json.loads(expected_file.read_text(encoding="utf-8"))


if __name__ == "__main__":
    if "--regen" in sys.argv:
        regenerate()
        print(f"regenerated {len(SOURCES)} goldens in {GOLDEN}")
