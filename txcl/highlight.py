"""Pygments lexer for TXCL.

The lexer follows the language's lexical rules closely enough that a valid file never
produces an error token, and every character of the input ends up in exactly one token
(the tests check both against every `.txcl` file in the repository). It is a highlighter,
not a parser: it does not check clause order or value positions.

Registered as the `txcl` Pygments lexer through the `pygments.lexers` entry point, so
`pygmentize -l txcl file.txcl` works once the package is installed.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from pygments.lexer import RegexLexer, bygroups, default, include
from pygments.token import (
    Comment,
    Error,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Whitespace,
)

from txcl.vocabulary import CLAUSE_KEYWORDS, CONSTANTS, ITEM_WORDS, LOOP_MODIFIERS, RESERVED_WORDS

__all__ = [
    "TxclLexer", "CLAUSE_KEYWORDS", "KEYWORDS", "LOOP_MODIFIERS", "RESERVED_WORDS", "CONSTANTS",
]

KEYWORDS = CLAUSE_KEYWORDS + ITEM_WORDS + ("UNTIL",)

# A path: "." or "@", a name start, then name characters; further segments are names
# (which may start with a digit or "-") or quoted segments.
_SEGMENT = r'(?:[A-Za-z0-9_-]+|"[^"\n]+")'
_PATH_BODY = r"[A-Za-z_][A-Za-z0-9_-]*(?:\." + _SEGMENT + r")*"
PATH_RE = r"[.@]" + _PATH_BODY
# A WITH key: identifier, optionally glued to a dotted tail.
_WITH_KEY_RE = r"[A-Za-z_][A-Za-z0-9_]*(?:\." + _SEGMENT + r")*"
# The longest run that starts like a number; only exact ints and
# floats are numbers, anything else in the run is a malformed number.
_NUMBER_RUN_RE = r"-?[0-9][0-9A-Za-z_.-]*"
_INT_RE = re.compile(r"-?[0-9]+")
_FLOAT_RE = re.compile(r"-?[0-9]+\.[0-9]+")


def _kw(names: tuple[str, ...]) -> str:
    """Case-insensitive whole-word alternation."""
    return r"(?i)\b(?:" + "|".join(n.lower() for n in names) + r")\b(?![A-Za-z0-9_])"


def _number(lexer: Any, match: re.Match[str]) -> Iterator[tuple[int, Any, str]]:
    text = match.group()
    if _FLOAT_RE.fullmatch(text):
        yield match.start(), Number.Float, text
    elif _INT_RE.fullmatch(text):
        yield match.start(), Number.Integer, text
    else:
        yield match.start(), Error, text


class TxclLexer(RegexLexer):
    """Lexer for TXCL rule files (`*.txcl`)."""

    name = "TXCL"
    aliases = ["txcl"]
    filenames = ["*.txcl"]
    mimetypes = ["text/x-txcl"]
    url = "https://github.com/LoremLabs/thanks-computer"
    version_added = ""

    def __init__(self, **options: Any) -> None:
        # Keep the text exactly as given: no stripped or added newlines, so token
        # values always concatenate back to the input.
        options.setdefault("stripnl", False)
        options.setdefault("ensurenl", False)
        super().__init__(**options)

    tokens = {
        "common": [
            (r"[ \t\r\n]+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (r'(b64)(")', bygroups(String.Affix, String.Double), "string"),
            (r'"', String.Double, "string"),
            (r"@" + _PATH_BODY, Name.Variable.Magic),  # @x is ._txc.x, the runtime's namespace
            (PATH_RE, Name.Variable),
            (r"&[A-Za-z_][A-Za-z0-9_]*(?=\()", Name.Function),
            (r"&[A-Za-z_][A-Za-z0-9_]*", Error),  # &name without "(" (TX017)
            (r"=~|!~", Operator, "regex"),
            (r"==|!=|<=|>=|&&|\|\||[<>=!*]", Operator),
            (r"[(),\[\]]", Punctuation),
            (_NUMBER_RUN_RE, _number),
            (_kw(CONSTANTS), Keyword.Constant),
            (_kw(RESERVED_WORDS), Error),  # FN LET IF ELSE RETURN may not be used (TX012)
        ],
        "root": [
            include("common"),
            (_kw(("LOOP",)), Keyword, "loop"),
            (_kw(KEYWORDS), Keyword),
            # WITH keys (and stray identifiers): `every` and `max` are plain names here.
            (_WITH_KEY_RE, Name.Attribute),
        ],
        "loop": [
            include("common"),
            # Inside LOOP, the modifiers (including the contextual EVERY and MAX) are
            # keywords; another clause keyword ends the LOOP clause.
            (_kw(LOOP_MODIFIERS + ("LOOP",)), Keyword),
            (_kw(tuple(k for k in CLAUSE_KEYWORDS if k not in ("SET", "LOOP"))), Keyword, "#pop"),
            (_kw(("AS", "DEFAULT")), Keyword),
            (_WITH_KEY_RE, Name.Attribute),
        ],
        "string": [
            (r'"', String.Double, "#pop"),
            (r'\\["\\nrt]', String.Escape),
            (r"\\", String.Double),  # other backslash sequences keep both characters
            (r'[^"\\]+', String.Double),
        ],
        "regex": [
            # A regex literal may follow =~ / !~ after whitespace and comments.
            (r"[ \t\r\n]+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (r"/(?:\\.|[^/\\\n])*/", String.Regex, "#pop"),
            (r"/[^\n]*", Error, "#pop"),  # unterminated regex (TX004)
            default("#pop"),
        ],
    }

