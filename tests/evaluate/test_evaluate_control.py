"""@delete, @halt and @goto."""

from __future__ import annotations

import pytest

from txcl.evaluate.control import Control, apply_delete, read_control


def test_delete_string_and_list_then_removes_itself() -> None:
    env = {"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2, 3], "_txc": {"delete": [".a", "b.c", "l.0", 5]}}
    assert apply_delete(env) == []
    assert env == {"b": {"d": 3}, "l": [2, 3], "_txc": {}}
    env = {"a": 1, "_txc": {"delete": " .a "}}
    apply_delete(env)
    assert env == {"_txc": {}}


def test_delete_reserved_refused_inbound_body_allowed() -> None:
    env = {"_txc": {"rid": "r", "web": {"req": {"body": "x", "path": "/"}}, "delete": ["@rid", "@web.req.body"]}}
    assert apply_delete(env) == ["@rid"]
    assert env == {"_txc": {"rid": "r", "web": {"req": {"path": "/"}}}}


@pytest.mark.parametrize(
    "txc,expected,left",
    [
        ({"halt": True}, Control(halt=True), {}),
        ({"halt": "true", "goto": "300"}, Control(halt=True), {}),
        ({"halt": False}, Control(), {"halt": False}),
        ({"goto": "300"}, Control(goto=("shop", 300)), {}),
        ({"goto": 300}, Control(goto=("shop", 300)), {}),
        ({"goto": "billing/100", "route": "x"}, Control(goto=("billing", 100)), {}),
        ({"goto": "a/b/0100"}, Control(goto=("a/b", 100)), {}),
        ({"goto": "nowhere"}, Control(error='invalid @goto target "nowhere"'), {}),
    ],
)
def test_read_control(txc: dict, expected: Control, left: dict) -> None:
    env = {"_txc": dict(txc)}
    assert read_control(env, "shop") == expected
    assert env["_txc"] == left
