"""Placeholder explainer (replaced below)."""
from __future__ import annotations
from txcl.errors import Diagnostic
from txcl.syntax.tokens import Tok, describe


def explain(tokens: list[Tok], start: int, bad: int, end_tok: Tok, filename: str):
    tok = tokens[bad] if bad < len(tokens) else end_tok
    if tok.error is not None:
        return tok.error, True
    return Diagnostic("TX010", f"unexpected {describe(tok)}", filename, tok.span), False
