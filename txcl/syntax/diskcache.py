"""The parse cache on disk: parse results kept between processes, by the text's content.

`txcl` commands (check, run, serve, test, the language server, …) turn it on at start; a
rule file whose text was parsed before — by any command, under any name — is then read back
in a fraction of a parse (txcl.syntax.codec). It is one SQLite file,
``$XDG_CACHE_HOME/txcl/parse-cache.sqlite3`` (``~/.cache/…`` by default), and only ever a
shortcut:

- **content-hashed**: an entry's key is the SHA-256 of the rule text, so an edited file
  simply misses and is parsed;
- **versioned**: the key also holds a version made of the grammar, the AST's classes and
  fields, the built-in functions (their names decide TX101/TX102) and the txcl and Python
  versions, so an upgrade never reads an entry made by another version;
- **plain data, sealed**: an entry is JSON (never a format whose reader can run code), sealed
  with this user's cache key (txcl.safecache); an entry anyone else wrote — a cache file
  copied from elsewhere, `TXCL_PARSE_CACHE` pointing into a repository — fails the seal and
  is parsed again instead;
- **safe to delete** at any time, also while txcl runs; a damaged, locked or unwritable file
  turns the cache off for that process (parsing goes on as without it).

``TXCL_PARSE_CACHE=off`` turns it off; ``TXCL_PARSE_CACHE=<file>`` puts it elsewhere. New
entries are written in batches (and at exit); at most `MAX_ENTRIES` are kept, the oldest
written dropped first.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import sqlite3
import sys
import threading
from pathlib import Path

from txcl.safecache import CacheDataError, seal, unseal

log = logging.getLogger("txcl.syntax")

MAX_ENTRIES = 50_000
_BATCH = 256  # new entries written per transaction
_MIN_TEXT = 24  # shorter texts parse about as fast as they are looked up


def default_path() -> Path | None:
    """Where the cache lives, from TXCL_PARSE_CACHE or the user's cache folder (None: off)."""
    setting = os.environ.get("TXCL_PARSE_CACHE", "").strip()
    if setting.lower() in ("off", "0", "no", "false", "none"):
        return None
    if setting:
        return Path(setting).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "txcl" / "parse-cache.sqlite3"


def cache_version() -> str:
    """What an entry depends on besides its text (part of every key)."""
    import txcl
    from txcl.functions.registry import REGISTRY
    from txcl.resources import grammar_path
    from txcl.syntax.codec import SCHEMA

    functions = sorted((name, spec.min_args, spec.max_args) for name, spec in REGISTRY.items())
    parts = (grammar_path().read_text(encoding="utf-8"), SCHEMA, repr(functions), txcl.__version__,
             "%d.%d" % sys.version_info[:2])
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:16]


class ParseCache:
    """One cache file (see the module docstring). Thread-safe; every failure turns it off."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._version: str | None = None
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple[str, bytes]] = []
        self._pid = os.getpid()
        self.broken = False
        self.hits = self.misses = 0

    def _connect(self) -> sqlite3.Connection | None:
        if self._pid != os.getpid():  # a forked child (txcl check's workers): a connection of its own
            self._conn, self._pid = None, os.getpid()
            self._pending = []  # the parent writes its own
        if self._conn is None and not self.broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                if not self.path.exists():  # the user's rules are in it: readable by the user only
                    os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
                conn = sqlite3.connect(str(self.path), timeout=0.2, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=OFF")  # a cache: losing the last writes is fine
                conn.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, data BLOB NOT NULL)")
                self._conn = conn
            except (sqlite3.Error, OSError) as exc:
                self._give_up(exc)
        return self._conn

    def _give_up(self, exc: BaseException) -> None:
        log.debug("txcl: parse cache %s turned off: %s", self.path, exc)
        self.broken = True
        self._pending.clear()
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    @property
    def version(self) -> str:
        if self._version is None:
            self._version = cache_version()
        return self._version

    def key(self, text: str) -> str:
        return self.version + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, text: str) -> bytes | None:
        """The stored form of `text`'s parse result (None: not there)."""
        if len(text) < _MIN_TEXT:
            return None
        key = self.key(text)
        with self._lock:
            conn = self._connect()
            if conn is None:
                return None
            try:
                row = conn.execute("SELECT data FROM entries WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                self._give_up(exc)
                return None
        if row is None:
            self.misses += 1
            return None
        try:
            data = unseal(bytes(row[0]), key.encode("ascii"))
        except (CacheDataError, TypeError):
            self.misses += 1
            return None  # not this user's: parsed again, and replaced
        self.hits += 1
        return data

    def put(self, text: str, data: bytes) -> None:
        """Keep `data` for `text` (written with the next batch)."""
        if len(text) < _MIN_TEXT or self.broken:
            return
        with self._lock:
            key = self.key(text)
            self._pending.append((key, seal(data, key.encode("ascii"))))
            if len(self._pending) >= _BATCH:
                self._write()

    def flush(self) -> None:
        """Write the entries not written yet."""
        with self._lock:
            self._write()

    def _write(self) -> None:
        if not self._pending:
            return
        conn = self._connect()
        if conn is None:
            return
        rows, self._pending = self._pending, []
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT OR REPLACE INTO entries (key, data) VALUES (?, ?)", rows)
            count = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
            if count > MAX_ENTRIES:  # the oldest written go first
                conn.execute("DELETE FROM entries WHERE rowid IN (SELECT rowid FROM entries ORDER BY rowid "
                             "LIMIT ?)", (count - MAX_ENTRIES,))
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:  # locked by another process: these entries wait for next time
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if "locked" not in str(exc) and "busy" not in str(exc):
                self._give_up(exc)
        except sqlite3.Error as exc:
            self._give_up(exc)

    def close(self) -> None:
        self.flush()
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None


_ACTIVE: ParseCache | None = None


def active() -> ParseCache | None:
    """The cache parse_rule uses (None: none)."""
    return _ACTIVE


def enable(path: Path | str | None = None) -> ParseCache | None:
    """Use the cache file at `path` (default: `default_path()`) from now on in this process."""
    global _ACTIVE
    where = Path(path) if path is not None else default_path()
    if where is None:
        return None
    if _ACTIVE is not None and _ACTIVE.path == where:
        return _ACTIVE
    disable()
    try:
        _ACTIVE = ParseCache(where)
    except Exception as exc:  # noqa: BLE001 - the cache is an optimisation only
        log.debug("txcl: parse cache not used: %s", exc)
        return None
    return _ACTIVE


def disable() -> None:
    """Stop using the cache (what is pending is written first)."""
    global _ACTIVE
    cache, _ACTIVE = _ACTIVE, None
    if cache is not None:
        cache.close()


def flush() -> None:
    cache = _ACTIVE
    if cache is not None:
        cache.flush()


atexit.register(disable)

__all__ = ["ParseCache", "enable", "disable", "flush", "active", "default_path", "cache_version", "MAX_ENTRIES"]
