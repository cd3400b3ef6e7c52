"""An OPS tree's files as last seen, kept between checks of an editor's buffer.

The language server checks the tree-wide rules (deferred joins, stage jumps, typed envelopes)
for the buffer being edited on every keystroke. Scanning the tree, reading every rule and
loading the analysis cache from disk each time made a keystroke cost a second on a 2,000-rule
tree; a snapshot keeps the scan and each file's analysis, and on the next call only stats the
tree's folders and files: a folder whose modification time moved is scanned again (a rule
added, removed or renamed), a file whose time or size moved is read and analysed again.
"""

from __future__ import annotations

import gc
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txcl.check.analyze import Analysis, analyze
from txcl.check.cache import AnalysisCache, key_of

_SNAPSHOTS: dict[str, "TreeSnapshot"] = {}
_LOCK = threading.Lock()
_MAX_SNAPSHOTS = 8


@dataclass
class SeenFile:
    stamp: tuple[int, int]  # (mtime_ns, size)
    shown: str
    analysis: Analysis
    source: str | None


def decode_utf8(data: bytes) -> str | None:
    """A rule file's text, or None when it is not UTF-8 (its finding says so)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_system(stack: str | None) -> bool:
    return bool(stack) and stack.startswith("_") and "/" in stack


class TreeSnapshot:
    """One OPS tree: its scan, the modification times of its folders, each rule's analysis."""

    def __init__(self, workspace: Path, ops_dir: Path) -> None:
        self.workspace = workspace
        self.ops_dir = ops_dir
        self.scan: Any = None
        self.folders: dict[str, int] = {}
        self.files: dict[str, SeenFile] = {}

    def refresh(self, display_path: Any) -> None:
        """Bring the snapshot up to what is on disk now (see the module docstring)."""
        if self.scan is None or self._folders_moved():
            self._rescan()
        cache: AnalysisCache | None = None
        seen: dict[str, SeenFile] = {}
        for entry in self.scan.entries:
            path = os.path.abspath(entry.path)
            try:
                st = os.stat(path)
            except OSError:
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            known = self.files.get(path)
            if known is not None and known.stamp == stamp:
                seen[path] = known
                continue
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if cache is None:
                cache = AnalysisCache(self.workspace)
            shown = display_path(path)
            key = key_of(data, is_system(entry.stack))
            analysis = cache.get(key)
            if analysis is None:
                analysis = analyze(data, shown, entry.stack)
                cache.put(key, analysis)
            seen[path] = SeenFile(stamp, shown, analysis, decode_utf8(data))
        self.files = seen
        if cache is not None:
            cache.save()
            # what was just read lives as long as the snapshot: out of the collector's way, so a
            # keystroke's collection does not walk a whole tree's analyses again and again
            gc.freeze()

    def _folders_moved(self) -> bool:
        for folder, mtime in self.folders.items():
            try:
                if os.stat(folder).st_mtime_ns != mtime:
                    return True
            except OSError:
                return True
        return False

    def _rescan(self) -> None:
        from txcl.ops.scan import scan_ops

        folders: dict[str, int] = {}
        for root, dirs, _files in os.walk(self.ops_dir):  # before the scan: a change during it is seen next time
            try:
                folders[root] = os.stat(root).st_mtime_ns
            except OSError:
                continue
        self.scan = scan_ops(self.ops_dir)
        self.folders = folders


def snapshot_of(workspace: Path, ops_dir: Path) -> TreeSnapshot:
    """The snapshot of the tree at `ops_dir` (made on first use; a few trees are kept)."""
    key = os.path.abspath(ops_dir)
    with _LOCK:
        found = _SNAPSHOTS.get(key)
        if found is None:
            if len(_SNAPSHOTS) >= _MAX_SNAPSHOTS:
                _SNAPSHOTS.pop(next(iter(_SNAPSHOTS)))
            found = _SNAPSHOTS[key] = TreeSnapshot(workspace, ops_dir)
        return found
