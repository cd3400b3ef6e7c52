"""reserved: author-writable prefixes, reserved paths, delete-only facts, sanitising."""

from __future__ import annotations

import copy

import pytest

from txcl.values.reserved import (
    AUTHOR_WRITABLE, DELETE_ONLY_INBOUND, is_author_writable, is_deletable, is_reserved,
    sanitize_untrusted,
)


@pytest.mark.parametrize("path", [
    "a", "a.b", "_txcx.y", "_txc.web.res", "_txc.web.res.status", "_txc.web.res.headers.x.0",
    "_txc.lmtp.res.code", "_txc.goto", "_txc.halt", "_txc.delete", "_txc.telemetry.m.x",
    "_txc.llm.reject", "_txc.llm.upstream", "_txc.llm.headers.a", "_txc.llm.context",
])
def test_author_writable(path):
    segs = tuple(path.split("."))
    assert is_author_writable(segs)
    assert not is_reserved(segs)


@pytest.mark.parametrize("path", [
    "_txc", "_txc.ttl", "_txc.src", "_txc.rid", "_txc.stack", "_txc.tenant", "_txc.route",
    "_txc.fuel_used", "_txc._seen", "_txc.web", "_txc.web.req", "_txc.web.req.body",
    "_txc.lmtp", "_txc.llm", "_txc.llm.other", "_txc.continuation", "_txc.mocks",
    "_txc.computed.x", "_txc.flag_x", "_txc.gotox", "_txc.web.resx",
])
def test_reserved(path):
    segs = tuple(path.split("."))
    assert is_reserved(segs)
    assert not is_author_writable(segs)


def test_tables():
    assert ("_txc", "web", "res") in AUTHOR_WRITABLE and len(AUTHOR_WRITABLE) == 10
    assert ("_txc", "web", "req", "body") in DELETE_ONLY_INBOUND and len(DELETE_ONLY_INBOUND) == 12
    assert is_author_writable(())


@pytest.mark.parametrize("path,ok", [
    ("_txc.web.req.body", True), ("_txc.calendar.prior", True), ("_txc.websocket.msg.data", True),
    ("_txc.web.req", False), ("_txc.rid", False), ("a.b", True), ("_txc.halt", True),
])
def test_is_deletable(path, ok):
    assert is_deletable(tuple(path.split("."))) is ok


def test_sanitize_keeps_writable_and_reports_dropped():
    out = {
        "x": 1,
        "_txc": {
            "rid": "r", "ttl": 1, "goto": "1",
            "web": {"req": {"body": "b"}, "res": {"status": 200}},
            "llm": {"reject": True, "secret": 1},
        },
    }
    before = copy.deepcopy(out)
    clean, dropped = sanitize_untrusted(out)
    assert clean == {"x": 1, "_txc": {"goto": "1", "web": {"res": {"status": 200}},
                                      "llm": {"reject": True}}}
    assert sorted(dropped) == ["._txc.llm.secret", "._txc.rid", "._txc.ttl", "._txc.web.req"]
    assert out == before


def test_sanitize_nothing_to_drop_returns_same_object():
    out = {"a": 1, "_txc": {"halt": True}}
    clean, dropped = sanitize_untrusted(out)
    assert clean is out and dropped == []
    clean, dropped = sanitize_untrusted({"a": 1})
    assert clean == {"a": 1} and dropped == []


def test_sanitize_non_object_txc_and_empty_result():
    assert sanitize_untrusted({"_txc": 5, "a": 1}) == ({"a": 1}, ["._txc"])
    assert sanitize_untrusted({"_txc": {"rid": 1}}) == ({}, ["._txc.rid"])
    assert sanitize_untrusted({"_txc": {"web": "x"}}) == ({}, ["._txc.web"])


def test_sanitize_escapes_path_text():
    _, dropped = sanitize_untrusted({"_txc": {"a.b": 1}})
    assert dropped == ["._txc.a\\.b"]
