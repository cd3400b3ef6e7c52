"""The typed-envelope analysis of a whole workspace, for the tools that ask what the envelope
can hold at a scope (the language server, the REPL, the soundness tests): scan the OPS tree,
analyse each rule (through the check cache), follow the typed stacks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from txcl.check.tree import Member, TreeContext
from txcl.errors import Diagnostic, Span
from txcl.types.findings import typed_findings
from txcl.types.flow import Flow
from txcl.types.shape import ABSENT, KNOWN, Shape, describe_types, enum_values, lookup, paths


@attrs.frozen
class Analyzed:
    flow: Flow | None
    findings: list[Diagnostic]
    members: dict[str, Member]  # absolute rule path -> member
    ops_dir: Path


def analyze(ops_dir: Path, overrides: dict[str, str] | None = None) -> Analyzed:
    """Scan, analyse and follow the tree at `ops_dir`. `overrides` maps an absolute path (a
    rule or a schema file) to text standing in for it (an editor's unsaved buffer)."""
    from txcl.check.analyze import analyze as analyze_rule
    from txcl.check.cache import AnalysisCache, key_of
    from txcl.check.engine import display_path
    from txcl.ops.scan import scan_ops

    scan = scan_ops(ops_dir)
    overrides = {os.path.abspath(k): v for k, v in (overrides or {}).items()}
    cache = AnalysisCache(None)
    members: dict[str, Member] = {}
    for entry in scan.entries:
        path = os.path.abspath(entry.path)
        if path in overrides:
            data = overrides[path].encode("utf-8", "surrogatepass")
        else:
            try:
                data = Path(path).read_bytes()
            except OSError:
                continue
        system = entry.stack.startswith("_") and "/" in entry.stack
        key = key_of(data, system)
        analysis = cache.get(key)
        if analysis is None:
            analysis = analyze_rule(data, display_path(path), entry.stack)
            cache.put(key, analysis)
        if analysis.facts is not None:
            members[path] = Member(display_path(path), entry.stack, entry.scope, entry.name, analysis.facts)
        elif path in overrides:  # a buffer mid-edit: its scope is still there, its rule adds nothing
            members[path] = Member(display_path(path), entry.stack, entry.scope, entry.name, {})
    if not scan.stack_schemas:
        return Analyzed(None, [], members, scan.ops_dir)
    tree = TreeContext(list(members.values()))
    schema_texts = {Path(p): t for p, t in overrides.items() if p.endswith(".json")}
    found, flow = typed_findings(tree, scan.ops_dir, scan.stack_schemas, scan.op_schemas,
                                 lambda p: display_path(p), schema_texts=schema_texts)
    return Analyzed(flow, found, members, scan.ops_dir)


def analyze_workspace(ops_dir: Path, overrides: dict[str, str] | None = None) -> Flow | None:
    """The flow of the tree at `ops_dir` (None when no stack is typed)."""
    return analyze(ops_dir, overrides).flow


# ---------------------------------------------------------------- what the editor asks

def _ops_dir_of(path: str | Path) -> Path | None:
    from txcl.ops.tree import WorkspaceNotFound, find_workspace

    try:
        _, ops_dir = find_workspace(Path(path).parent)
    except WorkspaceNotFound:
        return None
    return ops_dir


@attrs.frozen
class ScopeView:
    """What the envelope can hold as the scope of one rule file begins."""

    shape: Shape
    stack: str
    scope: int
    analyzed: Analyzed


def scope_view(path: str | Path, text: str | None = None) -> ScopeView | None:
    """The entry shape at the scope of the rule file `path` (None: not in a typed stack)."""
    ops_dir = _ops_dir_of(path)
    if ops_dir is None:
        return None
    target = os.path.abspath(path)
    analyzed = analyze(ops_dir, {target: text} if text is not None else None)
    member = analyzed.members.get(target)
    if analyzed.flow is None or member is None:
        return None
    state = analyzed.flow.entry.get((member.stack, member.scope))
    if state is None:
        return None
    return ScopeView(state.shape, member.stack, member.scope, analyzed)


def path_entries(shape: Shape) -> list[tuple[tuple[str, ...], Shape]]:
    """Every known path of a shape (not the runtime's `_txc`), for completion."""
    return [(p, s) for p, s in paths(shape) if p and p[0] != "_txc"]


def describe(shape: Shape, certain: bool) -> str:
    """One line: the types (or values), and whether the path is certainly there."""
    what = ", ".join(_json(v) for v in enum_values(shape.enum)) if shape.enum is not None \
        else describe_types(shape.types)
    return f"{what}{'' if certain else ' (maybe missing)'}"


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def hover_markdown(view: ScopeView, segments: tuple[str, ...], shown: str) -> str | None:
    found = lookup(view.shape, segments)
    if found.status == ABSENT:
        return f"`{shown}` is not in the envelope at {view.stack}/{view.scope} on any walk"
    if found.status != KNOWN:
        return f"`{shown}`: anything may be there at {view.stack}/{view.scope} (an object open below, or an " \
               "answer without a schema)"
    shape = found.shape
    lines = [f"`{shown}` — {describe(shape, found.certain)} at {view.stack}/{view.scope}"]
    if shape.description:
        lines.append(shape.description)
    if shape.origins:
        lines.append("from: " + ", ".join(sorted(shape.origins)))
    writers = [f"{m.file}" for m in _writers(view.analyzed, view.stack, segments)]
    if writers:
        lines.append("written by: " + ", ".join(writers[:5]))
    return "\n\n".join(lines)


def _writers(analyzed: Analyzed, stack: str, segments: tuple[str, ...]) -> list[Member]:
    from txcl.check.tree import lineage

    stacks = set(lineage(stack))
    out = []
    for member in analyzed.members.values():
        if member.stack not in stacks:
            continue
        for kind, written, _span, _value in (member.facts.get("flow") or {}).get("writes", ()):
            if kind in ("emit", "post", "select") and tuple(written) == tuple(segments):
                out.append(member)
                break
    return out


def definitions(view: ScopeView, segments: tuple[str, ...]) -> list[tuple[str, Span]]:
    """Where a path comes from: its property in the stack's schema, and the rules that write
    it — (absolute file path, span) each."""
    from txcl.check.facts import span_of

    out: list[tuple[str, Span]] = []
    flow = view.analyzed.flow
    types = flow.stack_types(view.stack) if flow is not None else None
    if types is not None:
        for name in ("input", "output"):
            pointer = _schema_pointer(types.file, f"/$defs/{name}", segments, flow.schemas)
            if pointer is not None:
                file, where = pointer
                out.append((str(file.path), file.positions.span_of(where, key=True)))
    for member in _writers(view.analyzed, view.stack, segments):
        for kind, written, span, _value in (member.facts.get("flow") or {}).get("writes", ()):
            if tuple(written) == tuple(segments):
                out.append((os.path.abspath(member.file), span_of(tuple(span))))
                break
    return out


def _schema_pointer(file: Any, pointer: str, segments: tuple[str, ...], schemas: Any, depth: int = 0):
    """(file, pointer) of the property schema a path names, following `properties`, `items`
    and `$ref`; None when the schema does not declare it."""
    from txcl.types.jsonpos import escape_pointer

    try:
        node = file.at(pointer)
    except KeyError:
        return None
    if depth > 32:
        return None
    if isinstance(node, dict) and isinstance(node.get("$ref"), str):
        found = schemas.resolve(node["$ref"], file)
        if found is not None:
            _, target_file, target_pointer = found
            return _schema_pointer(target_file, target_pointer, segments, schemas, depth + 1)
    if not segments:
        return file, pointer
    if not isinstance(node, dict):
        return None
    head, rest = segments[0], segments[1:]
    props = node.get("properties")
    if isinstance(props, dict) and head in props:
        return _schema_pointer(file, f"{pointer}/properties/{escape_pointer(head)}", rest, schemas, depth + 1)
    if head.isdigit() and isinstance(node.get("items"), dict):
        return _schema_pointer(file, f"{pointer}/items", rest, schemas, depth + 1)
    for key in ("oneOf", "anyOf", "allOf"):
        if isinstance(node.get(key), list):
            for i in range(len(node[key])):
                found = _schema_pointer(file, f"{pointer}/{key}/{i}", segments, schemas, depth + 1)
                if found is not None:
                    return found
    return None


def schema_file_diagnostics(path: str | Path, text: str) -> list[Diagnostic]:
    """The findings of a schema file of an OPS tree, with `text` standing in for it."""
    ops_dir = _ops_dir_of(path)
    if ops_dir is None:
        return []
    target = os.path.abspath(path)
    analyzed = analyze(ops_dir, {target: text})
    from txcl.check.engine import display_path

    shown = display_path(target)
    return [d for d in analyzed.findings if d.file == shown]


__all__ = ["analyze", "analyze_workspace", "scope_view", "hover_markdown", "definitions", "path_entries",
           "schema_file_diagnostics", "ScopeView", "Analyzed", "describe"]
