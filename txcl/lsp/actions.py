"""Code actions: the safe fixes of `txcl check --fix` as quick fixes (one per fixable finding,
and "fix all" for the document), "suppress with # noqa: TXnnn" for any finding, "create the
missing scope folder" for a join scope that does not exist (TX221), and "add the op schema" for
an op of a typed stack that has none."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs

from txcl.codes import CODES, FIXABLE

_NOQA = re.compile(r"#\s*noqa\s*:\s*(TX\d+(?:[\s,]+TX\d+)*)\s*$", re.IGNORECASE)


@attrs.frozen
class Action:
    title: str
    kind: str  # quickfix | source.fixAll
    code: str | None
    text: str | None = None  # the whole document after the action
    line: int | None = None  # or: text to put at the end of this 0-based line
    insert: str | None = None
    replace_from: int | None = None  # (with `line`) the column from which the line's end is replaced
    create: tuple[str, str] | None = None  # or: a new file (its path and text)


def _fixed(text: str, filename: str, code: str | None) -> str | None:
    from txcl.check.fix import fix_text

    new, applied = fix_text(text, filename, codes=(lambda c: True) if code is None else (lambda c: c == code))
    return new if applied and new != text else None


def _suppress(text: str, line: int, code: str) -> Action | None:
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return None
    body = lines[line]
    existing = _NOQA.search(body)
    title = f"Suppress {code} on this line (# noqa: {code})"
    if existing is not None:
        codes = re.findall(r"TX\d+", existing.group(1), re.IGNORECASE)
        if code in codes:
            return None
        return Action(title, "quickfix", code, line=line, replace_from=existing.start(),
                      insert=f"# noqa: {', '.join([*codes, code])}")
    return Action(title, "quickfix", code, line=line, replace_from=len(body),
                  insert=("  " if body.strip() else "") + f"# noqa: {code}")


def code_actions(text: str, filename: str, findings: list[tuple[str, int]]) -> list[Action]:
    """The actions for `findings` ((code, 0-based line) of the diagnostics the editor asks about)."""
    out: list[Action] = []
    seen: set[tuple[str, int]] = set()
    for code, line in findings:
        if (code, line) in seen:
            continue
        seen.add((code, line))
        if code in FIXABLE:
            fixed = _fixed(text, filename, code)
            if fixed is not None:
                name = CODES[code].name if code in CODES else code
                out.append(Action(f"Fix {code} ({name})", "quickfix", code, text=fixed))
        suppress = _suppress(text, line, code) if code.startswith("TX") else None
        if suppress is not None:
            out.append(suppress)
    if any(code == "TX221" for code, _ in findings):
        missing = _missing_join_scope(text, filename)
        if missing is not None:
            out.append(missing)
    if any(code in FIXABLE for code, _ in findings):
        fixed = _fixed(text, filename, None)
        if fixed is not None:
            out.append(Action("Fix all safe fixes (txcl check --fix)", "source.fixAll", None, text=fixed))
    return out


def _parsed(text: str, filename: str):
    from txcl.errors import TxclError
    from txcl.syntax.parser import parse_rule

    try:
        return parse_rule(text, filename)
    except TxclError:
        return None


def _literal_with(rule, key: str):
    for pair in rule.with_:
        if pair.key_text == key:
            return getattr(pair.value, "value", None)
    return None


def _missing_join_scope(text: str, filename: str) -> Action | None:
    """TX221: the join scope has no folder: create `OPS/<stack>/<join>/join.txcl`, a rule that
    matches and does nothing, so the walk reaches the scope and the answer is merged there."""
    rule = _parsed(text, filename)
    path = Path(filename)
    join = _literal_with(rule, "join_at_scope") if rule is not None else None
    if not isinstance(join, int) or isinstance(join, bool) or not path.parent.name[:1].isdigit():
        return None
    own = path.parent.name
    digits = len(own) - len(own.lstrip("0123456789"))
    folder = f"{join:0{digits}d}" if own.startswith("0") else str(join)
    target = path.parent.parent / folder / "join.txcl"
    if target.exists():
        return None
    body = (f"# The join scope of {path.parent.name}/{path.stem}: its answer is merged before this "
            f"scope's rules run.\nWHEN *\n")
    return Action(f"Create the missing scope folder {folder} (with a rule that does nothing)", "quickfix", "TX221",
                  create=(str(target), body))


def op_schema_action(text: str, filename: str) -> Action | None:
    """An op of a typed stack without `<name>.schema.json`: add one, its input listing what the
    SELECT gives and its output what `into` names (a skeleton to complete)."""
    from txcl.lsp.analysis import _may_be_typed, stack_for_path

    path = Path(filename)
    if not path.name.endswith(".txcl") or stack_for_path(filename) is None or not _may_be_typed(filename):
        return None
    target = path.with_name(path.stem + ".schema.json")
    rule = _parsed(text, filename)
    if target.exists() or rule is None or rule.exec is None or rule.exec.target.startswith(("goto://", "txco://")):
        return None
    given: dict = {}
    for item in (rule.select.items if rule.select is not None and not rule.select.star else ()):
        given.setdefault(item.target.segments[0], {})
    into = _literal_with(rule, "into")
    answers = {str(into).split(".")[0]: {}} if isinstance(into, str) and into else {}
    schema = {"$defs": {"input": {"type": "object", "properties": given},
                        "output": {"type": "object", "properties": answers}}}
    return Action(f"Add the op schema {target.name}", "source", None,
                  create=(str(target), json.dumps(schema, indent=2) + "\n"))


__all__ = ["Action", "code_actions", "op_schema_action"]
