"""`txcl test --update`: rewrite the `expect.envelope` of failing cases with what they produced
(a snapshot update), in place, keeping the file's comments, order and style (ruamel's round
trip for YAML; JSON is written back with two-space indentation).

Where a case expected a part of the envelope, only that part is refreshed: each expected key
takes the value the run produced (a key the run no longer produces is removed), so the test
keeps asserting what it asserted. A case without `expect.envelope` gets the whole envelope
(without top-level `_` keys).
"""

from __future__ import annotations

import json
from typing import Any

from txcl.ruletest.session import CaseResult, Session


def _refresh(expected: Any, actual: Any) -> Any:
    """`expected`'s shape filled with `actual`'s values (containers updated in place)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in list(expected):
            if key not in actual:
                del expected[key]
            elif isinstance(expected[key], dict) and isinstance(actual[key], dict):
                _refresh(expected[key], actual[key])
            else:
                expected[key] = actual[key]
        return expected
    return actual


def _case_node(document: Any, name: str) -> Any:
    for node in document.get("cases") or []:
        if isinstance(node, dict) and node.get("name") == name:
            return node
    return None


def update_expectations(session: Session) -> int:
    """Rewrite the failing cases' expected envelopes; the number of cases changed."""
    by_file: dict[Any, list[CaseResult]] = {}
    for result in session.failed:
        if result.run is not None and result.run.envelope is not None:
            by_file.setdefault(result.file, []).append(result)
    changed = 0
    files = {f.path: f for f in session.files}
    for path, results in by_file.items():
        test_file = files.get(path)
        if test_file is None:
            continue
        document = test_file.round_trip()
        for result in results:
            node = _case_node(document, result.case.name)
            if node is None:
                continue
            produced = {k: v for k, v in result.run.envelope.items() if not k.startswith("_")}
            expect = node.get("expect")
            if expect is None:
                node["expect"] = {"envelope": produced}
            elif isinstance(expect.get("envelope"), dict):
                _refresh(expect["envelope"], produced)
            else:
                expect["envelope"] = produced
            changed += 1
        if path.name.endswith(".json"):
            path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        else:
            from ruamel.yaml.util import load_yaml_guess_indent

            from txcl.ruletest.spec import _yaml

            _, indent, sequence_offset = load_yaml_guess_indent(test_file.text)
            yaml = _yaml()
            yaml.width = 4096  # never wrap a line the author wrote on one
            sequence, offset = indent or 2, sequence_offset or 0  # "  - key" is sequence 4, offset 2
            yaml.indent(mapping=sequence - offset if sequence > offset else 2, sequence=sequence, offset=offset)
            with open(path, "w", encoding="utf-8") as fh:
                yaml.dump(document, fh)
    return changed


__all__ = ["update_expectations"]
