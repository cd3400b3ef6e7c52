"""Run-time validation follows JSON Schema exactly, `format` included (dates, e-mail addresses,
…), and names each problem by its JSON pointer."""

from __future__ import annotations

from txcl.types.validate import compile_definition


def test_formats_are_checked_and_problems_named_by_pointer():
    doc = {"$defs": {"input": {"type": "object", "properties": {
        "at": {"type": "string", "format": "date-time"}, "mail": {"format": "email"},
        "n": {"type": "integer", "minimum": 1}}, "additionalProperties": False}}}
    validator = compile_definition(doc, "input", None, lambda path: {})
    assert validator.errors({"at": "2026-01-01T00:00:00Z", "mail": "a@b.example", "n": 2}) == []
    found = {e["pointer"]: e["message"] for e in validator.errors({"at": "yesterday", "mail": "nope", "n": 0,
                                                                   "x": 1})}
    assert set(found) == {"/at", "/mail", "/n", ""}
    assert "date-time" in found["/at"] and "email" in found["/mail"] and "minimum" in found["/n"].lower() \
        or "less than" in found["/n"]
    assert compile_definition(doc, "output", None, lambda path: {}) is None
