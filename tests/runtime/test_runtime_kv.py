"""The kv API behind `txco://kv/*` and `OpContext.kv`, on each store backend."""

from __future__ import annotations

import pytest

from txcl.runtime.dispatch import OpError
from txcl.runtime.kv import Kv
from txcl.store import open_store


@pytest.fixture
def kv(db_url):
    now = [1_000]
    store = open_store(db_url)
    yield Kv(store, payload_max=200, clock=lambda: now[0]), now
    store.close()


def test_expiry_reads_as_missing(kv):
    api, now = kv
    assert api.set("k", {"a": 1}, ttl_ms=500) == {"key": "k", "version": 1}
    assert api.get("k")["found"] is True
    now[0] += 500
    assert api.get("k") == {"key": "k", "found": False, "value": None, "version": 0}
    assert api.list()["items"] == []
    assert api.incr("k", 2)["value"] == 2  # an expired key counts as missing


def test_namespaces_and_prefix_listing(kv):
    api, _ = kv
    api.set("user:1", 1)
    api.set("user:2", 2)
    api.set("User:3", 3)  # prefix match is case-sensitive
    api.set("user:1", "other-ns", ns="b")
    listed = api.list(prefix="user:")
    assert [i["key"] for i in listed["items"]] == ["user:1", "user:2"] and listed["truncated"] is False
    assert api.get("user:1", ns="b")["value"] == "other-ns"


def test_limits(kv):
    api, _ = kv
    with pytest.raises(OpError, match="larger than --op-payload-max"):
        api.set("big", "x" * 500)
    with pytest.raises(OpError, match="longer than 512 bytes"):
        api.get("k" * 513)
    with pytest.raises(OpError, match="key"):
        api.get("")
    with pytest.raises(OpError, match="by must be an integer"):
        api.incr("n", "two")


def test_cas_versions(kv):
    api, _ = kv
    assert api.cas("c", 1, 0)["ok"] is True
    assert api.cas("c", 2, 0) == {"key": "c", "ok": False, "version": 1, "value": 1}
    assert api.cas("c", 2, 1) == {"key": "c", "ok": True, "version": 2, "value": 2}
    assert api.delete("c") == {"key": "c", "deleted": True}
    assert api.delete("c") == {"key": "c", "deleted": False}
