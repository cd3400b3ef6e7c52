"""A compact form of a parse result (a `Rule`, or the diagnostics of a text that does not
parse), for the parse cache on disk (txcl.syntax.diskcache).

`encode` turns the result into nested arrays and scalars written as JSON (never a format
whose reader can run code or crash on crafted bytes: the cache file is outside txcl's
control); `decode` builds the same objects back, several times quicker than parsing the text again:
nodes are made by straight-line field stores (no attrs `__init__`), spans are shared,
and regular expressions are left to be compiled where they are first used. The file name and
the text are not stored: the caller gives them back, so one entry serves a text under any
name. `SCHEMA` names every class and field the form depends on; the cache key includes it,
so a change to the AST makes old entries unreadable instead of wrong.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs

from txcl.errors import NO_SPAN, Diagnostic, Span
from txcl.safecache import dumps, loads
from txcl.syntax import ast

#: Bump when the encoding changes in a way SCHEMA does not show.
CODEC_VERSION = 3  # 2: spans stored as their six integers; 3: JSON, tuples tagged

_NODE_CLASSES: tuple[type, ...] = (
    ast.Path, ast.IntLit, ast.FloatLit, ast.StringLit, ast.BoolLit, ast.NullLit, ast.ArrayLit,
    ast.Call, ast.Regex, ast.Star, ast.Comparison, ast.Not, ast.And, ast.Or, ast.When,
    ast.Assignment, ast.SelectItem, ast.Select, ast.WithPair, ast.Priority, ast.Exec,
    ast.ClauseMark, ast.Loop, ast.Comment, ast.Rule, Diagnostic,
)
# tags below 0 are not classes
_SPAN, _ENUM, _FILE, _TEXT, _TUPLE = -1, -2, -3, -4, -5

_FIELDS: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in attrs.fields(cls)) for cls in _NODE_CLASSES}
_TAG: dict[type, int] = {cls: i for i, cls in enumerate(_NODE_CLASSES)}
# the fields that hold the file name (stored as a mark, given back at decode)
_NAMED_FILE: dict[type, frozenset[str]] = {cls: frozenset() for cls in _NODE_CLASSES}
_NAMED_FILE[ast.Rule] = frozenset({"filename"})
_NAMED_FILE[Diagnostic] = frozenset({"file"})
_SETTERS: list[tuple[type, tuple[Any, ...]]] = [
    (cls, tuple(cls.__dict__[name].__set__ for name in _FIELDS[cls])) for cls in _NODE_CLASSES]

SCHEMA = hashlib.sha256(repr((
    CODEC_VERSION, [(cls.__name__, _FIELDS[cls]) for cls in _NODE_CLASSES], [m.value for m in ast.CmpOp],
)).encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------- encode

# span fields are the ones whose default is NO_SPAN (`span`, `name_span`, `key_span`, …)
_SPAN_FIELDS: dict[type, tuple[bool, ...]] = {
    cls: tuple(f.default is NO_SPAN for f in attrs.fields(cls)) for cls in _NODE_CLASSES}


_SCALARS = frozenset({str, int, float, bool, type(None)})
# what the encoder writes without a look: floats are looked at (JSON holds no infinity)
_STORED_AS_IS = frozenset({str, int, bool, type(None)})


def _node_encoder(cls: type) -> Any:
    """A function giving one `cls` node's stored list: straight-line field reads, span fields
    as span numbers, nested values encoded only when they are not scalars."""
    names = _FIELDS[cls]
    lines = ["def encode_node(o, enc, span, filename, text):"]
    scope: dict[str, Any] = {"SCALARS": _STORED_AS_IS, "type": type, "FILE": _FILE, "TEXT": _TEXT}
    out = [str(_TAG[cls])]
    for i, (name, is_span) in enumerate(zip(names, _SPAN_FIELDS[cls]), 1):
        if is_span:
            out.append(f"span(o.{name})")
            continue
        if name == "compiled":
            out.append("None")  # compiled again where it is first used
            continue
        lines.append(f"    x{i} = o.{name}")
        if name in _NAMED_FILE[cls]:
            lines.append(f"    x{i} = [FILE] if x{i} == filename else x{i}")
        elif cls is Diagnostic and name == "source":
            lines.append(f"    x{i} = [TEXT] if x{i} == text else x{i}")
        else:
            lines.append(f"    if type(x{i}) not in SCALARS: x{i} = enc(x{i})")
        out.append(f"x{i}")
    lines.append(f"    return [{', '.join(out)}]")
    exec(compile("\n".join(lines), f"<txcl codec {cls.__name__}>", "exec"), scope)  # noqa: S102 - our own text
    return scope["encode_node"]


_ENCODERS = {cls: _node_encoder(cls) for cls in _NODE_CLASSES}


def encode(result: ast.Rule | list[Diagnostic], text: str, filename: str) -> bytes:
    """The stored form of one parse result of `text` under `filename`: (spans, tree), the
    spans as flat runs of their six integers, and span fields of the tree as span numbers."""
    spans: dict[Span, int] = {}
    flat_spans: list[int] = []

    def span(value: Span) -> int:
        number = spans.get(value)
        if number is None:
            number = spans[value] = len(spans)
            flat_spans.extend(value)
        return number

    encoders = _ENCODERS

    def enc(value: Any) -> Any:
        kind = type(value)
        if kind is tuple:
            return [_TUPLE, *[item if type(item) in _STORED_AS_IS else enc(item) for item in value]]
        if kind is float:
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError("JSON holds no infinity or NaN")
            return value
        if kind is ast.CmpOp:
            return [_ENUM, value.value]
        encoder = encoders.get(kind)
        if encoder is None:
            if kind in _SCALARS:
                return value
            raise ValueError(f"cannot store a {kind.__name__}")
        return encoder(value, enc, span, filename, text)

    tree = enc(tuple(result)) if isinstance(result, list) else enc(result)
    return dumps([flat_spans, tree])


# ---------------------------------------------------------------- decode

_new = object.__new__


def _node_decoder(cls: type) -> Any:
    """A function building one `cls` from its stored list: straight-line field stores (the
    slot setters for a frozen class such as Diagnostic), span fields looked up by number,
    nested values decoded only when they are lists or tuples."""
    names = _FIELDS[cls]
    frozen = cls.__setattr__ is not object.__setattr__
    lines = ["def build(v, dec, spans):", "    o = new(cls)"]
    scope: dict[str, Any] = {"new": _new, "cls": cls, "list": list, "type": type}
    for i, (name, is_span) in enumerate(zip(names, _SPAN_FIELDS[cls]), 1):
        if frozen:
            scope[f"set{i}"] = cls.__dict__[name].__set__
            store = f"set{i}(o, {{}})"
        else:
            store = f"o.{name} = {{}}"
        if is_span:
            lines.append("    " + store.format(f"spans[v[{i}]]"))
        else:
            lines.append(f"    x = v[{i}]")
            lines.append("    " + store.format("dec(x) if type(x) is list else x"))
    lines.append("    return o")
    exec(compile("\n".join(lines), f"<txcl codec {cls.__name__}>", "exec"), scope)  # noqa: S102 - our own text
    return scope["build"]


_BUILDERS = tuple(_node_decoder(cls) for cls in _NODE_CLASSES)
_WIDTH = tuple(len(_FIELDS[cls]) + 1 for cls in _NODE_CLASSES)


def decode(data: bytes, text: str, filename: str) -> ast.Rule | list[Diagnostic]:
    """The parse result `encode` stored, for `text` under `filename`. Raises ValueError (or
    another exception) on damaged data; the caller then parses the text instead."""
    flat_spans, tree = loads(data)
    if type(flat_spans) is not list or len(flat_spans) % 6 or not all(type(n) is int for n in flat_spans):
        raise ValueError("damaged spans")
    new_tuple = tuple.__new__
    spans = [new_tuple(Span, flat_spans[i:i + 6]) for i in range(0, len(flat_spans), 6)]
    builders = _BUILDERS

    def dec(value: Any) -> Any:
        tag = value[0]
        if tag == _TUPLE:
            return tuple([dec(item) if type(item) is list else item for item in value[1:]])
        if type(tag) is not int:
            raise ValueError("damaged entry")
        if tag >= 0:
            if len(value) != _WIDTH[tag]:
                raise ValueError("damaged node")
            return builders[tag](value, dec, spans)
        if tag == _ENUM:
            return ast.CmpOp(value[1])
        if tag == _FILE:
            return filename
        if tag == _TEXT:
            return text
        raise ValueError(f"unknown tag {tag}")

    result = dec(tree)
    if type(result) is tuple:
        if not all(type(d) is Diagnostic for d in result):
            raise ValueError("not a list of diagnostics")
        return list(result)
    if type(result) is not ast.Rule:
        raise ValueError("not a rule")
    return result


__all__ = ["encode", "decode", "SCHEMA", "CODEC_VERSION"]
