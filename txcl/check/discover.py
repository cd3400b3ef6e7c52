"""Which files and OPS trees `txcl check` / `txcl fmt` look at."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from txcl.check.config import CheckConfig


@attrs.define
class TreeJob:
    ops_dir: Path
    workspace: Path
    whole: bool = False  # report every file of the tree
    roots: list[Path] = attrs.field(factory=list)  # else: only files under these

    def wants(self, path: Path | str) -> bool:
        if self.whole:
            return True
        text = str(path)
        return any(text == str(r) or text.startswith(str(r) + os.sep) for r in self.roots)


@attrs.define
class Work:
    trees: dict[Path, TreeJob] = attrs.field(factory=dict)
    loose: list[Path] = attrs.field(factory=list)
    missing: list[str] = attrs.field(factory=list)


def _ops_ancestor(path: Path) -> Path | None:
    """The nearest ancestor directory named OPS (the tree a path lies in)."""
    for parent in path.parents:
        if parent.name == "OPS":
            return parent
    return None


def discover(paths: list[str | Path], config: CheckConfig) -> Work:
    work = Work()
    for raw in paths:
        path = Path(raw).absolute()
        if not path.exists() and not path.is_symlink():
            work.missing.append(str(raw))
            continue
        if path.is_file():
            ops = _ops_ancestor(path)
            if ops is not None:
                _add_tree(work, ops, path)
            elif not config.excluded(path):
                work.loose.append(path)
            continue
        if path.name == "OPS":
            _add_tree(work, path, None)
        elif (path / "OPS").is_dir():
            _add_tree(work, path / "OPS", None)
        elif (ops := _ops_ancestor(path)) is not None:
            _add_tree(work, ops, path)
        else:
            _search(work, path, config)
    seen: set[Path] = set()
    work.loose = [p for p in work.loose if not (p in seen or seen.add(p))]
    return work


def _add_tree(work: Work, ops: Path, root: Path | None) -> None:
    # the scanner reports resolved paths: compare like with like (symlinked checkouts)
    ops = ops.resolve()
    root = root.resolve() if root is not None else None
    job = work.trees.get(ops)
    if job is None:
        job = work.trees[ops] = TreeJob(ops, ops.parent)
    if root is None:
        job.whole = True
    else:
        job.roots.append(root)


def _search(work: Work, directory: Path, config: CheckConfig) -> None:
    """A directory outside any tree: find trees and loose rule files below it."""
    for dirpath, dirnames, filenames in os.walk(directory):
        here = Path(dirpath)
        if config.excluded(here) and here != directory:
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in
                             ("node_modules", "__pycache__", "venv", ".venv"))
        if "OPS" in dirnames:
            _add_tree(work, here / "OPS", None)
            dirnames.remove("OPS")
        for name in sorted(filenames):
            if name.endswith(".txcl") and not name.startswith("."):
                path = here / name
                if not config.excluded(path):
                    work.loose.append(path)


def rule_files(paths: list[str | Path], config: CheckConfig) -> tuple[list[Path], list[str]]:
    """Every `.txcl` file under `paths` (for fmt): (files, missing paths)."""
    work = discover(paths, config)
    files = list(work.loose)
    for job in work.trees.values():
        for dirpath, dirnames, filenames in os.walk(job.ops_dir):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                path = here / name
                if name.endswith(".txcl") and job.wants(path) and not config.excluded(path):
                    files.append(path)
    return files, work.missing
