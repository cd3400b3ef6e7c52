"""Classifying REPL entries and deciding when a multi-line entry is complete."""

from __future__ import annotations

import pytest

from txcl.repl.entry import parse_entry, is_complete, looks_like_condition


@pytest.mark.parametrize("text,kind", [
    ("", "empty"), ("  # just a comment", "empty"),
    (".help", "meta"), (".set .a 1", "meta"), ("  .quit  ", "meta"),
    ("WHEN .a == 1", "rule"), ("emit .a = 1", "rule"), ("# note\nSET .a = 1", "rule"),
    (".user.id", "expression"), ("&now()", "expression"), (".envelope", "expression"),
    ("= .env", "expression"), (".a == 1", "expression"),
])
def test_classify(text: str, kind: str) -> None:
    assert parse_entry(text).kind == kind


def test_meta_argument_and_forced_expression() -> None:
    entry = parse_entry(".set .a.b  &now() ")
    assert (entry.command, entry.argument) == (".set", ".a.b  &now()")
    assert parse_entry("= .env").text == ".env"


@pytest.mark.parametrize("text,complete", [
    ("WHEN .a == 1", True),
    ("WHEN .a ==", False),                      # error at the end: keep typing
    ("WHEN .a == 1\nSELECT", False),
    ('SET .x = "multi\nline', False),           # unterminated string
    ("EMIT .x = &add(1,", False),
    ("WHEN .a == 1 .b", True),                  # error before the end: show it
    ("WHEN .a ==\n", True),                     # an empty last line submits anyway
    (".user.id", True), ("&add(1,", True),      # expressions are one line
    (".set .a", True),
])
def test_is_complete(text: str, complete: bool) -> None:
    assert is_complete(text) is complete


def test_looks_like_condition() -> None:
    assert looks_like_condition(".a == 1")
    assert looks_like_condition(".a > 1 || .b =~ /x/")
    assert not looks_like_condition('&concat("a==b")')
    assert not looks_like_condition(".a")
