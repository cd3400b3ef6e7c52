"""`json`: a JSON array of findings (Diagnostic.to_json plus `fixable`)."""

from __future__ import annotations

import json

from txcl.check.fix import FIXABLE


def as_dicts(result) -> list[dict]:
    out = []
    for d in result.diagnostics:
        item = d.to_json()
        item["fixable"] = d.code in FIXABLE
        out.append(item)
    return out


def render(result, color: bool = False) -> str:
    return json.dumps(as_dicts(result), indent=2, ensure_ascii=False) + "\n"
