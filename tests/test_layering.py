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
            bad = sorted(m for m in _imports(path) if any(m == f or m.startswith(f + ".") for f in forbidden))
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


def test_the_store_decides_nothing_for_the_continuations_layer():
    """The store records facts and applies a unit's resolved options: no policy object, no
    materialiser, error builder or park builder handed in, no cache of parsed WITH options,
    and no read of a unit's WITH options in a procedure (their meaning is resolved once, by
    the continuations layer, into ``options_json``). No public procedure takes a callable."""
    forbidden_names = {"policy", "materialize", "join_error", "build_park", "_directives_cache", "_directives",
                       "use_policy", "StorePolicy", "Materializer", "JoinErrorBuilder", "ParkBuilder"}
    for path in _modules("txcl.store"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.arg):
                name = node.arg
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                name = node.name
            elif isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.Name):
                name = node.id
            assert name not in forbidden_names, f"{_module_name(path)}:{node.lineno} uses {name}"
        if path.parent.name == "continuations" and path.parent.parent.name == "procedures":
            text = path.read_text(encoding="utf-8")
            assert "directives_json" not in text or path.name == "park.py", (
                f"{_module_name(path)} reads a unit's WITH options; use its resolved options")
    import inspect

    from txcl.store.store import DatabaseStore

    for name, member in inspect.getmembers(DatabaseStore, inspect.isfunction):
        if name.startswith("_") or name in ("run_together", "run_batch", "subscribe", "unsubscribe"):
            continue  # (the batch helpers run the caller's own store calls; listeners are notified)
        hints = {k: str(v) for k, v in inspect.signature(member).parameters.items()}
        assert not any("Callable" in h for h in hints.values()), f"DatabaseStore.{name} takes a callable: {hints}"


def test_every_runtime_error_code_comes_from_the_table():
    """A ``txcl_*`` code is written once, in txcl/runtime_codes.py, with its HTTP status,
    message and documentation; everything else uses its entry (names that only look like
    codes — the schema table, a cookie, a notification channel — are not codes)."""
    import re

    from txcl import runtime_codes

    not_codes = {"txcl_schema", "txcl_ui", "txcl_runs"}
    literals = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "runtime_codes.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        literals += [f"{_module_name(path)}:{n.lineno}: {n.value}" for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
                     and re.fullmatch(r"txcl_[a-z_]*[a-z]", n.value) and n.value not in not_codes]
    assert literals == []
    entries = runtime_codes.all_codes()
    assert len(entries) >= 35 and len({e.code for e in entries}) == len(entries)
    assert all(400 <= e.http_status <= 599 and e.doc and e.template for e in entries)


def test_the_runtime_errors_page_lists_every_code():
    from txcl.docsgen import runtime_errors_page
    from txcl.runtime_codes import all_codes

    page = runtime_errors_page()
    assert all(f"`{e.code}` | {e.http_status} |" in page for e in all_codes())


def _package_graph() -> dict[str, set[str]]:
    """txcl's packages (and top-level modules) and the ones each imports at run time."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        source = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "txcl" and len(parts) > 1 and parts[1] != source:
                graph.setdefault(source, set()).add(parts[1])
    return graph


def test_no_two_packages_import_each_other():
    """A fact lives in one home: the walker takes the trace format from txcl/trace/, the
    language server owns completion (the REPL uses it), the dashboard takes the operator's
    operations from the continuations layer, a rule test the run's error payload from the
    code table, the OPS loader the EXEC target from the parser and the schema compiler from
    txcl/jsonschemas.py. The typed checker still shares the tree context with `txcl check`
    (check ↔ types)."""
    graph = _package_graph()
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    pairs = {tuple(sorted((a, b))) for a in graph for b in graph[a]
             if a in packages and b in packages and a in graph.get(b, set())}
    assert pairs <= {("check", "types")}, sorted(pairs)
    walker = {m for m in _imports(PACKAGE / "runtime" / "walker.py") if m.startswith("txcl.store")}
    assert walker == set(), walker  # the trace format is the trace package's
    for a, b in (("ops", "types"), ("lsp", "repl"), ("ui", "serve"), ("ruletest", "cli"), ("ops", "runtime"),
                 ("trace", "store")):
        assert b not in graph.get(a, set()), f"txcl.{a} imports txcl.{b}"
