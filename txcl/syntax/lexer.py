"""The TXCL scanner: source text → tokens, comments and lexical diagnostics.

One compiled master pattern drives a loop that makes each token a row (a tuple, see
txcl.syntax.tokens). Literals and paths leave the scanner with their syntax-tree node
already built, in the row's `data` (the parser shifts it as it is). Text
the language rejects becomes an `ERROR` token carrying its diagnostic (TX001, TX003, TX004,
TX006–TX009, TX012, TX017); the parser reports it only when it reaches that token, so text
skipped during error recovery never produces a consequential diagnostic.
"""

from __future__ import annotations

import base64
import re

from txcl.errors import Diagnostic, Span, span_of
from txcl.syntax import ast
from txcl.syntax.ast import Comment
from txcl.syntax.compiled import twin as _compiled_twin
from txcl.syntax.tokens import CONTEXTUAL, KEYWORDS, RESERVED, Row, Tok, char_text

# A line break is a token of its own (NL, never passed on) so that lines are counted without
# scanning the blanks between tokens again.
_new_tuple = tuple.__new__  # a Span from its six integers, made in C

_MASTER = re.compile(r"[ \t\r]*(?:" + "|".join((
    # Each alternative is its first character (a literal or a class) and then its group, so
    # the engine rejects an alternative by that character alone, without entering it: a
    # token's text starts one character before its group. Alternatives are tried in order:
    # STRING/USTRING before NAME (`b64"…"`), PATH before DOTBAD, two-character operators
    # before one.
    r'[.@](?P<PATH>[A-Za-z_][A-Za-z0-9_-]*(?:\.(?:[A-Za-z0-9_-]+|"[^"\n]+"))*)',
    r"[=!<>&|,()\[\]*](?P<OP>(?<=[=!])[=~]|(?<=[<>])=|(?<=&)&|(?<=\|)\||(?<=[<>=!,()\[\]*]))",
    r'"(?P<STRING>(?:[^"\\]|\\[\s\S])*")',
    r'b(?P<B64STRING>64"(?:[^"\\]|\\[\s\S])*")',
    r'"(?P<USTRING>)',
    r'b(?P<B64USTRING>64")',
    r"[A-Za-z_](?P<NAME>[A-Za-z0-9_]*)",
    r"\n(?P<NL>)",
    r"[-0-9](?P<NUM>(?<=-)-*[0-9][A-Za-z0-9_.\-]*|(?<=[0-9])[A-Za-z0-9_.\-]*)",
    r"&(?P<CALL>[A-Za-z_][A-Za-z0-9_]*\(?)",
    r"#(?P<COMMENT>[^\n]*)",
    r"[.@](?P<DOTBAD>)",
    r"/(?P<SLASH>)",
    r"[^ \t\r\n](?P<BAD>)",
)) + ")")

_LITERAL_KEYWORDS = {
    "TRUE": lambda span: ast.BoolLit(True, span=span),
    "FALSE": lambda span: ast.BoolLit(False, span=span),
    "NULL": lambda span: ast.NullLit(span=span),
}

# the token kind of each group (a b64 string is a STRING, an unterminated one a USTRING)
_GROUP_NAMES = (None, *(name.removeprefix("B64") for name in
                        sorted(_MASTER.groupindex, key=_MASTER.groupindex.__getitem__)))

_OPS = {
    "==": "EQ", "!=": "NE", "!~": "NMATCH", "=~": "MATCH", "<=": "LE", ">=": "GE",
    "&&": "AND", "||": "OR", "<": "LT", ">": "GT", "=": "ASSIGN", "!": "BANG",
    ",": "COMMA", "(": "LPAR", ")": "RPAR", "[": "LSQB", "]": "RSQB", "*": "STAR",
}
# the tail of a WITH key (a `.`-path right after a NAME): every segment may be quoted or
# start with a digit or '-', since the NAME was the first segment
_KEY_TAIL = re.compile(r'(?:\.(?:[A-Za-z0-9_-]+|"[^"\n]+"))+')
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_REGEX_BODY = re.compile(r"/((?:\\[^\n]|[^\\/\n])*)/")
_ESCAPE = re.compile(r"\\([\s\S])")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_SLASH_ESCAPE = re.compile(r"\\([\s\S])")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_CHAR_HINTS = {
    "{": "use &object(...)",
    "}": "use &object(...)",
    "'": "strings use double quotes",
    "|": "use ||",
}


def unescape(body: str) -> str:
    """String escapes: \\" \\\\ \\n \\r \\t; other pairs keep both characters."""
    if "\\" not in body:
        return body
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), body)


def regex_body(body: str) -> str:
    """`\\/` stands for `/`; every other backslash pair is passed through."""
    if "\\/" not in body:
        return body
    return _SLASH_ESCAPE.sub(lambda m: "/" if m.group(1) == "/" else m.group(0), body)


def _line_span(line: int, col: int, start: int, end: int) -> Span:
    """The span of a token that does not cross a line break."""
    return _new_tuple(Span, (line, col, start, line, col + end - start, end))


def path_segments(text: str) -> tuple[str, ...]:
    """Segments of a lexically valid path token (without its leading `.`/`@`)."""
    body = text[1:]
    if '"' not in body:
        return tuple(body.split("."))
    segs: list[str] = []
    i, n = 0, len(body)
    while i < n:
        if body[i] == '"':
            close = body.index('"', i + 1)
            segs.append(body[i + 1:close])
            i = close + 2
        else:
            dot = body.find(".", i)
            if dot < 0:
                segs.append(body[i:])
                break
            segs.append(body[i:dot])
            i = dot + 1
    return tuple(segs)


class Scanner:
    """Scans one text; `rows` and `comments` are filled by `run()`."""

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self.rows: list[Row] = []
        self.comments: list[Comment] = []

    @property
    def tokens(self) -> list[Tok]:
        """The tokens as objects (made on each call; the parser reads `rows`)."""
        return [Tok(*row) for row in self.rows]

    # ------------------------------------------------------------ helpers

    def _diag(self, code: str, message: str, start: int, end: int, line: int, col: int,
              hint: str | None = None) -> Diagnostic:
        end_line, end_col = self._advance(line, col, self.text[start:end])
        span = span_of(line, col, start, end_line, end_col, end)
        return Diagnostic(code, message, self.filename, span, hint)

    @staticmethod
    def _advance(line: int, col: int, chunk: str) -> tuple[int, int]:
        nl = chunk.count("\n")
        if not nl:
            return line, col + len(chunk)
        return line + nl, len(chunk) - chunk.rfind("\n")

    def _error(self, text: str, start: int, end: int, line: int, col: int,
               diag: Diagnostic, data: str | None = None) -> None:
        end_line, end_col = self._advance(line, col, text[start:end])
        self.rows.append(("ERROR", text[start:end], data, line, col, start,
                          end_line, end_col, end, diag))

    # ------------------------------------------------------------ main loop

    def run(self) -> "Scanner":
        text = self.text
        n = len(text)
        append = self.rows.append
        # A scanner object matches where its last match ended, keeping its state between
        # matches; a token that ends elsewhere (a WITH key tail, a regex, a bad path) starts
        # a new one at its end, and an unterminated string ends the scan.
        following = _MASTER.scanner(text).match
        line = 1
        line_start = 0
        prev = ""  # type of the previous significant token
        while True:
            m = following()
            if m is None:  # only blanks remain
                break
            index = m.lastindex
            pos, end = m.span(index)
            pos -= 1  # the alternative's first character (see _MASTER)
            kind = _GROUP_NAMES[index]
            if kind == "NL":
                line += 1
                line_start = end
                continue
            col = pos - line_start + 1
            if prev == "NAME" and text[pos] == ".":
                tm = _KEY_TAIL.match(text, pos)
                if tm is not None:
                    kind = "PATH"
                    end = tm.end()
                    following = _MASTER.scanner(text, end).match
            if kind == "PATH":
                if end < n and (text[end] in '."' or (text[end - 1] == '"'
                                                        and text[end] in _NAME_CHARS)):
                    end = self._bad_path(pos, line, col)
                    following = _MASTER.scanner(text, end).match
                else:
                    value = text[pos:end]
                    segments = path_segments(value)
                    at = value[0] == "@"
                    end_col = col + end - pos
                    node = ast.Path(("_txc", *segments) if at else segments, at,
                                    span=_new_tuple(Span, (line, col, pos, line, end_col, end)))
                    # a `.`-path right after a NAME is a WITH key tail (grammar: DOT_PATH)
                    append(("DOT_PATH" if prev == "NAME" and not at else "PATH",
                            value, node, line, col, pos, line, end_col, end))
                    prev = "PATH"
                continue
            if kind == "OP":
                value = text[pos:end]
                prev = _OPS[value]
                append((prev, value, None, line, col, pos, line, col + end - pos, end))
                continue
            if kind == "NAME":
                value = text[pos:end]
                lower = value.lower()
                kw = KEYWORDS.get(lower)
                if kw is not None:
                    literal = _LITERAL_KEYWORDS.get(kw)
                    if literal is not None:  # true, false, null: their node in `data`
                        literal = literal(_line_span(line, col, pos, end))
                    append((kw, value, literal, line, col, pos, line, col + end - pos, end))
                    prev = kw
                elif lower in RESERVED:
                    self._error(text, pos, end, line, col, self._diag(
                        "TX012", f"'{value}' is a reserved word", pos, end, line, col))
                    prev = "ERROR"
                else:
                    append(("NAME", value, CONTEXTUAL.get(lower), line, col, pos, line,
                            col + end - pos, end))
                    prev = "NAME"
                continue
            if kind == "STRING":
                value = text[pos:end]
                b64 = value[0] == "b"
                plain = unescape(value[4:-1] if b64 else value[1:-1])
                end_line, end_col = self._advance(line, col, value)
                span = _new_tuple(Span, (line, col, pos, end_line, end_col, end))
                if b64:
                    node = ast.StringLit(base64.b64encode(plain.encode("utf-8", "surrogatepass"))
                                         .decode("ascii"), True, plain, span=span)
                else:
                    node = ast.StringLit(plain, False, plain, span=span)
                append(("STRING", value, node, line, col, pos, end_line, end_col, end))
                if end_line != line:
                    line = end_line
                    line_start = text.rfind("\n", pos, end) + 1
                prev = "STRING"
                continue
            if kind == "NUM":
                self._number(text[pos:end], pos, end, line, col)
                prev = "NUM"
                continue
            if kind == "COMMENT":
                self.comments.append(Comment(text[pos + 1:end], span=_line_span(line, col, pos, end)))
                continue
            if kind == "CALL":
                value = text[pos:end]
                if value[-1] == "(":
                    append(("CALL_START", value, value[1:-1], line, col, pos, line,
                            col + end - pos, end))
                    prev = "CALL_START"
                else:
                    self._error(text, pos, end, line, col, self._diag(
                        "TX017", f"expected '(' after {value}", pos, end, line, col))
                    prev = "ERROR"
                continue
            if kind == "SLASH" and prev in ("MATCH", "NMATCH"):
                rm = _REGEX_BODY.match(text, pos)
                if rm is not None:
                    end = rm.end()
                    append(("REGEX", rm.group(), regex_body(rm.group(1)), line, col, pos,
                            line, col + end - pos, end))
                    prev = "REGEX"
                else:
                    eol = text.find("\n", pos)
                    end = n if eol < 0 else eol
                    self._error(text, pos, end, line, col, self._diag(
                        "TX004", "unterminated regex literal", pos, end, line, col))
                    prev = "ERROR"
                following = _MASTER.scanner(text, end).match
                continue
            if kind == "USTRING":  # runs to the end of the text
                self._error(text, pos, n, line, col, self._diag(
                    "TX003", "unterminated string literal", pos, n, line, col))
                break
            if kind == "DOTBAD":
                c = text[pos:end]
                self._error(text, pos, end, line, col, self._diag(
                    "TX008", f"'{c}' must be followed by a letter or '_' to start a path",
                    pos, end, line, col))
                prev = "ERROR"
                continue
            # SLASH outside a regex position, or any other character
            c = text[pos:end]
            self._error(text, pos, end, line, col, self._diag(
                "TX001", f"unexpected character {char_text(c)}", pos, end, line, col,
                _CHAR_HINTS.get(c)))
            prev = "ERROR"
        return self

    # ------------------------------------------------------------ numbers and bad paths

    def _number(self, value: str, pos: int, end: int, line: int, col: int) -> None:
        if len(value) <= 18 and value.isdigit():  # the common case: a plain integer below 2**63
            # (the NUM pattern admits ASCII characters only, so isdigit() means 0-9 here)
            self.rows.append(("INT", value, ast.IntLit(int(value), value, span=_line_span(line, col, pos, end)),
                              line, col, pos, line, col + end - pos, end))
            return
        nm = _NUMBER.fullmatch(value)
        if nm is None:
            self._error(self.text, pos, end, line, col, self._diag(
                "TX006", f"malformed number '{value}': write -digits or -digits.digits",
                pos, end, line, col, "no exponent, hex or arithmetic"))
            return
        if nm.group(1) is None:
            # (very long digit runs are out of range; int() would refuse them anyway)
            number: int | float = int(value) if len(value) <= 40 else _INT_MAX + 1
            if not _INT_MIN <= number <= _INT_MAX:
                self._out_of_range(value, pos, end, line, col)
                return
            type_ = "INT"
            node_class: type = ast.IntLit
        else:
            number = float(value)
            if number in (float("inf"), float("-inf")):
                self._out_of_range(value, pos, end, line, col)
                return
            type_ = "FLOAT"
            node_class = ast.FloatLit
        node = node_class(number, value, span=_line_span(line, col, pos, end))
        self.rows.append((type_, value, node, line, col, pos, line, col + end - pos, end))

    def _out_of_range(self, value: str, pos: int, end: int, line: int, col: int) -> None:
        self._error(self.text, pos, end, line, col, self._diag(
            "TX007", f"number {value} is out of range", pos, end, line, col), "range")

    def _bad_path(self, pos: int, line: int, col: int) -> int:
        """Report the first problem of a path the fast pattern could not take; returns its end."""
        text = self.text
        n = len(text)
        i = pos + 1
        problem: tuple[str, str, int, int] | None = None
        last_quoted = False
        while i < n:
            c = text[i]
            if c in _NAME_CHARS:
                if last_quoted and problem is None:
                    problem = ("TX009", "quoted path segment must end the path or be followed "
                               "by '.'", i, i + 1)
                while i < n and text[i] in _NAME_CHARS:
                    i += 1
                last_quoted = False
                continue
            if c == '"':
                close = text.find('"', i + 1)
                eol = text.find("\n", i + 1)
                if eol < 0:
                    eol = n
                if close < 0 or close > eol:
                    if problem is None:
                        problem = ("TX009", "unterminated quoted path segment", i, eol)
                    i = eol
                    break
                if problem is None:
                    if text[i - 1] != ".":
                        if last_quoted:
                            problem = ("TX009", "quoted path segment must end the path or be "
                                       "followed by '.'", i, close + 1)
                        else:
                            problem = ("TX009", "quoted path segment must follow '.'", i,
                                       close + 1)
                    elif close == i + 1:
                        problem = ("TX009", "empty quoted path segment", i, close + 1)
                i = close + 1
                last_quoted = True
                continue
            if c == ".":
                nxt = text[i + 1] if i + 1 < n else ""
                if nxt not in _NAME_CHARS and nxt != '"' and problem is None:
                    problem = ("TX008", "", pos, -1)
                i += 1
                last_quoted = False
                continue
            break
        end = i
        if problem is None:  # cannot happen; the fast pattern would have taken the path
            problem = ("TX008", "", pos, -1)
        code, message, s, e = problem
        if code == "TX008":
            message = f"empty segment in path {text[pos:end]}"
            s, e = pos, end
        s_line, s_col = self._advance(line, col, text[pos:s])
        diag = self._diag(code, message, s, e, s_line, s_col)
        self._error(text, pos, end, line, col, diag)
        return end


def scan(text: str, filename: str = "<string>") -> Scanner:
    return Scanner(text, filename).run()


# This module compiled (txcl.syntax.compiled), when the install built it from this source.
_twin = _compiled_twin(__name__, __file__)
if _twin is not None:
    Scanner = _twin.Scanner  # type: ignore[misc]  # noqa: F811
    scan = _twin.scan  # noqa: F811
