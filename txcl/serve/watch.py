"""`--watch`: reload the OPS tree when its files change, for new requests only.

Polls file modification times (no extra dependency; an OPS tree is small). A change is
reloaded in a worker thread; when the new tree loads and still fits the routes it replaces
the old one between requests, otherwise the errors are logged and the previous tree stays.
In-flight requests always finish on the tree they started with. Python modules named by
`py://` targets are not re-imported (Python caches them); restart for those.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from txcl.errors import TxclLoadError
from txcl.runtime.config import ConfigError

log = logging.getLogger("txcl.serve")

DEFAULT_INTERVAL = 0.5

Signature = frozenset[tuple[str, int, int]]


def tree_signature(ops_dir: Path) -> Signature:
    """(path, mtime_ns, size) of every file below `ops_dir` (hidden ones included: cheap)."""
    out: set[tuple[str, int, int]] = set()
    for root, dirs, files in os.walk(ops_dir):
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            out.add((path, st.st_mtime_ns, st.st_size))
        out.add((root, 0, len(files) + len(dirs)))
    return frozenset(out)


class Watcher:
    def __init__(self, state: Any, interval: float = DEFAULT_INTERVAL):
        from txcl.ops.tree import find_workspace

        self.state = state
        self.interval = interval
        self.ops_dir = find_workspace(state.workspace)[1]
        self.signature: Signature | None = None
        self.reloads = 0
        self.failures = 0

    async def run(self) -> None:
        self.signature = await asyncio.to_thread(tree_signature, self.ops_dir)
        log.info("txcl: watching %s for changes", self.ops_dir)
        while True:
            await asyncio.sleep(self.interval)
            await self.check()

    async def check(self) -> bool:
        """Reload when the files changed since the last look; True when a new tree is in use."""
        current = await asyncio.to_thread(tree_signature, self.ops_dir)
        if current == self.signature:
            return False
        self.signature = current
        return await self.reload()

    async def reload(self) -> bool:
        from txcl.errors import render_all
        from txcl.serve.mount import load_serve_tree

        try:
            tree = await asyncio.to_thread(load_serve_tree, self.state.workspace)
            self.state.install_tree(tree)
        except TxclLoadError as exc:
            self.failures += 1
            n = len(exc.diagnostics)
            log.error("txcl: reload failed (%d error%s); keeping the previous tree\n%s", n, "s" if n != 1 else "",
                      render_all(exc.diagnostics))
            return False
        except ConfigError as exc:
            self.failures += 1
            log.error("txcl: reload failed; keeping the previous tree: %s", exc)
            return False
        except Exception as exc:  # noqa: BLE001 - a bad edit must never stop the server
            self.failures += 1
            log.error("txcl: reload failed; keeping the previous tree: %s: %s", type(exc).__name__, exc)
            return False
        self.reloads += 1
        log.info("txcl: reloaded the OPS tree (%d rules, generation %d)", len(tree), self.state.generation)
        return True
