"""The checker as a library: `check_paths` over files and OPS trees, `check_source` for one
buffer (the LSP and the REPL call it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

import attrs

from txcl.check.analyze import Analysis, analyze
from txcl.check.cache import AnalysisCache, key_of
from txcl.check.config import CheckConfig
from txcl.check.discover import discover
from txcl.check.noqa import apply_noqa
from txcl.check.rules import base as _base
from txcl.check.tree import Member, TreeContext
from txcl.errors import Diagnostic

Progress = Callable[[int, int], None]


@attrs.define
class CheckResult:
    diagnostics: list[Diagnostic]
    files_checked: int
    sources: dict[str, str] = attrs.field(factory=dict)  # display path -> text
    missing: list[str] = attrs.field(factory=list)


def display_path(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _decode(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_source(text: str | bytes, filename: str = "<string>", config: CheckConfig | None = None,
                 stack: str | None = None) -> list[Diagnostic]:
    """Every per-file finding of one buffer (syntax, TX1xx, TX2xx/TX3xx, noqa), filtered by
    `config`. Tree-wide rules need the whole tree: use `check_paths` for them."""
    config = config or CheckConfig()
    data = text.encode("utf-8") if isinstance(text, str) else text
    system = bool(stack) and stack.startswith("_") and "/" in stack
    cache = AnalysisCache(None)
    key = key_of(data, system)
    analysis = cache.get(key)
    if analysis is None:
        analysis = analyze(data, filename, stack)
        cache.put(key, analysis)
    source = _decode(data)
    diags = analysis.materialize(filename, source)
    out = finalize(diags, source, filename, config)
    out.sort(key=lambda d: (d.line, d.column, d.code))
    return out


def finalize(diags: Iterable[Diagnostic], source: str | None, path: str | Path,
             config: CheckConfig) -> list[Diagnostic]:
    """Severity overrides, select/ignore, per-file-ignores and noqa for one file's findings."""
    out: list[Diagnostic] = []
    for d in diags:
        if not config.enabled(d.code) or config.ignored_for(d.code, path):
            continue
        sev = config.severity.get(d.code)
        if sev is not None and sev != d.severity:
            d = attrs.evolve(d, severity=sev)
        out.append(d)
    enabled = lambda code: config.enabled(code) and not config.ignored_for(code, path)
    out = apply_noqa(out, source, report_unused=enabled("TX303"), enabled=enabled)
    for i, d in enumerate(out):
        if d.code == "TX303":
            out[i] = attrs.evolve(d, file=str(path) if d.file == "<string>" else d.file,
                                  severity=config.severity.get("TX303", d.severity))
    return out


def check_paths(paths: Iterable[str | Path] = (".",), config: CheckConfig | None = None, *,
                cache_dir: Path | None | bool = None, progress: Progress | None = None) -> list[Diagnostic]:
    """Check files and OPS trees; the findings, sorted by file, line, column."""
    return run_check(list(paths), config, cache_dir=cache_dir, progress=progress).diagnostics


def run_check(paths: list[str | Path], config: CheckConfig | None = None, *,
              cache_dir: Path | None | bool = None, progress: Progress | None = None) -> CheckResult:
    """`check_paths` with the extras the CLI needs (file count, sources, missing paths).

    `cache_dir`: directory whose `.txcl/cache/` holds the disk cache; None picks the first
    tree's workspace (or the current directory); False disables the disk cache.
    """
    config = config or CheckConfig()
    work = discover(paths or ["."], config)
    if cache_dir is None:
        first = next(iter(work.trees.values()), None)
        cache_dir = first.workspace if first is not None else Path.cwd()
    cache = AnalysisCache(cache_dir if cache_dir else None)
    result = CheckResult([], 0, missing=list(work.missing))

    jobs: list[tuple[Path, str | None, object]] = []  # (file, stack, tree job)
    tree_scans = {}
    for ops_dir, job in work.trees.items():
        scan = _scan(ops_dir)
        tree_scans[ops_dir] = scan
        for entry in scan.entries:
            if config.excluded(entry.path):
                continue
            jobs.append((Path(entry.path), entry.stack, job))
    for path in work.loose:
        jobs.append((path, None, None))

    total = len(jobs)
    analyses: dict[Path, tuple[Analysis, str]] = {}
    for i, (path, stack, job) in enumerate(jobs):
        shown = display_path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            result.diagnostics.append(Diagnostic("TX002", f"cannot read file: {exc.strerror or exc}", file=shown))
            continue
        system = bool(stack) and stack.startswith("_") and "/" in stack
        key = key_of(data, system)
        analysis = cache.get(key)
        if analysis is None:
            analysis = analyze(data, shown, stack)
            cache.put(key, analysis)
        source = _decode(data)
        if source is not None:
            result.sources[shown] = source
        analyses[path] = (analysis, shown)
        if progress is not None:
            progress(i + 1, total)
    cache.save()

    per_file: dict[str, list[Diagnostic]] = {}
    reported: set[str] = set()
    for path, stack, job in jobs:
        if path not in analyses:
            continue
        analysis, shown = analyses[path]
        if job is not None and not job.wants(path):
            continue
        reported.add(shown)
        result.files_checked += 1
        per_file.setdefault(shown, []).extend(analysis.materialize(shown, result.sources.get(shown)))

    for ops_dir, job in work.trees.items():
        scan = tree_scans[ops_dir]
        for d in _layout_diagnostics(scan, config):
            if job.wants(Path(_abs(d.file))):
                per_file.setdefault(d.file, []).append(d)
                reported.add(d.file)
        members = []
        for entry in scan.entries:
            got = analyses.get(Path(entry.path))
            if got is None or got[0].facts is None:
                continue
            members.append(Member(got[1], entry.stack, entry.scope, entry.name, got[0].facts))
        tree = TreeContext(members, source_of=result.sources.get)
        wanted = {m.file for m in members if job.wants(Path(_abs(m.file)))}
        for registered in _base.TREE_RULES:
            if not any(config.enabled(c) for c in registered.codes):
                continue
            for d in registered.fn(tree):
                if d.file in wanted:
                    per_file.setdefault(d.file, []).append(d)

    for shown, diags in per_file.items():
        result.diagnostics.extend(finalize(diags, result.sources.get(shown), _abs(shown), config))
    result.diagnostics.sort(key=lambda d: (d.file, d.line, d.column, d.code))
    return result


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
