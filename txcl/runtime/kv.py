"""The key-value API shared by the `txco://kv/*` builtins and `OpContext.kv`."""

from __future__ import annotations

import time
from typing import Any, Callable

from txcl.runtime.dispatch import OpError
from txcl.store.errors import KvError
from txcl.store.protocol import KvStore

MAX_KEY_BYTES = 512
MAX_LIST = 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


class Kv:
    """Namespaced kv operations returning the builtins' JSON shapes; raises OpError."""

    def __init__(self, store: KvStore | None, payload_max: int, clock: Callable[[], int] = _now_ms):
        self.store = store
        self.payload_max = payload_max
        self.clock = clock

    def _check(self, op: str, key: Any, ns: Any) -> tuple[str, str]:
        if self.store is None:
            raise OpError(f"txco://kv/{op}: no store is configured")
        if not isinstance(key, str) or key == "":
            raise OpError(f"txco://kv/{op}: WITH key (a non-empty string) is required")
        if len(key.encode("utf-8")) > MAX_KEY_BYTES:
            raise OpError(f"txco://kv/{op}: key is longer than {MAX_KEY_BYTES} bytes")
        if ns is None:
            ns = "default"
        if not isinstance(ns, str) or ns == "":
            raise OpError(f"txco://kv/{op}: ns must be a non-empty string")
        return key, ns

    def _check_value(self, op: str, value: Any) -> None:
        from txcl.values.jsonio import dumps

        if len(dumps(value).encode("utf-8")) > self.payload_max:
            raise OpError(f"txco://kv/{op}: value is larger than --op-payload-max ({self.payload_max} bytes)")

    def get(self, key: Any, ns: Any = None) -> dict:
        key, ns = self._check("get", key, ns)
        entry = self.store.kv_get(ns, key, self.clock())
        if entry is None:
            return {"key": key, "found": False, "value": None, "version": 0}
        return {"key": key, "found": True, "value": entry.value, "version": entry.version}

    def set(self, key: Any, value: Any, ns: Any = None, ttl_ms: int | None = None) -> dict:
        key, ns = self._check("set", key, ns)
        self._check_value("set", value)
        now = self.clock()
        expires = now + ttl_ms if ttl_ms else None
        version = self.store.kv_set(ns, key, value, now, expires)
        return {"key": key, "version": version}

    def delete(self, key: Any, ns: Any = None) -> dict:
        key, ns = self._check("delete", key, ns)
        return {"key": key, "deleted": self.store.kv_delete(ns, key, self.clock())}

    def incr(self, key: Any, by: Any = 1, ns: Any = None) -> dict:
        key, ns = self._check("incr", key, ns)
        if by is None:
            by = 1
        if isinstance(by, bool) or not isinstance(by, int):
            if isinstance(by, float) and by.is_integer():
                by = int(by)
            else:
                raise OpError("txco://kv/incr: by must be an integer")
        try:
            entry = self.store.kv_incr(ns, key, by, self.clock())
        except KvError as exc:
            raise OpError(str(exc)) from None
        return {"key": key, "value": entry.value, "version": entry.version}

    def cas(self, key: Any, value: Any, expect_version: Any, ns: Any = None) -> dict:
        key, ns = self._check("cas", key, ns)
        if isinstance(expect_version, float) and expect_version.is_integer():
            expect_version = int(expect_version)
        if isinstance(expect_version, bool) or not isinstance(expect_version, int) or expect_version < 0:
            raise OpError("txco://kv/cas: expect_version (an integer, 0 = must not exist) is required")
        self._check_value("cas", value)
        ok, entry = self.store.kv_cas(ns, key, value, expect_version, self.clock())
        return {"key": key, "ok": ok, "version": entry.version if entry else 0,
                "value": entry.value if entry else None}

    def list(self, prefix: Any = "", limit: Any = 100, ns: Any = None) -> dict:
        if prefix is None:
            prefix = ""
        if not isinstance(prefix, str):
            raise OpError("txco://kv/list: prefix must be a string")
        _, ns = self._check("list", "x", ns)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            limit = 100
        limit = min(limit, MAX_LIST)
        items, truncated = self.store.kv_list(ns, prefix, limit, self.clock())
        return {"items": [{"key": e.key, "value": e.value, "version": e.version} for e in items],
                "truncated": truncated}
