"""What every cache txcl reads back from disk is made of: plain JSON, sealed with a key only
this user holds.

A cache file can come from anywhere: a repository can ship `.txcl-data/cache/…` (`git add
-f`), a shared folder can hold another user's. So no cache is ever a format whose reader can
run code or crash on crafted bytes (no pickle, no marshal): entries are JSON, read by a JSON
parser, then validated by their reader. And each entry is *sealed*: an HMAC-SHA256 over its
bytes (and over what it is for, so an entry cannot be moved to another key) with a random key
kept in the user's own cache folder (`$XDG_CACHE_HOME/txcl/cache-key`, readable by the user
only). A file written by anyone else fails the seal and is ignored, then rewritten; so is a
damaged one. Where the key cannot be kept (a read-only home), a key of this process is used:
caches then only last as long as the process.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
from pathlib import Path
from typing import Any

try:  # the compiled JSON parser where it is installed (CPython); the standard library's elsewhere
    import orjson as _orjson
except ImportError:  # pragma: no cover - PyPy
    _orjson = None
import json as _json

KEY_FILE = "cache-key"
_KEY_BYTES = 32
_MAC_BYTES = 32
_MAGIC = b"txcl-sealed-1:"
MAX_DEPTH = 200  # arrays and objects nested deeper are refused by `decode_plain`

_key: bytes | None = None
_key_lock = threading.Lock()


class CacheDataError(ValueError):
    """Cached bytes that are not what txcl wrote (foreign, damaged, or of another shape)."""


def key_path() -> Path:
    """Where this user's cache key lives."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "txcl" / KEY_FILE


def _read_own_key(path: Path) -> bytes | None:
    """The key at `path` when it is ours: a regular file of this user, private, of the right size."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
            return None  # another user's, or readable by others: not a secret
        data = os.read(fd, _KEY_BYTES + 1)
    finally:
        os.close(fd)
    return data if len(data) == _KEY_BYTES else None


def _make_key(path: Path) -> bytes | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            os.write(fd, secrets.token_bytes(_KEY_BYTES))
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails when another process made one first: theirs is used
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    except OSError:
        return None
    return _read_own_key(path)


def user_key() -> bytes:
    """This user's cache key (made on first use); a key of this process where none can be kept."""
    global _key
    if _key is None:
        with _key_lock:
            if _key is None:
                path = key_path()
                _key = _read_own_key(path) or _make_key(path) or secrets.token_bytes(_KEY_BYTES)
    return _key


def reset_key() -> None:
    """Forget the key read (the tests point XDG_CACHE_HOME elsewhere)."""
    global _key
    with _key_lock:
        _key = None


def _mac(purpose: bytes, payload: bytes) -> bytes:
    return hmac.digest(user_key(), len(purpose).to_bytes(4, "big") + purpose + payload, "sha256")


def seal(payload: bytes, purpose: bytes = b"") -> bytes:
    """`payload` with a seal only this user can make (`purpose`: what the entry is for)."""
    return _MAGIC + _mac(purpose, payload) + payload


def unseal(data: bytes, purpose: bytes = b"") -> bytes:
    """The payload `seal` sealed; CacheDataError when the seal is not this user's (or missing)."""
    head = len(_MAGIC)
    if len(data) < head + _MAC_BYTES or not data.startswith(_MAGIC):
        raise CacheDataError("not a sealed cache entry")
    mac, payload = data[head:head + _MAC_BYTES], data[head + _MAC_BYTES:]
    if not hmac.compare_digest(mac, _mac(purpose, payload)):
        raise CacheDataError("the cache entry was not written by this user's txcl")
    return payload


# ---------------------------------------------------------------- plain data as JSON

def dumps(value: Any) -> bytes:
    """JSON bytes of a JSON value (compact)."""
    if _orjson is not None:
        return _orjson.dumps(value)
    return _json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def loads(data: bytes) -> Any:
    """A JSON value from bytes (ValueError when they are not JSON)."""
    if _orjson is not None:
        return _orjson.loads(data)
    return _json.loads(data)


def encode_plain(value: Any) -> bytes:
    """Plain Python data (dict with str keys, list, tuple, str, int, float, bool, None) as JSON
    in which tuples stay tuples: every array is tagged `["(", …]` (tuple) or `["[", …]` (list)."""
    return dumps(_tag(value, 0))


def _tag(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CacheDataError("value nested too deeply to cache")
    kind = type(value)
    if kind is tuple:
        return ["(", *[_tag(item, depth + 1) for item in value]]
    if kind is list:
        return ["[", *[_tag(item, depth + 1) for item in value]]
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise CacheDataError(f"cannot cache a dict key of type {type(key).__name__}")
            out[key] = _tag(item, depth + 1)
        return out
    if kind in (str, int, float, bool) or value is None:
        return value
    raise CacheDataError(f"cannot cache a {kind.__name__}")


def decode_plain(data: bytes) -> Any:
    """What `encode_plain` wrote; CacheDataError for anything else."""
    try:
        raw = loads(data)
    except (ValueError, RecursionError) as exc:
        raise CacheDataError(f"not JSON: {exc}") from None
    return _untag(raw, 0)


def _untag(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CacheDataError("nested too deeply")
    kind = type(value)
    if kind is list:
        if not value or value[0] not in ("(", "["):
            raise CacheDataError("an untagged array")
        items = [_untag(item, depth + 1) for item in value[1:]]
        return tuple(items) if value[0] == "(" else items
    if kind is dict:
        return {key: _untag(item, depth + 1) for key, item in value.items()}
    return value


def digest(*parts: str | bytes) -> str:
    """A short hex digest of `parts` (for versions and fingerprints)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8") if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:32]


__all__ = ["CacheDataError", "seal", "unseal", "user_key", "key_path", "reset_key",
           "encode_plain", "decode_plain", "dumps", "loads", "digest"]
