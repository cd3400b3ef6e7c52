"""Content-hash cache of per-file analyses.

In process: a dict keyed by the SHA-1 of the file bytes (the LSP and the REPL re-check
unchanged buffers for free). On disk: one JSON file `<dir>/.txcl-data/cache/check-v2.json`
holding `{key: [diagnostics, facts]}` plus a fingerprint of the txcl version and the checker's
own sources, so an upgraded checker never reads stale results. The file is plain data sealed
with this user's cache key (txcl.safecache): a file anyone else wrote — one a repository
ships, say — fails the seal and is ignored, as is a damaged one or one of another shape, and
it is written anew. Nothing in it is ever executed. Writes are atomic (temporary file +
rename).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from txcl.check.analyze import Analysis
from txcl.datadir import data_dir, make
from txcl.safecache import CacheDataError, decode_plain, encode_plain, seal, unseal

_MEMORY: dict[bytes, tuple[Analysis, int]] = {}
_MEMORY_LIMIT = 20000
# The analyses kept in memory are bounded by their weight too (findings and facts held), not
# only their number: a language server re-checking a 200 KB buffer on every keystroke would
# otherwise keep ten megabytes per version.
_MEMORY_WEIGHT_LIMIT = 400_000
_weight = 0
CACHE_NAME = "check-v2.json"
_PURPOSE = b"txcl check cache"


def key_of(data: bytes, system_stack: bool = False) -> bytes:
    h = hashlib.sha1(data)
    if system_stack:
        h.update(b"\0sys")
    return h.digest()


_FINGERPRINT: str | None = None


def fingerprint() -> str:
    """txcl version + size/mtime of the sources that decide a file's findings."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import txcl
        root = Path(txcl.__file__).parent
        h = hashlib.sha1(txcl.__version__.encode())
        for sub in ("check", "check/rules", "syntax", "functions", "values", "_data", "."):
            directory = root / sub
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if sub == "." and entry.name not in ("errors.py", "codes.py", "__init__.py"):
                    continue  # other top-level modules do not decide findings
                if entry.is_file() and entry.name.endswith((".py", ".lark")):
                    st = entry.stat()
                    h.update(f"{sub}/{entry.name}:{st.st_size}:{st.st_mtime_ns}".encode())
        try:
            from txcl.resources import grammar_path
            st = os.stat(grammar_path())
            h.update(f"grammar:{st.st_size}:{st.st_mtime_ns}".encode())
        except Exception:
            pass
        _FINGERPRINT = h.hexdigest()
    return _FINGERPRINT


class AnalysisCache:
    """Memory cache backed by an optional disk file."""

    def __init__(self, directory: Path | None):
        self.path = data_dir(directory) / "cache" / CACHE_NAME if directory is not None else None
        self.disk: dict[bytes, tuple] = {}
        self.dirty = False
        self.used: set[bytes] = set()
        if self.path is not None:
            self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                data = fh.read(_MAX_FILE_BYTES + 1)
        except OSError:
            return
        if len(data) > _MAX_FILE_BYTES:
            return
        try:
            stored = decode_plain(unseal(data, _PURPOSE))
        except CacheDataError:
            return  # another's, damaged or foreign: ignored, and written anew by save()
        if isinstance(stored, dict) and stored.get("fingerprint") == fingerprint():
            self.disk = _valid_entries(stored.get("entries"))

    def get(self, key: bytes) -> Analysis | None:
        hit = _MEMORY.get(key)
        hit = hit[0] if hit is not None else None
        if hit is not None:
            self.used.add(key)
            return hit
        raw = self.disk.get(key.hex())
        if raw is None:
            return None
        analysis = Analysis(raw[0], raw[1])
        _remember(key, analysis)
        self.used.add(key)
        return analysis

    def put(self, key: bytes, analysis: Analysis) -> None:
        _remember(key, analysis)
        self.used.add(key)
        if self.path is not None:
            self.disk[key.hex()] = (tuple(analysis.diagnostics), analysis.facts)
            self.dirty = True

    def save(self) -> None:
        """Write the entries used in this run (old entries for vanished files are dropped)."""
        if self.path is None:
            return
        if not self.dirty and len(self.used) == len(self.disk):
            return
        used = {k.hex() for k in self.used}
        entries = {k: v for k, v in self.disk.items() if k in used}
        try:
            data = seal(encode_plain({"fingerprint": fingerprint(), "entries": entries}), _PURPOSE)
        except CacheDataError:  # a fact that is not plain data: not kept
            return
        try:
            make(self.path.parent.parent)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.path)
            gitignore = self.path.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("*\n", encoding="utf-8")
        except OSError:
            pass


_MAX_FILE_BYTES = 256 * 1024 * 1024


def _valid_diagnostic(d: object) -> bool:
    return (type(d) is tuple and len(d) == 5 and type(d[0]) is str and type(d[1]) is str
            and type(d[2]) is tuple and len(d[2]) == 6 and all(type(n) is int for n in d[2])
            and (d[3] is None or type(d[3]) is str) and d[4] in ("error", "warning", "info"))


def _valid_entries(entries: object) -> dict[str, tuple]:
    """The entries of a read cache that have the shape txcl writes (others are dropped)."""
    if type(entries) is not dict:
        return {}
    out = {}
    for key, value in entries.items():
        if (type(value) is tuple and len(value) == 2 and type(value[0]) is tuple
                and all(_valid_diagnostic(d) for d in value[0])
                and (value[1] is None or type(value[1]) is dict)):
            out[key] = value
    return out


def _weight_of(analysis: Analysis) -> int:
    """About how much an analysis holds: its findings and the facts that grow with the file."""
    facts = analysis.facts or {}
    flow = facts.get("flow") or {}
    return (1 + len(analysis.diagnostics) + len(facts.get("reads", ())) + len(facts.get("writes", ()))
            + len(flow.get("reads", ())) + len(flow.get("writes", ())) + len(flow.get("calls", ())))


def _remember(key: bytes, analysis: Analysis) -> None:
    """Keep an analysis; the oldest go first past the number or the weight limit."""
    global _weight
    weight = _weight_of(analysis)
    old = _MEMORY.pop(key, None)
    if old is not None:
        _weight -= old[1]
    while _MEMORY and (len(_MEMORY) >= _MEMORY_LIMIT or _weight + weight > _MEMORY_WEIGHT_LIMIT):
        try:
            _, (_, dropped) = next(iter(_MEMORY.items()))
            _MEMORY.pop(next(iter(_MEMORY)))
            _weight -= dropped
        except (StopIteration, RuntimeError, KeyError):
            break
    _MEMORY[key] = (analysis, weight)
    _weight += weight


def clear_memory() -> None:
    global _weight
    _MEMORY.clear()
    _weight = 0
