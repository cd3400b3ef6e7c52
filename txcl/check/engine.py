"""The checker as a library: `check_paths` over files and OPS trees, `check_source` for one
buffer (the LSP and the REPL call it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from txcl.check.analyze import Analysis, analyze
from txcl.check.cache import AnalysisCache, key_of
from txcl.check.config import CheckConfig
from txcl.check.snapshot import decode_utf8 as _decode
from txcl.check.snapshot import is_system
from txcl.check.discover import discover
from txcl.check.mcp_schemas import CODES as _OPT_IN_CODES  # the --mcp-schemas pass
from txcl.check.noqa import apply_noqa
from txcl.check.rules import base as _base
from txcl.check.rules.egress import egress_findings, secret_findings
from txcl.check.rules.loop import loop_max_findings
from txcl.check.tree import Member, TreeContext
from txcl.errors import Diagnostic
from txcl.syntax.batch import parsing_many

Progress = Callable[[int, int], None]


@attrs.define
class CheckResult:
    diagnostics: list[Diagnostic]
    files_checked: int
    sources: dict[str, str] = attrs.field(factory=dict)  # display path -> text
    missing: list[str] = attrs.field(factory=list)


def display_path(path: Path | str) -> str:
    """Relative to the current directory when below it, else absolute."""
    text = os.fspath(path)
    cwd = os.getcwd()
    prefix = cwd if cwd.endswith(os.sep) else cwd + os.sep
    if os.path.isabs(text):
        return text[len(prefix):] if text.startswith(prefix) else text
    try:
        rel = os.path.relpath(text)
    except ValueError:
        return text
    return os.path.abspath(text) if rel.startswith("..") else rel


def check_source(text: str | bytes, filename: str = "<string>", config: CheckConfig | None = None,
                 stack: str | None = None, *, tree_path: Path | None = None) -> list[Diagnostic]:
    """Every per-file finding of one buffer (syntax, TX1xx, TX2xx/TX3xx, noqa), filtered by
    `config`. With `tree_path` (where the buffer's file lies in an OPS tree) the tree-wide
    findings about it are added, the buffer standing in for the file (an editor's view);
    otherwise use `check_paths` for them."""
    config = config or CheckConfig()
    # A lone surrogate (which an editor can send) is kept as its bytes, so it is reported as
    # TX002 at its position rather than failing the encoding.
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    system = is_system(stack)
    if tree_path is not None:  # an editor's buffer: it changes at every keystroke, so it is not kept
        from txcl.syntax.batch import parsing_once

        with parsing_once():
            analysis = analyze(data, filename, stack)
    else:
        cache = AnalysisCache(None)
        key = key_of(data, system)
        analysis = cache.get(key)
        if analysis is None:
            analysis = analyze(data, filename, stack)
            cache.put(key, analysis)
    source = _decode(data)
    diags = analysis.materialize(filename, source)
    diags += loop_max_findings(analysis.facts, config.loop_max, filename, source)
    diags += egress_findings(analysis.facts, config.egress, filename, source)
    diags += secret_findings(analysis.facts, config.secrets, filename, source)
    if tree_path is not None and source is not None:
        diags += [attrs.evolve(d, file=filename)
                  for d in buffer_tree_findings(tree_path, source, config, analysis=analysis, stack=stack)]
    out = finalize(diags, source, filename, config, complete=analysis.facts is not None)
    out.sort(key=lambda d: (d.line, d.column, d.code))
    return out


def finalize(diags: Iterable[Diagnostic], source: str | None, path: str | Path,
             config: CheckConfig, display: str | None = None, complete: bool = True,
             inactive: frozenset[str] = frozenset()) -> list[Diagnostic]:
    """Severity overrides, select/ignore, per-file-ignores and noqa for one file's findings.

    `complete` is False for a file that did not parse: its TX1xx–TX3xx rules did not run,
    so a `# noqa` for them (or a blanket one) is not reported as unused; nor is one for the
    `inactive` codes (those of a pass that did not run, e.g. --mcp-schemas)."""
    out: list[Diagnostic] = []
    for d in diags:
        if not config.enabled(d.code) or config.ignored_for(d.code, path):
            continue
        sev = config.severity.get(d.code)
        if sev is not None and sev != d.severity:
            d = attrs.evolve(d, severity=sev)
        out.append(d)
    def enabled(code: str) -> bool:
        if code == "*":  # a blanket directive
            return complete
        if (not complete and code >= "TX100") or code in inactive:
            return False
        return config.enabled(code) and not config.ignored_for(code, path)
    report = config.enabled("TX303") and not config.ignored_for("TX303", path)
    out = apply_noqa(out, source, report_unused=report, enabled=enabled)
    for i, d in enumerate(out):
        if d.code == "TX303":
            out[i] = attrs.evolve(d, file=display or str(path),
                                  severity=config.severity.get("TX303", d.severity))
    return out


def check_paths(paths: Iterable[str | Path] = (".",), config: CheckConfig | None = None, *,
                cache_dir: Path | None | bool = None, progress: Progress | None = None) -> list[Diagnostic]:
    """Check files and OPS trees; the findings, sorted by file, line, column."""
    return run_check(list(paths), config, cache_dir=cache_dir, progress=progress).diagnostics


PARALLEL_MIN_FILES = 200


def _analyze_chunk(items: list[tuple[bytes, str, str | None]]) -> list[Analysis]:
    with parsing_many():
        return [analyze(data, shown, stack) for data, shown, stack in items]


def _analyze_all(todo: list[tuple[bytes, str, str | None]], jobs: int) -> list[Analysis]:
    """Analyse files, in `jobs` forked worker processes when there are many of them."""
    if jobs <= 1 or len(todo) < PARALLEL_MIN_FILES:
        return _analyze_chunk(todo)
    import multiprocessing
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform
        return _analyze_chunk(todo)
    from txcl.syntax.parser import get_parser
    get_parser()  # built once here, inherited by the workers
    size = -(-len(todo) // jobs)
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    # the parent analyses the first chunk itself while the workers do the rest
    with ctx.Pool(len(chunks) - 1) as pool:
        pending = pool.map_async(_analyze_chunk, chunks[1:])
        parts = [_analyze_chunk(chunks[0])] + pending.get()
    return [a for part in parts for a in part]


def run_check(paths: list[str | Path], config: CheckConfig | None = None, *,
              cache_dir: Path | None | bool = None, progress: Progress | None = None,
              jobs: int = 1, extra: Callable[[dict[str, str]], list[Diagnostic]] | None = None) -> CheckResult:
    """`check_paths` with the extras the CLI needs (file count, sources, missing paths).

    `cache_dir`: directory whose `.txcl-data/cache/` holds the disk cache; None picks the first
    tree's workspace (or the current directory); False disables the disk cache.
    `jobs` > 1 analyses uncached files in that many forked processes (the CLI does this;
    library callers that run threads should keep the default 1).
    `extra(sources)` adds findings of its own (``--mcp-schemas``) before select/ignore/noqa.
    """
    config = config or CheckConfig()
    jobs_n = max(1, jobs)
    work = discover(paths or ["."], config)
    if cache_dir is None:
        first = next(iter(work.trees.values()), None)
        cache_dir = first.workspace if first is not None else Path.cwd()
    cache = AnalysisCache(cache_dir if cache_dir else None)
    result = CheckResult([], 0, missing=list(work.missing))

    jobs: list[tuple[str, str | None, object]] = []  # (absolute file, stack, tree job)
    tree_scans = {}
    for ops_dir, job in work.trees.items():
        scan = _scan(ops_dir)
        tree_scans[ops_dir] = scan
        for entry in scan.entries:
            if config.exclude and config.excluded(entry.path):
                continue
            jobs.append((os.fspath(entry.path), entry.stack, job))
        for path in scan.unplaced:  # reported by its layout error, and parsed all the same
            if not (config.exclude and config.excluded(path)):
                jobs.append((os.fspath(path), None, job))
    for path in work.loose:
        jobs.append((os.fspath(path), None, None))

    total = len(jobs)
    analyses: dict[str, tuple[Analysis, str]] = {}
    pending: list[tuple[str, str, bytes, bytes, str | None]] = []  # path, shown, key, data, stack
    for i, (path, stack, job) in enumerate(jobs):
        shown = display_path(path)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            result.diagnostics.append(Diagnostic("TX002", f"cannot read file: {exc.strerror or exc}", file=shown))
            continue
        system = is_system(stack)
        key = key_of(data, system)
        source = _decode(data)
        if source is not None:
            result.sources[shown] = source
        analysis = cache.get(key)
        if analysis is None:
            pending.append((path, shown, key, data, stack))
            continue
        analyses[path] = (analysis, shown)
        if progress is not None:
            progress(len(analyses), total)
    done = len(analyses)
    if jobs_n > 1 and len(pending) >= PARALLEL_MIN_FILES:
        fresh = _analyze_all([(data, shown, stack) for _, shown, _, data, stack in pending], jobs_n)
        for (path, shown, key, _, _), analysis in zip(pending, fresh):
            cache.put(key, analysis)
            analyses[path] = (analysis, shown)
        if progress is not None:
            progress(total, total)
    else:
        with parsing_many():
            for path, shown, key, data, stack in pending:
                analysis = analyze(data, shown, stack)
                cache.put(key, analysis)
                analyses[path] = (analysis, shown)
                done += 1
                if progress is not None:
                    progress(done, total)
    cache.save()

    per_file: dict[str, list[Diagnostic]] = {}
    reported: set[str] = set()
    complete_of = {shown: analysis.facts is not None for analysis, shown in analyses.values()}
    for path, stack, job in jobs:
        if path not in analyses:
            continue
        analysis, shown = analyses[path]
        if job is not None and not job.wants(path):
            continue
        reported.add(shown)
        result.files_checked += 1
        source = result.sources.get(shown)
        per_file.setdefault(shown, []).extend(analysis.materialize(shown, source))
        per_file[shown].extend(loop_max_findings(analysis.facts, config.loop_max, shown, source))
        per_file[shown].extend(egress_findings(analysis.facts, config.egress, shown, source))
        per_file[shown].extend(secret_findings(analysis.facts, config.secrets, shown, source))

    for ops_dir, job in work.trees.items():
        scan = tree_scans[ops_dir]
        for d in _layout_diagnostics(scan, config):
            if job.wants(_abs(d.file)):
                per_file.setdefault(d.file, []).append(d)
                reported.add(d.file)
        members = []
        wanted = set()
        for entry in scan.entries:
            path = os.fspath(entry.path)
            got = analyses.get(path)
            if got is None or got[0].facts is None:
                continue
            members.append(Member(got[1], entry.stack, entry.scope, entry.name, got[0].facts))
            if job.wants(path):
                wanted.add(got[1])
        tree = TreeContext(members, source_of=result.sources.get)
        for registered in _base.TREE_RULES:
            if not any(config.enabled(c) for c in registered.codes):
                continue
            for d in registered.fn(tree):
                if d.file in wanted:
                    per_file.setdefault(d.file, []).append(d)
        typed = _typed_findings(tree, scan, config)
        _drop_covered(per_file, typed)
        for d in typed:
            if d.file in wanted or (d.file not in complete_of and job.wants(_abs(d.file))):
                per_file.setdefault(d.file, []).append(d)
                if d.source is not None:
                    result.sources.setdefault(d.file, d.source)
                reported.add(d.file)

    if extra is not None:
        checked = {shown: result.sources[shown] for shown in reported if shown in result.sources}
        for d in extra(checked):
            per_file.setdefault(d.file, []).append(d)

    for shown, diags, source in _test_file_findings(paths or ["."], config, work):
        result.files_checked += 1
        result.sources[shown] = source
        per_file.setdefault(shown, []).extend(diags)

    for shown, diags in per_file.items():
        where = _abs(shown) if config.per_file_ignores else shown
        complete = complete_of.get(shown, True)
        result.diagnostics.extend(finalize(diags, result.sources.get(shown), where, config, shown, complete,
                                           inactive=frozenset() if extra is not None else _OPT_IN_CODES))
    result.diagnostics.sort(key=lambda d: (d.file, d.line, d.column, d.code))
    return result


def _drop_covered(per_file: dict[str, list[Diagnostic]], typed: list[Diagnostic]) -> None:
    """In a typed stack, a read of a deferred op's answer before its join is TX262 (with the
    answer's types known); the untyped TX222 at the same place is then left out."""
    early = {(d.file, tuple(d.span)) for d in typed if d.code == "TX262"}
    if not early:
        return
    for file, diags in per_file.items():
        diags[:] = [d for d in diags if not (d.code == "TX222" and (file, tuple(d.span)) in early)]


def _typed_findings(tree: TreeContext, scan: Any, config: CheckConfig) -> list[Diagnostic]:
    """The typed-envelope findings (TX260–TX268) of one tree; none for an untyped tree."""
    from txcl.types.findings import CODES, typed_findings

    if not (scan.stack_schemas or scan.op_schemas) or not any(config.enabled(c) for c in CODES):
        return []
    found, _ = typed_findings(tree, scan.ops_dir, scan.stack_schemas, scan.op_schemas,
                              lambda p: display_path(p), mcp_tools=_cached_mcp_tools(scan.ops_dir.parent))
    return found


def _cached_mcp_tools(workspace: Path) -> Any:
    """The input and output schemas of MCP tools as `txcl check --mcp-schemas` cached them
    (nothing is asked: the typed checks are static)."""
    from txcl.check.mcp_schemas import CACHE_NAME, _load_cache
    from txcl.datadir import data_dir

    cache = _load_cache(data_dir(workspace) / "cache" / CACHE_NAME)
    if not cache:
        return None
    from txcl.types.flow import tool_types

    def lookup(target: str) -> Any:
        url, _, tool = target[len("mcp+"):].partition("#")
        entry = cache.get(url)
        schemas = entry["tools"].get(tool) if entry else None
        return tool_types(url, tool, schemas) if schemas else None
    return lookup


def _abs(shown: str) -> str:
    return os.path.abspath(shown)


def _scan(ops_dir: Path):
    from txcl.ops.scan import scan_ops
    return scan_ops(ops_dir)


def _layout_diagnostics(scan, config: CheckConfig) -> Iterable[Diagnostic]:
    """TX120–TX123 from the tree scanner, TX240 for stray files and links."""
    for d in scan.diagnostics:
        yield attrs.evolve(d, file=display_path(Path(_abs_from_scan(scan, d.file))))
    for skipped in scan.skipped:
        if config.allowed_extra(skipped.path) or config.excluded(skipped.path):
            continue
        yield Diagnostic("TX240", skipped.detail,
                         file=display_path(Path(skipped.path)),
                         hint="remove or rename it, or allow it with `allow = [...]` in [tool.txcl.check]")


def _abs_from_scan(scan, file: str) -> str:
    return file if os.path.isabs(file) else os.path.abspath(file)


def _test_file_findings(paths: list[str | Path], config: CheckConfig, work: Any) -> list[tuple[str, list, str]]:
    """Rule test files (`*.test.yaml`, `*.test.yml`, `*.test.json`) under `paths`: their TX4xx
    findings, with the OPS tree's checks (stacks, unused mocks) when the workspace loads."""
    from txcl.ruletest.spec import discover as discover_tests
    from txcl.ruletest.spec import read_test_file

    out = []
    files = [f for f in discover_tests(paths) if not (config.exclude and config.excluded(f))]
    trees: dict[Path, Any] = {}
    for path in files:
        test_file, diags = read_test_file(path)
        shown = display_path(path)
        if test_file is not None:
            tree = _tree_near(path, trees)
            if tree is not None:
                from txcl.ruletest.session import tree_checks

                diags = diags + tree_checks(tree, test_file)
        text = test_file.text if test_file is not None else path.read_text(encoding="utf-8", errors="replace")
        out.append((shown, [attrs.evolve(d, file=shown, source=text) for d in diags], text))
    return out


def _tree_near(path: Path, trees: dict[Path, Any]) -> Any:
    """The loaded OPS tree of the workspace holding `path` (None when there is none, or it
    does not load: its own findings say why)."""
    from txcl.errors import TxclError
    from txcl.ops.tree import WorkspaceNotFound, find_workspace, load_ops

    try:
        workspace, _ = find_workspace(path.parent)
    except WorkspaceNotFound:
        return None
    if workspace not in trees:
        try:
            trees[workspace] = load_ops(workspace, import_python=False)
        except (TxclError, OSError):
            trees[workspace] = None
    return trees[workspace]


def buffer_tree_findings(path: Path, text: str, config: CheckConfig | None = None, *,
                         analysis: Analysis | None = None, stack: str | None = None) -> list[Diagnostic]:
    """The tree-wide findings (deferred joins, stage jumps: TX22x, TX23x) that concern one rule
    file of an OPS tree, with `text` standing in for the file on disk — an editor's unsaved
    buffer. The other files come from the disk (through a snapshot of the tree, see
    txcl/check/snapshot.py). `analysis`: the buffer's, when the caller has it (made for the
    same stack). Empty outside a tree, or for a file the tree does not place."""
    from txcl.ops.tree import WorkspaceNotFound, find_workspace

    config = config or CheckConfig()
    try:
        workspace, ops_dir = find_workspace(path.parent)
    except WorkspaceNotFound:
        return []
    from txcl.check.snapshot import snapshot_of

    target = os.path.abspath(path)
    snapshot = snapshot_of(workspace, ops_dir)
    snapshot.refresh(display_path)
    scan = snapshot.scan
    members: list[Member] = []
    sources: dict[str, str] = {}
    shown_target = None
    for entry in scan.entries:
        entry_path = os.path.abspath(entry.path)
        if entry_path == target:  # the buffer stands in for the file: analysed, not kept (it changes
            shown = shown_target = display_path(entry_path)  # at every keystroke)
            found_here = analysis if analysis is not None and stack == entry.stack else \
                analyze(text.encode("utf-8"), shown, entry.stack)
            source: str | None = text
        else:
            seen = snapshot.files.get(entry_path)
            if seen is None:
                continue
            shown, found_here, source = seen.shown, seen.analysis, seen.source
        if source is not None:
            sources[shown] = source
        if found_here.facts is not None:
            members.append(Member(shown, entry.stack, entry.scope, entry.name, found_here.facts))
    if shown_target is None:
        return []
    tree = TreeContext(members, source_of=sources.get)
    found: list[Diagnostic] = []
    for registered in _base.TREE_RULES:
        if any(config.enabled(c) for c in registered.codes):
            found.extend(d for d in registered.fn(tree) if d.file == shown_target)
    found.extend(d for d in _typed_findings(tree, scan, config) if d.file == shown_target)
    return found  # (unfiltered: `check_source` applies the configuration and noqa with the file's own)
