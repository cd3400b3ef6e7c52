"""Find references across the OPS tree: every rule that reads or writes an envelope path, and
every jump to a stage.

The tree is indexed once per language-server process and kept up to date file by file: a
file is parsed again only when its size or modification time changed (an open document's
unsaved text is used instead of the file). Files that do not parse are skipped, so references
work while part of the tree is broken."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import attrs

from txcl.errors import Span


@attrs.frozen
class Use:
    kind: str  # read | write | jump
    key: tuple  # the path's segments, or (stack, scope) of a jump
    span: Span


def _writes(rule: Any) -> Iterator[Any]:
    for assignment in (*rule.set_pre, *rule.set_post, *rule.emit):
        yield assignment.target
    if rule.select is not None:
        for item in rule.select.items:
            yield item.target
    if rule.loop is not None:
        for assignment in rule.loop.set:
            yield assignment.target


def uses(rule: Any, own_stack: str | None) -> list[Use]:
    """What one rule reads, writes and jumps to."""
    from txcl.check.facts import jump_of_exec, jump_of_goto_value
    from txcl.check.rules.base import read_paths
    from txcl.syntax import ast

    found = [Use("read", tuple(p.segments), p.span) for p in read_paths(rule)]
    found += [Use("write", tuple(p.segments), p.span) for p in _writes(rule)]
    jumps = []
    if rule.exec is not None:
        jumps.append((jump_of_exec(rule.exec.target), rule.exec.span))
    for assignment in (*rule.emit, *rule.set_post):
        value = assignment.value
        if tuple(assignment.target.segments) == ("_txc", "goto") and isinstance(value, ast.StringLit):
            jumps.append((jump_of_goto_value(str(value.value).strip()), value.span))
    for target, span in jumps:
        if target is not None and (target[0] or own_stack):
            found.append(Use("jump", (target[0] or own_stack, target[1]), span))
    return found


def own_stack(path: Path) -> str | None:
    from txcl.lsp.navigation import _layout

    layout = _layout(path)
    return layout[1] if layout is not None else None


class TreeIndex:
    """The uses of every rule file under an OPS folder, refreshed file by file."""

    def __init__(self) -> None:
        self._files: dict[Path, tuple[tuple, list[Use], str]] = {}  # path -> (key, uses, text)

    def _parse(self, path: Path, text: str) -> list[Use]:
        from txcl.check.analyze import parse

        try:
            rule, _ = parse(text, str(path))
        except Exception:  # noqa: BLE001 - a file that does not parse has no uses to offer
            return []
        return uses(rule, own_stack(path)) if rule is not None else []

    def scan(self, ops_dir: Path, open_texts: dict[Path, str]) -> dict[Path, list[Use]]:
        seen: dict[Path, list[Use]] = {}
        for path in ops_dir.rglob("*.txcl"):  # (ops_dir is resolved: so are the paths under it)
            text = open_texts.get(path)
            if text is not None:
                key: tuple = ("open", hash(text))
            else:
                try:
                    stat = path.stat()
                except OSError:
                    continue
                key = ("disk", stat.st_mtime_ns, stat.st_size)
            cached = self._files.get(path)
            if cached is None or cached[0] != key:
                if text is None:
                    try:
                        text = path.read_text(encoding="utf-8")
                    except (OSError, UnicodeDecodeError):
                        continue
                cached = (key, self._parse(path, text), text)
                self._files[path] = cached
            seen[path] = cached[1]
        for gone in set(self._files) - set(seen):
            del self._files[gone]
        return seen

    def text(self, path: Path) -> str | None:
        """The text the last scan read for `path`."""
        entry = self._files.get(path)
        return entry[2] if entry is not None else None


INDEX = TreeIndex()


def references(text: str, offset: int, path: str | None, open_texts: dict[Path, str]) -> list[tuple[str, Span]]:
    """Every read and write of the path under the cursor, or every jump to the stage of the
    jump under it, across the OPS tree of `path`."""
    from txcl.lsp.analysis import _parse_for_outline, _segments, token_at
    from txcl.lsp.navigation import jump_at
    from pygments.token import Name

    from txcl.lsp.navigation import ops_dir_of

    file = Path(path).resolve() if path is not None else None
    ops_dir = ops_dir_of(file) if file is not None else None
    if file is None or ops_dir is None:
        return []
    wanted: tuple[str, tuple] | None = None
    tok = token_at(text, offset)
    if tok is not None and tok.type in Name.Variable and tok.type not in Name.Variable.Magic:
        wanted = ("path", _segments(tok.value))
    else:
        rule = _parse_for_outline(text, path)
        target = jump_at(rule, offset) if rule is not None else None
        stack = own_stack(file)
        if target is not None and (target[0] or stack):
            wanted = ("jump", (target[0] or stack, target[1]))
    if wanted is None:
        return []
    kinds = ("read", "write") if wanted[0] == "path" else ("jump",)
    out = []
    for where, found in sorted(INDEX.scan(ops_dir, {**open_texts, file: text}).items()):
        out += [(str(where), use.span) for use in found if use.kind in kinds and use.key == wanted[1]]
    return out


def writers(text: str, segments: tuple[str, ...], path: str | None,
            open_texts: dict[Path, str]) -> list[tuple[str, Span]]:
    """The rules of the tree that write the path `segments` (go to definition, untyped stacks)."""
    from txcl.lsp.navigation import ops_dir_of

    file = Path(path).resolve() if path is not None else None
    ops_dir = ops_dir_of(file) if file is not None else None
    if file is None or ops_dir is None:
        return []
    out = []
    for where, found in sorted(INDEX.scan(ops_dir, {**open_texts, file: text}).items()):
        out += [(str(where), use.span) for use in found if use.kind == "write" and use.key == segments]
    return out


__all__ = ["references", "writers", "uses", "TreeIndex", "INDEX"]
