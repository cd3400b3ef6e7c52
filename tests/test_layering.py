"""The layers of the store and the continuations: each module imports alone, no import cycle
within `txcl/store/` and `txcl/continuations/`, dependencies one way (the store never imports
the continuations, serve or cli; the runtime never imports the continuations), and nothing
outside `txcl/store/` handles a database driver's exceptions."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import txcl

PACKAGE = Path(txcl.__file__).parent
LAYERS = ("txcl.store", "txcl.continuations")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(prefix: str) -> list[Path]:
    root = PACKAGE.parent.joinpath(*prefix.split("."))
    return sorted(root.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every module `path` imports at run time (module level or inside functions), leaving out
    imports under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in ast.walk(node):
                skipped.add(id(child))
    found: set[str] = set()
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module_name(path)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    names = {_module_name(p): p for prefix in LAYERS for p in _modules(prefix)}
    return {name: {m for m in _imports(path) if m in names and m != name} for name, path in names.items()}


def test_no_import_cycle_in_the_store_and_the_continuations():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert len(graph) > 20  # the scan found the modules


def test_dependencies_flow_one_way():
    for prefix, forbidden in (("txcl.store", ("txcl.continuations", "txcl.serve", "txcl.cli", "txcl.runtime")),
                              ("txcl.continuations", ("txcl.serve", "txcl.cli")),
                              ("txcl.runtime", ("txcl.continuations", "txcl.serve", "txcl.cli"))):
        for path in _modules(prefix):
            bad = sorted(m for m in _imports(path) if m.startswith(forbidden))
            assert not bad, f"{_module_name(path)} imports {bad}"


def test_only_the_store_names_a_backend_or_a_driver():
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        if name.startswith(("txcl.store", "txcl.testing")):
            continue
        imported = _imports(path)
        # the parse cache keeps a SQLite file of its own: a private cache, not the run store
        assert not {m for m in imported if m.split(".")[0] in ("sqlite3", "psycopg", "psycopg_pool")
                    and name not in ("txcl.runtime.config", "txcl.syntax.diskcache")}, name
        assert not {m for m in imported if m.startswith("txcl.store.backends")}, name


@pytest.mark.parametrize("module", sorted(_module_name(p) for prefix in LAYERS for p in _modules(prefix)))
def test_each_module_imports_alone(module):
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
