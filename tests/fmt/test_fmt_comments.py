"""Hypothesis: comments added at line ends and between lines of real rule files all survive
formatting (clauses may move, so their order may change), and formatting stays idempotent."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from txcl.check.analyze import parse
from txcl.check.fix import semantic_json
from txcl.fmt import format_text
from testtools import rule_files

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p.read_text(encoding="utf-8") for p in rule_files(ROOT / "examples")]
SOURCES += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "tests" / "check" / "fixtures" / "rules").glob("TX2*.txcl"))]
SOURCES = [s for s in SOURCES if s.strip() and parse(s, "x")[0] is not None]


@st.composite
def commented(draw):
    text = draw(st.sampled_from(SOURCES))
    lines = text.rstrip("\n").split("\n")
    out = []
    n = 0
    for line in lines:
        if draw(st.integers(0, 3)) == 0:
            out.append(f"# above {n}")
            n += 1
        if draw(st.integers(0, 3)) == 0:
            line = f"{line}  # end {n}"
            n += 1
        out.append(line)
    if draw(st.booleans()):
        out.append(f"# tail {n}")
    return "\n".join(out) + "\n"


def test_there_are_sources() -> None:
    assert len(SOURCES) >= 10


@settings(max_examples=150, deadline=None)
@given(commented())
def test_comments_survive_formatting(text: str) -> None:
    rule, _ = parse(text, "x.txcl")
    if rule is None:  # a line end inside a multi-line string: not a place for a comment
        return
    once = format_text(text, "x.txcl")
    assert format_text(once, "x.txcl") == once
    again, _ = parse(once, "y.txcl")
    assert semantic_json(again) == semantic_json(rule)
    assert sorted(c.text for c in again.comments) == sorted(c.text.rstrip() for c in rule.comments)
