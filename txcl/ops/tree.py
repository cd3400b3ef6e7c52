"""Loading an OPS tree: workspace discovery, parsing every rule, fixtures,
`py://` imports, the immutable OpsTree with its overlay lookups, and content-addressed
snapshots."""

from __future__ import annotations

import base64
import bisect
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from txcl.errors import Diagnostic, NO_SPAN, TxclError, TxclLoadError
from txcl.ops.layout import is_system_stack, lineage
from txcl.ops.scan import ScanResult, display_path, scan_ops
from txcl.syntax.batch import parsing_many


class WorkspaceNotFound(TxclError):
    """No directory holding `OPS/` at or above the given path (a usage error, exit 2)."""


def find_workspace(path: str | Path = ".") -> tuple[Path, Path]:
    """(workspace, ops_dir) for `path`: the nearest folder at or above it that holds `OPS/`."""
    start = Path(path).resolve()
    if not start.exists():
        raise WorkspaceNotFound(f"{path}: no such directory")
    if start.is_file():
        start = start.parent
    if start.name == "OPS":
        return start.parent, start
    for candidate in (start, *start.parents):
        if (candidate / "OPS").is_dir():
            return candidate, candidate / "OPS"
        if candidate.name == "OPS":
            return candidate.parent, candidate
    raise WorkspaceNotFound(f"no OPS/ directory found at or above {display_path(start)}")


@attrs.frozen(eq=False)
class OpRule:
    """One loaded rule with everything the walk needs about it."""

    stack: str
    scope: int
    name: str
    rule: Any  # txcl.syntax.ast.Rule
    source: str
    file: str  # display path
    fixtures: dict[str, Any]  # "mock-request.json"/"mock-response.json" -> parsed object
    fixture_text: dict[str, str]
    target: Any = None  # txcl.syntax.targets.ExecTarget or None (no EXEC)
    func: Callable[..., Any] | None = None  # resolved py:// callable
    facts: Any = attrs.field(default=None, eq=False, repr=False)  # the walker's per-rule cache
    # the text of the op's <name>.schema.json (typed envelopes; WITH validate = true reads it)
    schema_text: str | None = attrs.field(default=None, eq=False, repr=False)
    _validator: Any = attrs.field(default=None, eq=False, repr=False, init=False)

    def output_problem(self, answer: Any) -> str | None:
        """Why `answer` breaks the op's `$defs.output` (None: it does not); for `WITH validate`."""
        if self._validator is None:
            object.__setattr__(self, "_validator", _answer_validator(self))  # compiled once
        validator = self._validator
        if isinstance(validator, str):
            return validator
        errors = validator.errors(answer)
        if not errors:
            return None
        shown = "; ".join(f"{e['pointer'] or '/'}: {e['message']}" for e in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        return f"the answer does not match {self.name}.schema.json $defs.output: {shown}{more}"

    @property
    def key(self) -> str:
        return f"{self.stack}/{self.scope}/{self.name}"

    @property
    def exec_text(self) -> str | None:
        return self.rule.exec.target if self.rule.exec is not None else None


def _answer_validator(op: OpRule) -> Any:
    """The compiled `$defs.output` of an op, or the reason there is none (a string)."""
    from txcl.jsonschemas import SchemaProblem, compile_definition

    if op.schema_text is None:
        return f"WITH validate = true, but {op.name} has no {op.name}.schema.json beside its rule"
    try:
        doc = json.loads(op.schema_text)
        base = Path(op.file[: -len(".txcl")] + ".schema.json" if op.file.endswith(".txcl") else op.file)
        validator = compile_definition(doc, "output", base if base.is_absolute() else Path.cwd() / base,
                                       lambda path: json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, SchemaProblem) as exc:
        return f"{op.name}.schema.json cannot be used: {exc}"
    if validator is None:
        return f"WITH validate = true, but {op.name}.schema.json has no $defs.output"
    return validator


class OpsTree:
    """Immutable: stack → scope → rules sorted by op name, plus overlay lookups."""

    def __init__(self, rules: Iterable[OpRule], workspace: Path | None = None,
                 assets: dict[str, Path] | None = None):
        by_stack: dict[str, dict[int, list[OpRule]]] = {}
        for op in rules:
            by_stack.setdefault(op.stack, {}).setdefault(op.scope, []).append(op)
        self._scopes: dict[str, dict[int, tuple[OpRule, ...]]] = {
            stack: {scope: tuple(sorted(ops, key=lambda o: o.name)) for scope, ops in scopes.items()}
            for stack, scopes in by_stack.items()
        }
        self.workspace = workspace
        self.assets = dict(assets or {})
        self._effective: dict[str, tuple[list[int], dict[int, str]]] = {}
        self._snapshot_id: str | None = None

    # ------------------------------------------------------------ lookups
    def stacks(self) -> list[str]:
        """Stacks that hold rules of their own, sorted."""
        return sorted(self._scopes)

    def user_stacks(self) -> list[str]:
        return [s for s in self.stacks() if not is_system_stack(s)]

    def known_stacks(self) -> list[str]:
        """Every stack with an effective scope, including rule-less parents of others."""
        names: set[str] = set()
        for stack in self._scopes:
            parts = stack.split("/")
            for i in range(1, len(parts) + 1):
                names.add("/".join(parts[:i]))
        return sorted(n for n in names if self.effective_scopes(n))

    def has_stack(self, stack: str) -> bool:
        return bool(self.effective_scopes(stack))

    def own_scopes(self, stack: str) -> list[int]:
        return sorted(self._scopes.get(stack, {}))

    def _effective_of(self, stack: str) -> tuple[list[int], dict[int, str]]:
        cached = self._effective.get(stack)
        if cached is None:
            owner: dict[int, str] = {}
            for ancestor in lineage(stack):
                for scope in self._scopes.get(ancestor, {}):
                    owner.setdefault(scope, ancestor)
            cached = (sorted(owner), owner)
            self._effective[stack] = cached
        return cached

    def effective_scopes(self, stack: str) -> list[int]:
        return self._effective_of(stack)[0]

    def next_scope(self, stack: str, requested: int) -> int | None:
        """Smallest effective scope ≥ `requested`, or None."""
        scopes = self._effective_of(stack)[0]
        i = bisect.bisect_left(scopes, requested)
        return scopes[i] if i < len(scopes) else None

    def rules_at(self, stack: str, scope: int) -> tuple[OpRule, ...]:
        """Rules of the first stack in the lineage defining `scope`, sorted by name."""
        owner = self._effective_of(stack)[1].get(scope)
        if owner is None:
            return ()
        return self._scopes[owner][scope]

    def all_rules(self) -> list[OpRule]:
        return [op for stack in self.stacks() for scope in sorted(self._scopes[stack])
                for op in self._scopes[stack][scope]]

    def find(self, stack: str, scope: int, name: str) -> OpRule | None:
        for op in self._scopes.get(stack, {}).get(scope, ()):
            if op.name == name:
                return op
        return None

    def __len__(self) -> int:
        return sum(len(ops) for scopes in self._scopes.values() for ops in scopes.values())

    # ------------------------------------------------------------ snapshots
    def snapshot(self) -> dict[str, Any]:
        """A JSON body holding every rule text and fixture (the ops snapshot a durable run keeps)."""
        return {
            "version": 1,
            "rules": [
                {"stack": op.stack, "scope": op.scope, "name": op.name, "file": op.file,
                 "text": op.source, "fixtures": dict(sorted(op.fixture_text.items())),
                 **({"schema": op.schema_text} if op.schema_text is not None else {})}
                for op in self.all_rules()
            ],
        }

    @property
    def snapshot_id(self) -> str:
        """SHA-256 of the sorted (stack, scope, name, rule text, fixture bytes) list."""
        if self._snapshot_id is None:
            rows = sorted(
                (op.stack, op.scope, op.name, op.source,
                 [[k, base64.b64encode(v.encode("utf-8")).decode("ascii")] for k, v in sorted(op.fixture_text.items())],
                 *((op.schema_text,) if op.schema_text is not None else ()))
                for op in self.all_rules()
            )
            blob = json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            self._snapshot_id = hashlib.sha256(blob).hexdigest()
        return self._snapshot_id


# ---------------------------------------------------------------- loading

def load_ops(path: str | Path = ".", *, import_python: bool = True) -> OpsTree:
    """Load the tree of the workspace at or above `path`; raise TxclLoadError with every
    diagnostic when anything is wrong (all or nothing: a tree with one bad rule does not load)."""
    workspace, ops_dir = find_workspace(path)
    scan = scan_ops(ops_dir)
    return build_tree(scan, workspace, import_python=import_python)


def build_tree(scan: ScanResult, workspace: Path, *, import_python: bool = True) -> OpsTree:
    diagnostics: list[Diagnostic] = list(scan.diagnostics)
    fixtures = _load_fixtures(scan, diagnostics)
    rules: list[OpRule] = []
    with parsing_many():
        for entry in scan.entries:
            try:
                data = entry.path.read_bytes()
            except OSError as exc:
                diagnostics.append(Diagnostic("TX002", f"cannot read file: {exc.strerror}", file=entry.display))
                continue
            fx_objects, fx_text = fixtures.get(entry.dir_rel, ({}, {}))
            op = _compile_rule(entry.stack, entry.scope, entry.name, data, entry.display, fx_objects, fx_text,
                               workspace, import_python, diagnostics)
            if op is not None:
                schema = scan.op_schemas.get(entry.path)
                if schema is not None:
                    try:
                        op = attrs.evolve(op, schema_text=schema.read_text(encoding="utf-8"))
                    except (OSError, UnicodeDecodeError):
                        pass  # txcl check reports it (TX260); WITH validate then says there is none
                rules.append(op)
    if diagnostics:
        raise TxclLoadError(_sorted(diagnostics))
    return OpsTree(rules, workspace=workspace, assets=scan.assets)


def tree_from_snapshot(body: dict[str, Any], workspace: Path | None = None, *,
                       import_python: bool = True) -> OpsTree:
    """Rebuild an OpsTree from `OpsTree.snapshot()` output (resumes run against this)."""
    diagnostics: list[Diagnostic] = []
    rules: list[OpRule] = []
    with parsing_many():
        for row in body.get("rules", []):
            fx_text = dict(row.get("fixtures", {}))
            fx_objects = {name: json.loads(text) for name, text in fx_text.items()}
            op = _compile_rule(row["stack"], int(row["scope"]), row["name"], row["text"],
                               row.get("file", row["name"]), fx_objects, fx_text, workspace, import_python,
                               diagnostics)
            if op is not None:
                if isinstance(row.get("schema"), str):
                    op = attrs.evolve(op, schema_text=row["schema"])
                rules.append(op)
    if diagnostics:
        raise TxclLoadError(_sorted(diagnostics))
    assets: dict[str, Path] = {}
    if workspace is not None and (workspace / "OPS").is_dir():
        assets = scan_ops(workspace / "OPS").assets
    return OpsTree(rules, workspace=workspace, assets=assets)


def _sorted(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.file, d.line, d.column, d.code))


def _load_fixtures(scan: ScanResult, diagnostics: list[Diagnostic]) -> dict[str, tuple[dict, dict]]:
    from txcl.values.jsonio import JsonError, loads

    out: dict[str, tuple[dict, dict]] = {}
    for dir_rel, files in sorted(scan.fixtures.items()):
        objects: dict[str, Any] = {}
        texts: dict[str, str] = {}
        for name, path in sorted(files.items()):
            shown = display_path(path)
            try:
                text = path.read_bytes().decode("utf-8")
                value = loads(text)
            except (OSError, UnicodeDecodeError, JsonError, ValueError):
                value = None
                text = ""
            if not isinstance(value, dict):
                diagnostics.append(Diagnostic("", "fixture must be a JSON object", file=shown))
                continue
            objects[name] = value
            texts[name] = text
        out[dir_rel] = (objects, texts)
    return out


def _compile_rule(stack: str, scope: int, name: str, data: bytes | str, shown: str,
                  fx_objects: dict, fx_text: dict, workspace: Path | None, import_python: bool,
                  diagnostics: list[Diagnostic]) -> OpRule | None:
    from txcl.errors import TxclSyntaxError
    from txcl.syntax.parser import parse_source

    try:
        rule = parse_source(data, filename=shown)
    except TxclSyntaxError as exc:
        diagnostics.extend(d if d.file == shown else d.with_file(shown) for d in exc.diagnostics)
        return None
    source = data.decode("utf-8") if isinstance(data, bytes) else data
    target = None
    func = None
    if rule.exec is not None:
        from txcl.ops.pytargets import resolve_py_target
        from txcl.syntax.targets import ExecTarget, classify_exec_target

        classified = classify_exec_target(rule.exec.target)
        target = classified if isinstance(classified, ExecTarget) else None
        problem, code = (None, "") if target is not None else (classified.message, classified.code)
        if problem is not None:
            diagnostics.append(Diagnostic(code or "TX104", problem, file=shown,
                                          span=getattr(rule.exec, "target_span", NO_SPAN), source=source))
            return None
        if target.kind == "py" and import_python:
            func, problem = resolve_py_target(target, workspace)
            if problem is not None:
                diagnostics.append(Diagnostic("TX104", f'EXEC "{rule.exec.target}": {problem}', file=shown,
                                              span=getattr(rule.exec, "target_span", NO_SPAN), source=source))
                return None
    return OpRule(stack, scope, name, rule, source, shown, dict(fx_objects), dict(fx_text), target, func)
