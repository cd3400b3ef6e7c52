"""One entry per rule code: the table in txcl/codes.py feeds the rule registry, the docs,
`txcl rule`, SARIF and `--fix`; the rule modules are found without a list of them."""

from __future__ import annotations

from pathlib import Path

from txcl.check.rules import load_rule_modules
from txcl.check.rules.base import FILE_RULES, TREE_RULES
from txcl.codes import CODES, FIXABLE


def test_every_rule_module_is_found_without_a_list():
    folder = Path(__import__("txcl.check.rules", fromlist=["x"]).__file__).parent
    on_disk = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    assert load_rule_modules() == on_disk
    assert {"with_", "joins", "style", "loop"} <= set(on_disk)


def test_every_registered_rule_reports_only_codes_of_the_table():
    load_rule_modules()
    named = {code for rule in FILE_RULES + TREE_RULES for code in rule.codes}
    assert named and named <= set(CODES), sorted(named - set(CODES))


def test_every_code_has_its_whole_entry():
    for code, entry in CODES.items():
        assert entry.code == code and entry.severity in ("error", "warning", "info"), code
        assert entry.name and entry.summary and entry.explanation and entry.bad and entry.good, code


def test_fixable_codes_and_fixers_are_the_same_set():
    from txcl.check.fix import FIXERS

    assert set(FIXERS) == FIXABLE == {"TX201", "TX301", "TX302"}


def test_the_entry_feeds_txcl_rule_sarif_and_the_reference_page():
    from txcl.check.docs import text
    from txcl.check.formats.sarif import _rules as rules_metadata
    from txcl.docsgen import rule_codes_page

    entry = CODES["TX301"]
    assert text(entry).startswith("TX301 clause-order (info) (safe fix: txcl check --fix)")
    assert entry.explanation in rule_codes_page()
    rules = {r["id"]: r for r in rules_metadata()}
    assert rules["TX301"]["fullDescription"]["text"] == entry.explanation
