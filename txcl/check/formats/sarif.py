"""`sarif`: SARIF 2.1.0 with the full rule list (code table + per-rule docs)."""

from __future__ import annotations

import json
import re
from pathlib import PurePath

from txcl.codes import CODES

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _rules() -> list[dict]:
    from txcl.check.docs import DOCS
    from txcl.check.docs import markdown as render_markdown
    rules = []
    for code, info in CODES.items():
        doc = DOCS.get(code)
        full = doc.explanation if doc else info.summary
        markdown = render_markdown(doc) if doc else info.summary
        rules.append({
            "id": code,
            "name": info.name,
            "shortDescription": {"text": info.summary},
            "fullDescription": {"text": full},
            "help": {"text": full, "markdown": markdown},
            "defaultConfiguration": {"level": LEVEL[info.severity]},
            "properties": {"tags": [_family(code)]},
        })
    return rules


def _family(code: str) -> str:
    n = int(code[2:])
    if n < 100:
        return "syntax"
    if n < 200:
        return "load"
    if n < 300:
        return "suspicious"
    return "style"


def _uri(path: str) -> str:
    """A relative reference for relative paths (resolved against the run's directory), a
    file:// URI for absolute ones."""
    pure = PurePath(path)
    if pure.is_absolute():
        return pure.as_uri()
    from urllib.parse import quote
    # A name that is not UTF-8 holds surrogate escapes: quote its original bytes (%FF).
    return quote(pure.as_posix(), errors="surrogateescape")


def as_dict(result) -> dict:
    from txcl import __version__
    index = {code: i for i, code in enumerate(CODES)}
    results = []
    for d in result.diagnostics:
        end_col = d.end_column if d.end_line > d.line else max(d.end_column, d.column + 1)
        region = {"startLine": d.line, "startColumn": d.column,
                  "endLine": max(d.end_line, d.line), "endColumn": end_col}
        item = {
            "ruleId": d.code,
            "level": LEVEL.get(d.severity, "error"),
            "message": {"text": d.message + (f" (hint: {d.hint})" if d.hint else "")},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(d.file)},
                "region": region,
            }}],
        }
        if d.code in index:
            item["ruleIndex"] = index[d.code]
        results.append(item)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "txcl",
                "version": __version__,
                "rules": _rules(),
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


_SURROGATES = re.compile("[\ud800-\udfff]")


def render(result, color: bool = False) -> str:
    # SARIF is UTF-8: a file name that is not (kept as surrogate escapes) shows U+FFFD in
    # messages, as the other formats print it; its URI keeps the real bytes, percent-encoded.
    return _SURROGATES.sub("\ufffd", json.dumps(as_dict(result), indent=2, ensure_ascii=False)) + "\n"
