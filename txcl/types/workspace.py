"""The typed-envelope analysis of a whole workspace, for the tools that ask what the envelope
can hold at a scope (the language server, the REPL, the soundness tests): scan the OPS tree,
analyse each rule (through the check cache), follow the typed stacks.
"""

from __future__ import annotations

import os
from pathlib import Path

from txcl.check.tree import Member, TreeContext
from txcl.types.findings import typed_findings
from txcl.types.flow import Flow


def analyze_workspace(ops_dir: Path, overrides: dict[str, str] | None = None) -> Flow | None:
    """The flow of the tree at `ops_dir` (None when no stack is typed). `overrides` maps an
    absolute rule path to text standing in for the file (an editor's unsaved buffer)."""
    from txcl.check.analyze import analyze
    from txcl.check.cache import AnalysisCache, key_of
    from txcl.check.engine import display_path
    from txcl.ops.scan import scan_ops

    scan = scan_ops(ops_dir)
    if not scan.stack_schemas:
        return None
    cache = AnalysisCache(None)
    members = []
    overrides = overrides or {}
    for entry in scan.entries:
        path = os.path.abspath(entry.path)
        if path in overrides:
            data = overrides[path].encode("utf-8", "surrogatepass")
        else:
            try:
                data = Path(path).read_bytes()
            except OSError:
                continue
        key = key_of(data)
        analysis = cache.get(key)
        if analysis is None:
            analysis = analyze(data, display_path(path), entry.stack)
            cache.put(key, analysis)
        if analysis.facts is not None:
            members.append(Member(display_path(path), entry.stack, entry.scope, entry.name, analysis.facts))
    tree = TreeContext(members)
    _, flow = typed_findings(tree, scan.ops_dir, scan.stack_schemas, scan.op_schemas, lambda p: display_path(p))
    return flow


__all__ = ["analyze_workspace"]
