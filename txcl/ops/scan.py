"""Walking an `OPS/` directory into rule entries, fixtures and layout diagnostics.

`scan_ops` never parses rules: it applies the path rules of the OPS tree and reports
TX120–TX123 plus the list of files it skipped (with reasons), so `txcl check` can reuse it
for its layout rules and TX240.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from txcl.errors import Diagnostic
from txcl.ops.layout import numbered_value, stage_name_problems

FIXTURE_NAMES = ("mock-request.json", "mock-response.json")
STACK_SCHEMA = "schema.json"  # OPS/<stack>/schema.json: the stack's input and output
OP_SCHEMA_SUFFIX = ".schema.json"  # <name>.schema.json beside <name>.txcl: the op's input and output


@attrs.frozen
class RuleEntry:
    """One `.txcl` file placed in the tree (not parsed yet)."""

    path: Path  # absolute file path
    rel: str  # path relative to OPS/, with "/"
    display: str  # path shown in messages
    stack: str
    scope: int
    name: str
    dir_rel: str  # directory relative to OPS/ (fixtures of this directory apply)


@attrs.frozen
class SkippedFile:
    """A file the loader ignores; `reason` is one of: stray, symlink, fixture-outside-scope."""

    path: Path
    rel: str
    display: str
    reason: str
    detail: str


@attrs.frozen
class ScanResult:
    ops_dir: Path
    entries: list[RuleEntry]
    fixtures: dict[str, dict[str, Path]]  # dir_rel -> {fixture file name: path}
    assets: dict[str, Path]  # stack -> its FILES directory
    diagnostics: list[Diagnostic]
    skipped: list[SkippedFile]
    # `.txcl` files that a layout error (TX120–TX123) keeps out of the tree: not loaded, but
    # `txcl check` still parses them so their syntax errors are reported too.
    unplaced: list[Path] = attrs.field(factory=list)
    # typed envelopes: stack -> its schema.json; rule file -> its <name>.schema.json
    stack_schemas: dict[str, Path] = attrs.field(factory=dict)
    op_schemas: dict[Path, Path] = attrs.field(factory=dict)


def display_path(path: Path) -> str:
    """A path relative to the current directory when it lies below it, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def scan_ops(ops_dir: str | Path) -> ScanResult:
    """Scan `ops_dir` (the `OPS/` directory). Layout errors land in `diagnostics`."""
    root = Path(ops_dir).resolve()
    result = ScanResult(root, [], {}, {}, [], [])
    _walk(root, [], result)
    _check_duplicates(result)
    _pair_op_schemas(result)
    result.entries.sort(key=lambda e: (e.stack, e.scope, e.name))
    return result


def _walk(directory: Path, segments: list[str], result: ScanResult) -> None:
    try:
        children = sorted(os.scandir(directory), key=lambda d: d.name)
    except OSError as exc:
        result.diagnostics.append(Diagnostic("TX120", f"{display_path(directory)}: cannot read directory: {exc.strerror}",
                                             file=display_path(directory)))
        return
    inside_scope = any(numbered_value(s) is not None for s in segments)
    for child in children:
        name = child.name
        if name.startswith("."):
            continue
        path = Path(child.path)
        rel = "/".join([*segments, name])
        if child.is_symlink():
            result.skipped.append(SkippedFile(path, rel, display_path(path), "symlink",
                                              "symbolic links are not followed"))
            continue
        if child.is_dir():
            if inside_scope and name.startswith("_"):
                continue  # disabled directory: neither loaded nor reported
            if not inside_scope and name == "FILES" and segments:
                result.assets["/".join(segments)] = path
                continue
            _walk(path, [*segments, name], result)
            continue
        if not child.is_file():
            continue
        _classify_file(path, segments, name, rel, inside_scope, result)


def _classify_file(path: Path, segments: list[str], name: str, rel: str, inside_scope: bool,
                   result: ScanResult) -> None:
    shown = display_path(path)
    if name.endswith(".txcl"):
        entry = _rule_entry(path, segments, name, rel, shown, result)
        if entry is not None:
            result.entries.append(entry)
        else:
            result.unplaced.append(path)
        return
    if name == STACK_SCHEMA and segments and not inside_scope and "FILES" not in segments:
        result.stack_schemas["/".join(segments)] = path
        return
    if name.endswith(OP_SCHEMA_SUFFIX) and inside_scope and "FILES" not in segments:
        result.op_schemas[path] = path  # paired with its rule file by _pair_op_schemas
        return
    if name in FIXTURE_NAMES:
        if inside_scope:
            result.fixtures.setdefault("/".join(segments), {})[name] = path
        else:
            result.skipped.append(SkippedFile(path, rel, shown, "fixture-outside-scope",
                                              f"{name} is only read inside a scope directory"))
        return
    if name.endswith(".md"):
        return
    if "FILES" in segments and inside_scope:
        detail = "a FILES/ directory inside a scope directory is not served"
    else:
        detail = "not a rule (.txcl), fixture or .md file"
    result.skipped.append(SkippedFile(path, rel, shown, "stray", detail))


def _rule_entry(path: Path, segments: list[str], name: str, rel: str, shown: str,
                result: ScanResult) -> RuleEntry | None:
    numbered = [i for i, seg in enumerate(segments) if numbered_value(seg) is not None]
    if not numbered:
        result.diagnostics.append(Diagnostic(
            "TX120",
            f"{shown} is not under a numbered scope directory (OPS/<stack>/<NNNN>/…) and would not be loaded",
            file=shown))
        return None
    outer, inner = numbered[0], numbered[-1]
    if outer == 0:
        result.diagnostics.append(Diagnostic(
            "TX121", f"{shown}: a numbered directory directly under OPS/ has no stack name", file=shown))
        return None
    stack_segments = segments[:outer]
    op_name = "_".join([*segments[inner + 1:], name[: -len(".txcl")]])
    problems = stage_name_problems(stack_segments, op_name, segments[inner])
    if problems:
        for problem in problems:
            result.diagnostics.append(Diagnostic("TX123", f"{shown}: {problem}", file=shown))
        return None
    scope = numbered_value(segments[inner])
    assert scope is not None
    return RuleEntry(path, rel, shown, "/".join(stack_segments), scope, op_name, "/".join(segments))


def _pair_op_schemas(result: ScanResult) -> None:
    """Key each `<name>.schema.json` by the rule file beside it; one with no rule is a stray."""
    found = list(result.op_schemas)
    result.op_schemas.clear()
    placed = {entry.path.parent / entry.path.name: entry for entry in result.entries}
    for path in sorted(found):
        rule = path.with_name(path.name[: -len(OP_SCHEMA_SUFFIX)] + ".txcl")
        if rule in placed:
            result.op_schemas[rule] = path
        else:
            rel = os.path.relpath(path, result.ops_dir).replace(os.sep, "/")
            result.skipped.append(SkippedFile(path, rel, display_path(path), "stray",
                                              f"an op schema needs its rule beside it ({rule.name})"))


def _check_duplicates(result: ScanResult) -> None:
    seen: dict[tuple[str, int, str], RuleEntry] = {}
    keep: list[RuleEntry] = []
    for entry in sorted(result.entries, key=lambda e: e.rel):
        key = (entry.stack, entry.scope, entry.name)
        first = seen.get(key)
        if first is not None:
            result.diagnostics.append(Diagnostic(
                "TX122", f"{entry.display} and {first.display} both define {entry.stack}/{entry.scope}/{entry.name}",
                file=entry.display))
            result.unplaced.append(entry.path)
            continue
        seen[key] = entry
        keep.append(entry)
    result.entries[:] = keep
