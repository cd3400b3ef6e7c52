"""Shared helpers for the editor-support tests: which files are valid, and the expected
highlighting category of every character according to the Pygments lexer."""

from __future__ import annotations

from pathlib import Path

from pygments.token import Comment, Error, Keyword, Name, Number, Operator, Punctuation, String, Whitespace

from txcl.highlight import TxclLexer
from testtools import rule_files

REPO = Path(__file__).resolve().parent.parent.parent
SAMPLES = sorted((REPO / "tests" / "highlight" / "samples").glob("*.txcl"))
_SKIP_DIRS = {"node_modules", ".git", "build", "dist", ".venv", "venv"}


def valid_txcl_files() -> list[Path]:
    """Sample files, examples and every other .txcl file the parser accepts without a
    syntax error (without the parser: samples and examples only)."""
    try:
        from txcl.syntax.parser import parse_rule
    except ImportError:
        parse_rule = None
    from txcl.errors import TxclSyntaxError

    found = []
    for path in rule_files(REPO):
        rel = path.relative_to(REPO)
        if _SKIP_DIRS.intersection(rel.parts) or rel.parts[:2] == ("editors", "vscode"):
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        if parse_rule is None:
            if path in SAMPLES or "examples" in rel.parts:
                found.append(path)
            continue
        try:
            parse_rule(text, filename=str(path))
        except TxclSyntaxError as exc:
            if any(d.code.startswith("TX0") for d in exc.diagnostics):
                continue
        found.append(path)
    return found


def category(token: object) -> str | None:
    """The coarse highlighting category of a Pygments token type (None: not compared)."""
    if token in Whitespace:
        return None
    if token in Error:
        return "error"
    if token in Comment:
        return "comment"
    if token in Keyword.Constant:
        return "constant"
    if token in Keyword:
        return "keyword"
    if token in Name.Variable.Magic:
        return "txc-path"
    if token in Name.Variable:
        return "path"
    if token in Name.Function:
        return "function"
    if token in Name.Attribute:
        return "with-key"
    if token in String.Regex:
        return "regex"
    if token in String.Escape:
        return "escape"
    if token in String:
        return "string"
    if token in Number:
        return "number"
    if token in Operator:
        return "operator"
    if token in Punctuation:
        return "punctuation"
    return "other"


def char_categories(text: str) -> list[str | None]:
    """One category per code point of `text`."""
    cats: list[str | None] = [None] * len(text)
    for start, token, value in TxclLexer().get_tokens_unprocessed(text):
        cat = category(token)
        for i in range(start, start + len(value)):
            cats[i] = cat
    return cats
