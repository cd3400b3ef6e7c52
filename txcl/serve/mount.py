"""The tree `txcl serve` walks: the workspace's OPS tree plus the shipped system stacks.

`stdlib/` is an OPS-like directory; its `_sys/...` stacks are mounted beside the workspace's
rules. A workspace rule with the same (stack, scope, name) replaces the
shipped one; any other workspace rule under `OPS/_sys/...` is added. Loading stays
all-or-nothing: every diagnostic of the workspace is reported together.
"""

from __future__ import annotations

from pathlib import Path

from txcl.ops.scan import scan_ops
from txcl.ops.tree import OpRule, OpsTree, build_tree, find_workspace

SYSTEM_STACKS = ("_sys/health", "_sys/notfound", "_sys/continuation")

_shipped_cache: dict[tuple[str, int], list[OpRule]] = {}


def shipped_system_rules(stdlib: Path | None = None) -> list[OpRule]:
    """The rules of the shipped `_sys/...` packs (parsed once per process and directory)."""
    from txcl.resources import stdlib_dir

    root = (stdlib or stdlib_dir()).resolve()
    key = (str(root), _tree_stamp(root))
    cached = _shipped_cache.get(key)
    if cached is None:
        scan = scan_ops(root)
        scan.entries[:] = [e for e in scan.entries if e.stack.startswith("_sys/")]
        cached = build_tree(scan, root.parent, import_python=False).all_rules()
        _shipped_cache.clear()
        _shipped_cache[key] = cached
    return list(cached)


def _tree_stamp(root: Path) -> int:
    """A cheap change stamp of a directory tree (sum of file mtimes)."""
    total = 0
    for path in root.rglob("*"):
        try:
            total += path.stat().st_mtime_ns
        except OSError:
            continue
    return total


def merge_system_rules(tree: OpsTree, shipped: list[OpRule]) -> OpsTree:
    """`tree` plus every shipped rule whose (stack, scope, name) the tree does not define."""
    own = {(op.stack, op.scope, op.name) for op in tree.all_rules()}
    extra = [op for op in shipped if (op.stack, op.scope, op.name) not in own]
    if not extra:
        return tree
    return OpsTree([*tree.all_rules(), *extra], workspace=tree.workspace, assets=tree.assets)


def load_serve_tree(workspace: str | Path, *, stdlib: Path | None = None) -> OpsTree:
    """Load the workspace's OPS tree and mount the system stacks; raises TxclLoadError."""
    ws, ops_dir = find_workspace(workspace)
    tree = build_tree(scan_ops(ops_dir), ws)
    return merge_system_rules(tree, shipped_system_rules(stdlib))
