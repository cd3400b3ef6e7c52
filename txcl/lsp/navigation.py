"""Go to definition for jumps: from a stage-jump target — `EXEC "goto://300"`,
`EXEC "billing/100"`, `EMIT @goto = "300"` — to the rule files of the scope the walk would
enter. Resolved from the folders on disk, so it works while other rules of the tree do not
load (an editor's usual state): the scope folder numbered exactly so, else the next one up
(the walk enters the first scope at or after a jump's number), in the stack and then in the
stacks it overlays."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from txcl.errors import Span


def _offset_in(span: Any, offset: int) -> bool:
    return span is not None and span.start.offset <= offset <= span.end.offset


def jump_at(rule: Any, offset: int) -> tuple[str | None, int] | None:
    """(stack or None for the rule's own, scope) of the jump target under `offset`."""
    from txcl.check.facts import jump_of_exec, jump_of_goto_value
    from txcl.syntax import ast

    if rule.exec is not None and _offset_in(rule.exec.span, offset):
        return jump_of_exec(rule.exec.target)
    for assignment in (*rule.emit, *rule.set_post):
        if tuple(assignment.target.segments) != ("_txc", "goto") or not _offset_in(assignment.value.span, offset):
            continue
        value = assignment.value
        if isinstance(value, ast.StringLit):
            return jump_of_goto_value(str(value.value).strip())
        if isinstance(value, ast.IntLit):
            return None, int(value.text)
    return None


def ops_dir_of(path: Path) -> Path | None:
    """The OPS folder (resolved) a file lies in, or None."""
    parts = path.resolve().parts
    if "OPS" not in parts:
        return None
    return Path(*parts[:len(parts) - parts[::-1].index("OPS")])


def _layout(path: Path) -> tuple[Path, str] | None:
    """(the OPS folder, the rule's stack) of a rule file at OPS/<stack…>/<scope>/<name>.txcl."""
    parts = path.resolve().parts
    if "OPS" not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index("OPS")
    stack = parts[at + 1:-2]
    if not stack:
        return None
    return Path(*parts[:at + 1]), "/".join(stack)


def scope_files(ops_dir: Path, stack: str, scope: int) -> list[Path]:
    """The rule files the walk runs at `stack`/`scope` (see the module docstring): the scopes of
    the stack and the stacks it overlays, a stack's own folder winning over its parents' for the
    same number, and the first at or after `scope` that holds rules."""
    from txcl.ops.layout import lineage, numbered_value

    folders: dict[int, Path] = {}
    for owner in reversed(lineage(stack)):  # parents first: the stack's own folders win
        folder = ops_dir.joinpath(*owner.split("/"))
        if not folder.is_dir():
            continue
        for child in folder.iterdir():
            number = numbered_value(child.name)
            if child.is_dir() and number is not None and any(child.glob("*.txcl")):
                folders[number] = child
    after = [n for n in folders if n >= scope]
    return sorted(folders[min(after)].glob("*.txcl")) if after else []


def stages(ops_dir: Path) -> dict[str, list[int]]:
    """Every stack of the tree with its numbered scopes that hold rules (from the folders)."""
    from txcl.ops.layout import numbered_value

    found: dict[str, set[int]] = {}
    for rule_file in ops_dir.rglob("*.txcl"):
        scope_dir = rule_file.parent
        number = numbered_value(scope_dir.name)
        if number is None or scope_dir.parent == ops_dir:
            continue
        stack = "/".join(scope_dir.parent.relative_to(ops_dir).parts)
        found.setdefault(stack, set()).add(number)
    return {stack: sorted(scopes) for stack, scopes in sorted(found.items())}


def jump_candidates(path: str | None, typed: str) -> list[tuple[str, str]]:
    """(completion, detail) for a jump target being typed: the scopes of the rule's own stack
    (`300`), then `stack/scope` of every stack."""
    if path is None:
        return []
    layout = _layout(Path(path))
    if layout is None:
        return []
    ops_dir, own = layout
    out = []
    for stack, scopes in stages(ops_dir).items():
        for scope in scopes:
            if stack == own:
                out.append((str(scope), f"scope {scope} of this stack"))
            out.append((f"{stack}/{scope}", f"scope {scope} of {stack}"))
    return [(text, detail) for text, detail in out if text.startswith(typed)]


def workspace_symbols(ops_dir: Path, query: str, limit: int = 500) -> list[tuple[str, str, str, Path]]:
    """(name, kind, container, file) of the stacks, scopes and ops whose name holds `query`
    (case does not matter): a stack or scope points at its first rule file."""
    from txcl.ops.layout import numbered_value

    wanted = query.lower()
    out: list[tuple[str, str, str, Path]] = []
    seen: set[str] = set()
    for rule_file in sorted(ops_dir.rglob("*.txcl")):
        scope_dir = rule_file.parent
        number = numbered_value(scope_dir.name)
        if number is None or scope_dir.parent == ops_dir:
            continue
        stack = "/".join(scope_dir.parent.relative_to(ops_dir).parts)
        stage = f"{stack}/{number}"
        for name, kind, container in ((stack, "stack", ""), (stage, "scope", stack),
                                      (f"{stage}/{rule_file.stem}", "op", stage)):
            if name in seen or wanted not in name.lower():
                continue
            seen.add(name)
            out.append((name, kind, container, rule_file))
            if len(out) >= limit:
                return out
    return out


def ops_dirs(roots: list[Path]) -> list[Path]:
    """The OPS folders of the editor's workspace folders (each a workspace or inside one)."""
    found = []
    for root in roots:
        for candidate in (root, *root.parents):
            if (candidate / "OPS").is_dir():
                found.append((candidate / "OPS").resolve())
                break
    return sorted(set(found))


_PY = re.compile(r"^py://(?P<module>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):(?P<function>[A-Za-z_][A-Za-z0-9_]*)$")


def py_definition(rule: Any, offset: int, path: str | None) -> list[tuple[str, Span]]:
    """`EXEC "py://ops.pricing:total"` -> the `def total` of ops/pricing.py beside OPS/ (read as
    text: nothing is imported)."""
    if rule is None or path is None or rule.exec is None or not _offset_in(rule.exec.span, offset):
        return []
    match = _PY.match(rule.exec.target or "")
    layout = _layout(Path(path))
    if match is None or layout is None:
        return []
    base = layout[0].parent.joinpath(*match.group("module").split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        try:
            source = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found = re.search(r"^(?:async\s+)?def\s+" + match.group("function") + r"\b", source, re.MULTILINE)
        from txcl.errors import Position

        if found is None:
            return [(str(candidate), Span(Position(1, 1, 0), Position(1, 1, 0)))]
        line = source.count("\n", 0, found.start()) + 1
        point = Position(line, 1, found.start())
        return [(str(candidate), Span(point, point))]
    return []


def jump_definition(rule: Any, offset: int, path: str | None) -> list[tuple[str, Span]]:
    """The rule files a jump under the cursor leads to (empty: no jump there)."""
    if rule is None or path is None:
        return []
    target = jump_at(rule, offset)
    layout = _layout(Path(path))
    if target is None or layout is None:
        return []
    ops_dir, own = layout
    stack, scope = target[0] or own, target[1]
    from txcl.errors import Position

    start = Position(1, 1, 0)
    return [(str(f), Span(start, start)) for f in scope_files(ops_dir, stack, scope)]


__all__ = ["ops_dir_of", "py_definition", "jump_at", "jump_definition", "jump_candidates", "scope_files", "stages", "workspace_symbols", "ops_dirs"]
