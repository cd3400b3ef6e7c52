"""Semantic tokens: the highlighter's tokens, in the protocol's relative encoding.

Clients that colour by semantic tokens (VS Code with a theme that does, Neovim 0.9+) then show
paths, `@` runtime paths, functions, WITH keys, keywords and literals the same way `txcl`'s own
highlighter does, also where the TextMate grammar cannot tell them apart.
"""

from __future__ import annotations

from typing import Any

from pygments.token import Comment, Keyword, Name, Number, Operator, String

from txcl.lsp import positions

TOKEN_TYPES = ["keyword", "enumMember", "function", "variable", "macro", "property", "string", "regexp",
               "number", "operator", "comment"]
TOKEN_MODIFIERS = ["defaultLibrary"]
_INDEX = {name: i for i, name in enumerate(TOKEN_TYPES)}


def _kind(token: Any) -> tuple[str, int] | None:
    """The token type and modifier bits of one highlighter token (None: not coloured)."""
    if token in Comment:
        return "comment", 0
    if token in Keyword.Constant:
        return "enumMember", 0
    if token in Keyword:
        return "keyword", 0
    if token in Name.Function:
        return "function", 1
    if token in Name.Variable.Magic:
        return "macro", 0
    if token in Name.Variable:
        return "variable", 0
    if token in Name.Attribute:
        return "property", 0
    if token in String.Regex:
        return "regexp", 0
    if token in String:
        return "string", 0
    if token in Number:
        return "number", 0
    if token in Operator:
        return "operator", 0
    return None


def semantic_tokens(text: str, encoding: str = positions.UTF16) -> list[int]:
    """The `data` array of a full semantic tokens answer for `text`."""
    from txcl.lsp.analysis import tokens

    merged: list[list] = []  # [start, end, kind]: a string's quotes and body are one token
    for tok in tokens(text):
        kind = _kind(tok.type)
        if kind is None or not tok.value.strip():
            continue
        if merged and merged[-1][2] == kind and merged[-1][1] == tok.start and kind[0] == "string":
            merged[-1][1] = tok.end
        else:
            merged.append([tok.start, tok.end, kind])
    index = positions.LineIndex(text)
    data: list[int] = []
    last_line = last_char = 0
    for start, end, kind in merged:
        offset = start
        for raw in text[start:end].split("\n"):  # a token never spans lines in the answer
            piece = raw.rstrip("\r")
            if piece.strip():
                line, char = index.lsp_of_offset(offset, encoding)
                length = positions.units_before(piece, len(piece), encoding)
                delta_line = line - last_line
                data += [delta_line, char - last_char if delta_line == 0 else char, length,
                         _INDEX[kind[0]], kind[1]]
                last_line, last_char = line, char
            offset += len(raw) + 1
    return data
