"""Rename an envelope path across the OPS tree: every rule that reads or writes it, and the
`absent:` lists of rule test files (`.order.total` written out).

Refused, with the reason, where a rename could silently miss a use or merge two paths:
- the new name is not a path, or is reserved (`_txc`, `@…`);
- the tree already reads or writes the new path (the two would become one);
- a rule names the old path in a string (`&get(., "order.total")`, `@delete`, `WITH into`),
  which only the run time resolves;
- a rule test file has the path's last key in an expected or input envelope (`total:`), which
  a text edit cannot rename safely;
- a rule file of the tree does not parse (its uses are unknown).
"""

from __future__ import annotations

import re
from pathlib import Path


class RenameRefused(ValueError):
    pass


def _new_segments(new_name: str) -> tuple[str, ...]:
    from txcl.errors import TxclSyntaxError
    from txcl.syntax.parser import parse_rule

    text = new_name.strip()
    if not text.startswith("."):
        raise RenameRefused(f"{new_name!r} is not an envelope path (write it as .a.b)")
    try:
        rule = parse_rule(f"EMIT {text} = 1\n")
    except TxclSyntaxError:
        raise RenameRefused(f"{new_name!r} is not an envelope path") from None
    target = rule.emit[0].target
    if target.at_sugar or (target.segments and target.segments[0] == "_txc"):
        raise RenameRefused(f"{new_name!r} is reserved: only paths outside _txc can be renamed")
    return tuple(target.segments)


def rename(text: str, old: tuple[str, ...], new_name: str, path: str,
           open_texts: dict[Path, str]) -> dict[Path, list[tuple[int, int, str]]]:
    """{file: [(start offset, end offset, new text)]} renaming the path `old` to `new_name`
    (offsets in code points of the file's text); raises RenameRefused with the reason."""
    from txcl.lsp.references import INDEX
    from txcl.syntax import ast

    if not old or old[0] == "_txc":
        raise RenameRefused("only paths outside _txc can be renamed")
    new = _new_segments(new_name)
    if new == old:
        raise RenameRefused("the new name is the old one")
    from txcl.lsp.navigation import ops_dir_of

    file = Path(path).resolve()
    ops_dir = ops_dir_of(file)
    if ops_dir is None:
        raise RenameRefused("the file is not in an OPS tree")
    texts = {**open_texts, file: text}
    index = INDEX.scan(ops_dir, texts)
    old_text, new_text = ast.Path(old).source_text, ast.Path(new).source_text
    dotted = ".".join(old)
    edits: dict[Path, list[tuple[int, int, str]]] = {}
    for where, uses in sorted(index.items()):
        body = texts.get(where) or INDEX.text(where) or ""
        if not uses and body.strip():
            from txcl.check.analyze import parse

            try:
                rule, _ = parse(body, str(where))
            except Exception:  # noqa: BLE001
                rule = None
            if rule is None:
                raise RenameRefused(f"{where.name} does not parse: its uses of {old_text} are unknown")
        if any(use.kind in ("read", "write") and use.key == new for use in uses):
            raise RenameRefused(f"{new_text} is already used in {where.relative_to(ops_dir.parent)}: "
                                "the two paths would become one")
        if re.search(r'"[^"\n]*\b' + re.escape(dotted) + r'\b[^"\n]*"', body):
            raise RenameRefused(f"{where.relative_to(ops_dir.parent)} names {dotted!r} in a string, which only the "
                                "run time resolves: rename it by hand")
        for use in uses:
            if use.kind in ("read", "write") and use.key == old:
                edits.setdefault(where, []).append((use.span.start.offset, use.span.end.offset, new_text))
    for test_file in sorted(ops_dir.parent.rglob("*.test.yaml")):
        if "OPS" in test_file.relative_to(ops_dir.parent).parts:
            continue
        body = test_file.read_text(encoding="utf-8")
        if re.search(r"(^|[{,\s])" + re.escape(old[-1]) + r"\s*:", body, re.MULTILINE):
            raise RenameRefused(f"{test_file.name} has a key {old[-1]!r} in an envelope: rename it there by hand "
                                "first, or rename the path's last key by hand")
        for match in re.finditer(re.escape(old_text) + r"(?![A-Za-z0-9_\-.])", body):
            edits.setdefault(test_file, []).append((match.start(), match.end(), new_text))
    return edits


__all__ = ["rename", "RenameRefused"]
