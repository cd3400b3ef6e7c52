"""What the language server knows about one document, as plain functions over its text.

Diagnostics come from the checker (`txcl.check.check_source`), falling back to the parser;
hover and completion read the vocabulary (keywords, the function registry, WITH keys, EXEC
schemes); the outline comes from the rule's clause marks; formatting is `txcl fmt`.
Everything here uses txcl positions (1-based lines and code-point columns) and code-point
offsets; `txcl.lsp.server` converts to LSP units.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import attrs
from pygments.token import Keyword, Name, String

from txcl.errors import Diagnostic, Position, Span, TxclSyntaxError
from txcl.highlight import TxclLexer
from txcl.vocabulary import CLAUSE_KEYWORDS
from txcl.lsp import vocabulary
from txcl.lsp.completion import Candidate, complete_rule

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- positions in text


def position_at(text: str, offset: int) -> Position:
    offset = min(max(offset, 0), len(text))
    before = text[:offset]
    line = before.count("\n") + 1
    return Position(line, offset - (before.rfind("\n") + 1) + 1, offset)


def span_of(text: str, start: int, end: int) -> Span:
    return Span(position_at(text, start), position_at(text, end))


# ---------------------------------------------------------------- diagnostics


def stack_for_path(path: str | Path | None) -> str | None:
    """The stack of a rule file inside an OPS tree (`OPS/shop/eu/0100/x.txcl` → `shop/eu`)."""
    if path is None:
        return None
    parts = Path(path).parts
    if "OPS" not in parts:
        return None
    after = parts[len(parts) - 1 - parts[::-1].index("OPS") + 1:-1]
    stack = []
    for segment in after:
        if re.fullmatch(r"[0-9]+([ _-].*)?", segment):
            return "/".join(stack) or None
        stack.append(segment)
    return None


def _may_be_typed(path: str) -> bool:
    """Whether the rule's stack, or a stack it inherits from, has a schema.json: without one the
    stack is untyped, and the analysis of the whole tree need not run (a quick look at a few
    files, where the analysis reads every rule)."""
    from txcl.lsp.navigation import ops_dir_of

    stack = stack_for_path(path)
    ops_dir = ops_dir_of(Path(path))
    if stack is None or ops_dir is None:
        return True  # not laid out as the analysis expects: let it decide
    segments = stack.split("/")
    return any((ops_dir.joinpath(*segments[:n]) / "schema.json").is_file() for n in range(1, len(segments) + 1))


def _check_config(path: str | None) -> Any:
    from txcl.check.config import CheckConfig, load_config

    if path is None:
        return CheckConfig()
    try:
        return load_config(Path(path).parent)
    except Exception as exc:  # a broken config file must not silence diagnostics
        log.warning("txcl check configuration ignored: %s", exc)
        return CheckConfig()


def test_file_diagnostics(text: str, path: str) -> list[Diagnostic]:
    """The TX4xx findings of a rule test file being edited (with the OPS tree's checks when
    its workspace loads)."""
    from txcl.ruletest.spec import parse_test_text

    test_file, diags = parse_test_text(Path(path), text)
    if test_file is not None:
        from txcl.check.engine import _tree_near
        from txcl.ruletest.session import tree_checks

        tree = _tree_near(Path(path), {})
        if tree is not None:
            diags = diags + tree_checks(tree, test_file)
    return diags


def diagnostics_for(text: str, path: str | None = None) -> list[Diagnostic]:
    """Every per-file finding of `text`: the checker's when available, else the parser's."""
    filename = path or "<buffer>"
    from txcl.ruletest.spec import SUFFIXES

    if path is not None and path.endswith(SUFFIXES):
        return test_file_diagnostics(text, path)
    if path is not None and path.endswith("schema.json"):
        from txcl.types.workspace import schema_file_diagnostics

        return schema_file_diagnostics(path, text)
    from txcl.check import check_source

    config = _check_config(path)
    stack = stack_for_path(path)
    try:
        return list(check_source(text, filename, config, stack=stack,
                                 tree_path=Path(path) if path is not None and stack is not None else None))
    except Exception:  # a broken neighbour must not hide this file's own findings
        log.exception("txcl check of %s with its tree failed; checking the file alone", filename)
    try:
        return list(check_source(text, filename, config, stack=stack))
    except Exception:  # never lose diagnostics to a checker bug: fall back to the parser
        log.exception("txcl check failed on %s; showing parser diagnostics", filename)
    from txcl.syntax.parser import parse_rule

    try:
        parse_rule(text, filename=filename)
    except TxclSyntaxError as exc:
        return list(exc.diagnostics)
    return []


# ---------------------------------------------------------------- tokens, hover


@attrs.frozen
class Token:
    start: int
    end: int
    type: Any
    value: str


def tokens(text: str) -> list[Token]:
    out = []
    for start, token, value in TxclLexer().get_tokens_unprocessed(text):
        out.append(Token(start, start + len(value), token, value))
    return out


def token_at(text: str, offset: int) -> Token | None:
    """The token under the cursor; at a token's end (cursor right after a word) that token."""
    found = None
    for tok in tokens(text):
        if tok.start <= offset < tok.end:
            return tok
        if tok.end == offset and tok.value.strip():
            found = tok
    return found


@attrs.frozen
class Hover:
    markdown: str
    span: Span


def _typed_view(path: str | None, text: str) -> Any:
    """What the checker computed for the scope of the rule file at `path` (None: untyped)."""
    if path is None or not path.endswith(".txcl") or not _may_be_typed(path):
        return None
    from txcl.types.workspace import scope_view

    try:
        return scope_view(path, text)
    except Exception:  # noqa: BLE001 - a broken tree must not break hover or completion
        log.exception("typed envelope analysis of %s failed", path)
        return None


def hover(text: str, offset: int, path: str | None = None) -> Hover | None:
    tok = token_at(text, offset)
    if tok is None:
        return None
    span = span_of(text, tok.start, tok.end)
    if tok.type in Name.Variable and not tok.type in Name.Variable.Magic and path is not None:
        view = _typed_view(path, text)
        if view is not None:
            from txcl.types.workspace import hover_markdown

            found = hover_markdown(view, _segments(tok.value), tok.value)
            if found is not None:
                return Hover(found, span)
    if tok.type in Name.Function:
        info = vocabulary.function_info(tok.value[1:])
        if info is None:
            return Hover(f"`{tok.value}` is not a TXCL function", span)
        return Hover(vocabulary.function_markdown(info), span)
    if tok.type in Keyword:
        doc = vocabulary.keyword_markdown(tok.value)
        return Hover(doc, span) if doc else None
    if tok.type in Name.Attribute:
        key = vocabulary.WITH_KEY_DOCS.get(tok.value.split(".")[0])
        if key is None:
            return Hover(f"`{tok.value}`: a WITH key the op itself reads", span)
        return Hover(key.markdown(), span)
    if tok.type in Name.Variable.Magic:
        return Hover(f"`{tok.value}` is `._txc.{tok.value[1:]}` (the runtime's namespace)", span)
    if tok.type in String.Affix:
        return Hover('`b64"…"`: the value is the base64 of the string\'s UTF-8 bytes', span)
    return None


# ---------------------------------------------------------------- completion


def _document_paths(text: str) -> dict:
    """A skeleton envelope of every path written in the document, for path completion."""
    from txcl.values.paths import PathError, has, write

    skeleton: dict = {}
    for tok in tokens(text):
        if tok.type in Name.Variable:
            segments = _segments(tok.value)
            if not segments or has(skeleton, segments):
                continue
            try:
                skeleton = write(skeleton, segments, {})
            except PathError:
                continue
    return skeleton


def _segments(path: str) -> tuple[str, ...]:
    head = ("_txc",) if path.startswith("@") else ()
    parts = re.findall(r'"([^"]*)"|([^.]+)', path[1:])
    return head + tuple(q or plain for q, plain in parts)


_JUMP_STRING = re.compile(r'(?:@goto\s*=\s*"|EXEC\s*"goto://)(?P<typed>[A-Za-z0-9_/-]*)$', re.IGNORECASE)


def completions(text: str, offset: int, path: str | None = None) -> list[Candidate]:
    """Candidates at `offset`: paths of the document, and (in a typed stack) every path the
    envelope can hold at this rule's scope, with its type and description."""
    before = text[:offset]
    jump = _JUMP_STRING.search(before)
    if jump is not None:  # a stage being typed: `@goto = "3|` or `EXEC "goto://3|`
        from txcl.lsp.navigation import jump_candidates

        typed_so_far = jump.group("typed")
        return [Candidate(t, -len(typed_so_far), t, detail, "stage") for t, detail in jump_candidates(path, typed_so_far)]
    skeleton = _document_paths(text[:offset] + " " + text[offset:])
    typed: dict[str, str] = {}
    view = _typed_view(path, text) if re.search(r"[.@][A-Za-z0-9_\-.\"]*$", before) else None
    if view is not None:
        from txcl.types.shape import lookup
        from txcl.types.workspace import describe, path_entries
        from txcl.values.paths import PathError, has, write

        for segments, shape in path_entries(view.shape):
            found = lookup(view.shape, segments)
            text_of = ast_path_text(segments)
            typed[text_of] = describe(shape, found.certain) + (f" — {shape.description}" if shape.description else "")
            if not has(skeleton, segments):
                try:
                    skeleton = write(skeleton, segments, {})
                except PathError:
                    continue
    found = complete_rule(before, skeleton)
    out = []
    for c in found:
        if c.kind == "path" and before.endswith(c.text):
            continue  # the word being typed is in the document too: offering it back completes nothing
        if c.kind == "path" and c.text in typed:
            c = attrs.evolve(c, meta=typed[c.text])
        out.append(c)
    return out


def ast_path_text(segments: tuple[str, ...]) -> str:
    from txcl.syntax import ast

    return ast.Path(tuple(segments)).source_text


def definition(text: str, offset: int, path: str | None,
               open_texts: dict[Path, str] | None = None) -> list[tuple[str, Span]]:
    """Where the thing under the cursor is defined: a jump's scope (its rule files), a `py://`
    target's function, a path's schema property and writing rules (typed stacks), or the
    rules of the tree that write the path (any stack)."""
    from txcl.lsp.navigation import jump_definition, py_definition

    rule = _parse_for_outline(text, path or "<buffer>")
    found = jump_definition(rule, offset, path) or py_definition(rule, offset, path)
    if found:
        return found
    tok = token_at(text, offset)
    if tok is None or tok.type not in Name.Variable or tok.type in Name.Variable.Magic:
        return []
    view = _typed_view(path, text)
    if view is not None:
        from txcl.types.workspace import definitions

        found = definitions(view, _segments(tok.value))
        if found:
            return found
    from txcl.lsp.references import writers

    return writers(text, _segments(tok.value), path, open_texts or {})


# ---------------------------------------------------------------- outline


@attrs.frozen
class Symbol:
    name: str
    detail: str
    kind: str  # a clause kind ("when", "set_pre", ...), "loop_modifier", "item"
    span: Span
    selection: Span
    children: tuple["Symbol", ...] = ()


_CLAUSE_LABEL = {
    "when": "WHEN", "set_pre": "SET", "select": "SELECT", "set_post": "SET", "with": "WITH",
    "priority": "PRIORITY", "exec": "EXEC", "loop": "LOOP", "emit": "EMIT",
}
_CLAUSE_DETAIL = {"set_pre": "SET PRE", "set_post": "SET POST"}


def _summary(text: str, span: Span, limit: int = 60) -> str:
    body = " ".join(text[span.start.offset:span.end.offset].split())
    return body if len(body) <= limit else body[: limit - 1] + "…"


def _within(inner: Span, outer: Span) -> bool:
    return outer.start.offset <= inner.start.offset and inner.end.offset <= outer.end.offset


def _children(rule: Any, kind: str, span: Span, text: str) -> tuple[Symbol, ...]:
    items: list[tuple[str, Span]] = []
    if kind in ("set_pre", "set_post", "emit"):
        attr = {"set_pre": "set_pre", "set_post": "set_post", "emit": "emit"}[kind]
        items = [(a.target.text, a.span) for a in getattr(rule, attr)]
    elif kind == "with":
        items = [(p.key_text, p.span) for p in rule.with_]
    elif kind == "select" and rule.select is not None:
        items = [(i.target.text, i.span) for i in rule.select.items]
    elif kind == "loop" and rule.loop is not None:
        return tuple(
            Symbol(m.kind.upper(), _summary(text, m.span), "loop_modifier", m.span, m.span)
            for m in rule.loop.modifiers)
    return tuple(Symbol(name, _summary(text, s), "item", s, s) for name, s in items
                 if _within(s, span))


def outline(text: str, filename: str = "<buffer>") -> list[Symbol]:
    """One symbol per clause keyword, in source order, with the items it holds."""
    rule = _parse_for_outline(text, filename)
    if rule is None:
        return _lexical_outline(text)
    out = []
    for mark in rule.clauses:
        label = _CLAUSE_LABEL[mark.kind]
        keyword_end = mark.span.start.offset + len(label)
        selection = span_of(text, mark.span.start.offset, keyword_end)
        out.append(Symbol(label, _summary(text, mark.span), mark.kind, mark.span, selection,
                          _children(rule, mark.kind, mark.span, text)))
    return out


def _parse_for_outline(text: str, filename: str) -> Any:
    """The rule's AST, also for a rule whose only problems are load errors (None: it does not
    parse)."""
    from txcl.check.analyze import parse

    try:
        rule, _ = parse(text, filename)
    except Exception:  # noqa: BLE001 - the outline falls back to the keywords it can see
        log.exception("outline parse failed")
        return None
    return rule


def _lexical_outline(text: str) -> list[Symbol]:
    """Outline of a file that does not parse: each clause keyword up to the next one."""
    marks = []
    in_loop = False
    for tok in tokens(text):
        if tok.type is not Keyword:
            continue
        word = tok.value.upper()
        if word == "LOOP":
            in_loop = True
        elif word in CLAUSE_KEYWORDS and word != "SET":
            in_loop = False
        if word in CLAUSE_KEYWORDS and not (word == "SET" and in_loop and marks and marks[-1][0] == "LOOP"):
            marks.append((word, tok.start))
    out = []
    for i, (word, start) in enumerate(marks):
        end = marks[i + 1][1] if i + 1 < len(marks) else len(text)
        end = start + len(text[start:end].rstrip())
        span = span_of(text, start, end)
        out.append(Symbol(word, _summary(text, span), word.lower(), span,
                          span_of(text, start, start + len(word))))
    return out


# ---------------------------------------------------------------- formatting


def format_document(text: str, filename: str = "<buffer>") -> str:
    """The `txcl fmt` form of the text; raises TxclSyntaxError or txcl.fmt.FormatError."""
    from txcl.fmt import format_text

    return format_text(text, filename)
