"""Name the exact TX0xx code for a token the LALR table rejected.

The explainer re-reads the failing stretch of tokens with the grammar of grammar/txcl.lark written as
recursive descent, which knows what was expected where (a WITH key, a value after `=`,
a condition after `&&`, …) and so picks the specific code, message and hint. It runs only
after the table has rejected a token, so its speed does not matter. It reports whether it
stopped at the same token as the table; the parser counts disagreements (tests assert
there are none) and falls back to a TX010 at the table's token.
"""

from __future__ import annotations


from txcl.errors import Diagnostic, Span
from txcl.suggest import did_you_mean
from txcl.syntax.tokens import CLAUSE_KEYWORDS, CLAUSE_KW_SET, Tok, describe

_ORDER_OPS = {"EQ", "NE", "LT", "LE", "GT", "GE"}
_MATCH_OPS = {"MATCH", "NMATCH"}
_PATHS = {"PATH", "DOT_PATH"}
_SCALARS = {"INT", "FLOAT", "STRING", "TRUE", "FALSE"}
_COND_START = {"PATH", "DOT_PATH", "LPAR", "BANG"}
_OP_TEXT = {"AND": "&&", "OR": "||", "COMMA": ",", "BANG": "!"}
_WORD_OPERATORS = {"and": "&&", "or": "||", "not": "!"}
_CLAUSE_LIST = "WHEN, SET, SELECT, WITH, PRIORITY, EXEC, LOOP, EMIT"


class _Stop(Exception):
    def __init__(self, diag: Diagnostic, index: int):
        super().__init__(diag.message)
        self.diag = diag
        self.index = index


class _Explainer:
    def __init__(self, tokens: list[Tok], start: int, end_tok: Tok, filename: str):
        self.tokens = tokens
        self.pos = start
        self.end_tok = end_tok
        self.filename = filename
        self.last = ""  # what the last complete clause part was, for TX010 hints
        self.in_loop = False

    # ------------------------------------------------------------ token access

    def peek(self) -> Tok:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else self.end_tok

    def peek2(self) -> Tok:
        i = self.pos + 1
        return self.tokens[i] if i < len(self.tokens) else self.end_tok

    def advance(self) -> Tok:
        tok = self.peek()
        self.pos += 1
        return tok

    def word(self, tok: Tok) -> str | None:
        """EVERY or MAX when `tok` is that contextual word (any casing), else None."""
        if tok.type in ("EVERY", "MAX"):
            return tok.type
        if tok.type == "NAME":
            return tok.data
        return None

    def at_clause_end(self) -> bool:
        t = self.peek().type
        return t == "$END" or t in CLAUSE_KW_SET

    # ------------------------------------------------------------ failing

    def fail(self, code: str, message: str, tok: Tok | None = None, hint: str | None = None,
             span: Span | None = None) -> None:
        tok = tok if tok is not None else self.peek()
        if tok.type == "ERROR" and tok.error is not None:
            raise _Stop(tok.error, self.pos)
        raise _Stop(Diagnostic(code, message, self.filename, span or tok.span, hint), self.pos)

    def fail_error_token(self) -> None:
        tok = self.peek()
        if tok.type == "ERROR":
            raise _Stop(tok.error, self.pos)

    # ------------------------------------------------------------ rule level

    def run(self) -> None:
        while True:
            tok = self.peek()
            t = tok.type
            if t == "$END":
                return
            if t in CLAUSE_KW_SET:
                self.clause(t)
                continue
            self.unexpected()

    def unexpected(self) -> None:
        tok = self.peek()
        self.fail_error_token()
        hint = None
        t = tok.type
        if t in _PATHS:
            hint = {
                "condition": "join conditions with &&, || or ','",
                "loop_set": "separate LOOP SET assignments with ','",
                "select": "separate SELECT items with ','",
            }.get(self.last)
        elif t == "UNTIL":
            hint = "UNTIL is a LOOP modifier: write LOOP UNTIL <condition>"
        elif t in ("AS", "DEFAULT"):
            hint = f"{t} is part of a SELECT item: SELECT .source AS .dest DEFAULT value"
        elif t == "NAME" and tok.value.lower() in _WORD_OPERATORS:
            hint = f"use {_WORD_OPERATORS[tok.value.lower()]}"
        elif t == "NAME":
            words = list(CLAUSE_KEYWORDS) + (["UNTIL", "EVERY", "MAX"] if self.in_loop else [])
            close = did_you_mean(tok.value, words)
            if close:
                hint = f"did you mean {close}?"
        if self.last == "star" and hint is None:
            hint = "WHEN * stands alone"
        expected = f"a clause keyword ({_CLAUSE_LIST})"
        if self.in_loop:
            expected += " or a LOOP modifier (UNTIL, SET, EVERY, MAX)"
        self.fail("TX010", f"unexpected {describe(tok)}; {expected} should come next", tok,
                  hint)

    def clause(self, kw: str) -> None:
        self.in_loop = False
        self.last = ""
        kw_tok = self.advance()
        if kw == "WHEN":
            if self.peek().type == "STAR":
                self.advance()
                self.last = "star"
            elif not self.at_clause_end():
                self.condition("WHEN")
                self.last = "condition"
        elif kw in ("SET", "EMIT"):
            self.assignment()
            while True:
                t = self.peek().type
                if t == "COMMA":
                    self.advance()
                    self.assignment()
                elif t in _PATHS:
                    self.assignment()
                else:
                    break
        elif kw == "SELECT":
            self.select()
        elif kw == "WITH":
            self.with_pair()
            while True:
                tok = self.peek()
                if tok.type == "COMMA":
                    self.advance()
                    self.with_pair()
                elif tok.type == "NAME":
                    self.with_pair()
                elif tok.type in _PATHS:
                    self.fail("TX018", "expected a WITH key (a name such as timeout or "
                              f"secrets.token), found {describe(tok)}", tok)
                else:
                    break
        elif kw == "PRIORITY":
            tok = self.peek()
            if tok.type == "INT":
                self.advance()
            else:
                self.fail_number_override(tok, "TX020", "PRIORITY needs an integer")
        elif kw == "EXEC":
            tok = self.peek()
            if tok.type == "STRING":
                self.advance()
            else:
                self.fail("TX019", f"EXEC needs a string target, found {describe(tok)}", tok)
        elif kw == "LOOP":
            self.loop(kw_tok)

    def fail_number_override(self, tok: Tok, code: str, prefix: str) -> None:
        """An out-of-range integer here is reported with this position's code."""
        if tok.type == "ERROR" and tok.data == "range":
            raise _Stop(Diagnostic(code, f"{prefix}, found number {tok.value}", self.filename,
                                   tok.span), self.pos)
        self.fail(code, f"{prefix}, found {describe(tok)}", tok)

    # ------------------------------------------------------------ SELECT, WITH, LOOP

    def select(self) -> None:
        tok = self.peek()
        if tok.type == "STAR":
            self.advance()
            nxt = self.peek()
            if nxt.type == "COMMA" or nxt.type in _PATHS:
                self.fail("TX021", "SELECT * cannot be combined with other items", nxt)
            self.last = "star_select"
            return
        self.select_item()
        while self.peek().type == "COMMA":
            self.advance()
            tok = self.peek()
            if tok.type == "STAR":
                self.fail("TX021", "SELECT * cannot be combined with other items", tok)
            self.select_item()
        self.last = "select"

    def select_item(self) -> None:
        tok = self.peek()
        if tok.type not in _PATHS:
            self.fail("TX021", f"SELECT needs * or a source path, found {describe(tok)}", tok)
        self.advance()
        if self.peek().type == "AS":
            self.advance()
            tok = self.peek()
            if tok.type not in _PATHS:
                self.fail("TX021", f"expected a destination path after AS, found "
                          f"{describe(tok)}", tok)
            self.advance()
        if self.peek().type == "DEFAULT":
            self.advance()
            self.value()

    def with_pair(self) -> None:
        tok = self.peek()
        if tok.type != "NAME":
            self.fail("TX018", "expected a WITH key (a name such as timeout or "
                      f"secrets.token), found {describe(tok)}", tok)
        name = self.advance()
        key = name.value
        tail = self.peek()
        if tail.type == "DOT_PATH":
            self.advance()
            key += tail.value
        elif tail.type == "PATH":  # an @-path (a `.`-path after a NAME is a DOT_PATH)
            self.fail("TX018", "expected a WITH key (a name such as timeout or "
                      f"secrets.token), found {describe(tail)}", tail)
        self.expect_equals(key)
        self.value()
        self.last = "with"

    def loop(self, kw_tok: Tok) -> None:
        if not self.loop_modifier_start():
            if self.at_clause_end():
                raise _Stop(Diagnostic("TX029", "LOOP requires an UNTIL condition",
                                       self.filename, kw_tok.span), self.pos)
            self.in_loop = True
            self.unexpected()
        while self.loop_modifier_start():
            tok = self.advance()
            kind = self.word(tok) or tok.type
            if kind == "UNTIL":
                self.condition("LOOP UNTIL")
                self.last = "condition"
            elif kind == "SET":
                self.assignment()
                while self.peek().type == "COMMA":
                    self.advance()
                    self.assignment()
                self.last = "loop_set"
            elif kind == "EVERY":
                nxt = self.peek()
                if nxt.type in ("STRING", "INT"):
                    self.advance()
                else:
                    self.fail_number_override(
                        nxt, "TX031", 'LOOP EVERY needs a duration such as "250ms" or a '
                        "whole number of milliseconds")
                self.last = "every"
            else:  # MAX
                nxt = self.peek()
                if nxt.type == "INT":
                    self.advance()
                else:
                    self.fail_number_override(nxt, "TX030", "LOOP MAX needs a positive integer")
                self.last = "max"
            self.in_loop = True
        if not self.at_clause_end():
            self.unexpected()
        self.in_loop = False

    def loop_modifier_start(self) -> bool:
        tok = self.peek()
        return tok.type in ("UNTIL", "SET") or self.word(tok) is not None

    # ------------------------------------------------------------ assignments and values

    def assignment(self) -> None:
        tok = self.peek()
        if tok.type not in _PATHS:
            self.fail("TX013", "expected a path (.name or @name) to assign to, found "
                      f"{describe(tok)}", tok)
        target = self.advance()
        self.expect_equals(target.value)
        self.value()

    def expect_equals(self, target: str) -> None:
        tok = self.peek()
        if tok.type == "ASSIGN":
            self.advance()
            return
        hint = None
        if tok.type in _SCALARS or tok.type in _PATHS or tok.type in ("CALL_START", "LSQB"):
            hint = f"write {target} = {tok.value}{'...' if tok.type == 'CALL_START' else ''}"
        self.fail("TX014", f"expected '=' after {target}, found {describe(tok)}", tok, hint)

    def value(self) -> None:
        tok = self.peek()
        t = tok.type
        if t in _SCALARS or t in _PATHS:
            self.advance()
        elif t == "LSQB":
            self.array()
        elif t == "CALL_START":
            self.call(const=None)
        else:
            self.fail_value(tok)

    def fail_value(self, tok: Tok) -> None:
        hint = None
        if tok.type == "NULL":
            hint = 'use &json("null")'
        elif tok.type == "ERROR" and tok.value in ("{", "}"):
            hint = "use &object(...)"
            raise _Stop(Diagnostic("TX015", _value_message(describe(tok)), self.filename,
                                   tok.span, hint), self.pos)
        elif tok.type == "NAME" and tok.value.lower() == "b64":
            hint = 'write b64"..." in lower case with no space'
        elif tok.type == "NAME" and self.peek2().type == "LPAR":
            hint = f"calls are written &{tok.value}(...)"
        self.fail("TX015", _value_message(describe(tok)), tok, hint)

    def array(self) -> None:
        self.advance()  # [
        if self.peek().type == "RSQB":
            self.advance()
            return
        while True:
            tok = self.peek()
            t = tok.type
            if t in _SCALARS:
                self.advance()
            elif t == "LSQB":
                self.array()
            elif t in _PATHS or t in ("CALL_START", "NULL"):
                self.fail("TX016", f"array elements must be literals, found {describe(tok)}",
                          tok, "use &array(...)")
            else:
                self.fail("TX016", f"expected ',' or ']' in array, found {describe(tok)}", tok)
            tok = self.peek()
            if tok.type == "COMMA":
                self.advance()
                if self.peek().type == "RSQB":
                    self.advance()
                    return
            elif tok.type == "RSQB":
                self.advance()
                return
            else:
                self.fail("TX016", f"expected ',' or ']' in array, found {describe(tok)}", tok)

    def call(self, const: str | None) -> None:
        """A call; `const` is the condition context (WHEN / LOOP UNTIL) for const calls."""
        head = self.advance()
        name = head.data
        if self.peek().type == "RPAR":
            self.advance()
            return
        while True:
            tok = self.peek()
            if const is None:
                self.value()
            elif tok.type in _SCALARS:
                self.advance()
            elif tok.type == "LSQB":
                self.array()
            elif tok.type == "CALL_START":
                self.call(const)
            elif tok.type in _PATHS:
                self.fail("TX028", f"{const} function arguments must be literals, but &{name} "
                          f"reads {tok.value}", tok, "compute it with EMIT in an earlier scope "
                          "and test the stored result here")
            else:
                self.fail_value(tok)
            tok = self.peek()
            if tok.type == "COMMA":
                self.advance()
            elif tok.type == "RPAR":
                self.advance()
                return
            else:
                self.fail("TX017", f"expected ',' or ')' in the arguments of &{name}, found "
                          f"{describe(tok)}", tok)

    # ------------------------------------------------------------ conditions

    def condition(self, ctx: str) -> None:
        self.and_cond(ctx)
        while self.peek().type == "OR":
            op = self.advance()
            self.after_operator(ctx, op)
            self.and_cond(ctx)

    def and_cond(self, ctx: str) -> None:
        self.not_cond(ctx)
        while self.peek().type in ("AND", "COMMA"):
            op = self.advance()
            self.after_operator(ctx, op)
            self.not_cond(ctx)

    def after_operator(self, ctx: str, op: Tok) -> None:
        tok = self.peek()
        if tok.type not in _COND_START:
            self.fail_error_token()
            self.fail("TX024", f"{ctx} expected a condition after '{_OP_TEXT[op.type]}'", tok,
                      span=op.span)

    def not_cond(self, ctx: str) -> None:
        tok = self.peek()
        t = tok.type
        if t == "BANG":
            self.advance()
            self.after_operator(ctx, tok)
            self.not_cond(ctx)
        elif t == "LPAR":
            self.advance()
            inner = self.peek()
            if inner.type == "RPAR":
                self.fail("TX025", f"{ctx} expected a condition inside '()'", inner,
                          span=Span(tok.spos, inner.epos))
            if inner.type not in _COND_START:
                self.fail("TX022", f"{ctx} expected a path or '(', found {describe(inner)}",
                          inner)
            self.condition(ctx)
            close = self.peek()
            if close.type != "RPAR":
                self.fail("TX025", f"{ctx} expected ')' to close the group opened at "
                          f"{tok.line}:{tok.col}", close)
            self.advance()
        elif t in _PATHS:
            self.comparison(ctx)
        else:
            self.fail("TX022", f"{ctx} expected a path or '(', found {describe(tok)}", tok)

    def comparison(self, ctx: str) -> None:
        path = self.advance()
        op = self.peek()
        if op.type in _ORDER_OPS:
            self.advance()
            tok = self.peek()
            t = tok.type
            if t in _SCALARS or t == "NULL":
                self.advance()
            elif t == "CALL_START":
                self.call(const=ctx)
            else:
                hint = "a condition compares a path with a constant" if t in _PATHS else None
                self.fail("TX026", f"{ctx} expected a string, number, true, false, null or "
                          f"&function(...) after '{op.value}', found {describe(tok)}", tok, hint)
        elif op.type in _MATCH_OPS:
            self.advance()
            tok = self.peek()
            if tok.type in ("REGEX", "STRING", "NULL"):
                self.advance()
            else:
                self.fail("TX027", f"{ctx} '=~' and '!~' take a /regex/, a string or null, "
                          f"found {describe(tok)}", tok)
        else:
            self.fail("TX023", f"{ctx} expected a comparison operator (==, !=, <, <=, >, >=, "
                      f"=~, !~) after {path.value}, found {describe(op)}", op)


def _value_message(found: str) -> str:
    return ("expected a value (string, number, true, false, [array], path or &function(...)), "
            f"found {found}")


def explain(tokens: list[Tok], start: int, bad: int, end_tok: Tok,
            filename: str) -> tuple[Diagnostic, bool]:
    """The diagnostic for the table's rejection of tokens[bad] (parse began at `start`).

    Returns (diagnostic, agreed): `agreed` is False when the explainer found no error at
    `bad` and the diagnostic is a generic fallback.
    """
    ex = _Explainer(tokens, start, end_tok, filename)
    try:
        ex.run()
    except _Stop as stop:
        if stop.index == bad:
            return stop.diag, True
    tok = tokens[bad] if bad < len(tokens) else end_tok
    if tok.type == "ERROR" and tok.error is not None:
        return tok.error, True
    return Diagnostic("TX010", f"unexpected {describe(tok)}", filename, tok.span), False
