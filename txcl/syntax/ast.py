"""The TXCL abstract syntax tree.

Every node is a slotted attrs class with a `span`, treated as immutable (see
`txcl.errors.value_class`: nodes are shared by the parse cache, so a changed node is made
with `attrs.evolve`). Sequences are tuples so nodes are hashable and compare by value. `to_json(node)` gives the JSON form used by
`txcl parse --json` and golden tests.
"""

from __future__ import annotations

import enum
from typing import Any, Union

import attrs

from txcl.errors import NO_SPAN, Span, value_class


def _field_span() -> Any:
    return attrs.field(default=NO_SPAN, eq=False, kw_only=True)


# ---------------------------------------------------------------- paths and literals

_ESCAPE_IN_CANONICAL = {"\\", ".", "*", "?"}


def canonical_segment(segment: str) -> str:
    return "".join("\\" + ch if ch in _ESCAPE_IN_CANONICAL else ch for ch in segment)


@value_class
class Path:
    segments: tuple[str, ...]
    at_sugar: bool = False
    span: Span = _field_span()

    @property
    def text(self) -> str:
        """Canonical text: `.` + segments joined by `.`, with `\\ . * ?` escaped."""
        return "." + ".".join(canonical_segment(s) for s in self.segments)

    @property
    def source_text(self) -> str:
        """The path as an author would write it (`@x` sugar kept, quoted where needed)."""
        segs = self.segments
        prefix = "."
        if self.at_sugar and segs and segs[0] == "_txc" and len(segs) > 1:
            prefix, segs = "@", segs[1:]
        parts = []
        for i, seg in enumerate(segs):
            parts.append(seg if _is_plain_segment(seg, first=i == 0) else f'"{seg}"')
        return prefix + ".".join(parts)


def _is_plain_segment(seg: str, first: bool) -> bool:
    if not seg:
        return False
    if first and not (seg[0].isascii() and (seg[0].isalpha() or seg[0] == "_")):
        return False
    return all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in seg)


@value_class
class IntLit:
    value: int
    text: str
    span: Span = _field_span()


@value_class
class FloatLit:
    value: float
    text: str
    span: Span = _field_span()


@value_class
class StringLit:
    value: str
    b64: bool = False
    plain: str = ""
    span: Span = _field_span()


@value_class
class BoolLit:
    value: bool
    span: Span = _field_span()


@value_class
class NullLit:
    span: Span = _field_span()


@value_class
class ArrayLit:
    items: tuple["ArrayItem", ...]
    span: Span = _field_span()


ArrayItem = Union[IntLit, FloatLit, StringLit, BoolLit, ArrayLit]
Literal = Union[IntLit, FloatLit, StringLit, BoolLit, ArrayLit]


@value_class
class Call:
    name: str
    args: tuple["Value", ...]
    name_span: Span = attrs.field(default=NO_SPAN, eq=False)
    span: Span = _field_span()


Value = Union[IntLit, FloatLit, StringLit, BoolLit, ArrayLit, Path, Call]


@value_class
class Regex:
    """A pattern on the right of `=~`/`!~`. `compiled` is the RE2 object (bytes pattern)."""

    pattern: str
    source: str  # "literal" | "string" | "null"
    compiled: Any = attrs.field(default=None, eq=False, repr=False)
    span: Span = _field_span()


# ---------------------------------------------------------------- conditions


class CmpOp(enum.Enum):
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    MATCH = "=~"
    NOT_MATCH = "!~"


@value_class
class Star:
    bare: bool = False
    span: Span = _field_span()


@value_class
class Comparison:
    left: Path
    op: CmpOp
    right: Union[IntLit, FloatLit, StringLit, BoolLit, NullLit, Regex, Call]
    span: Span = _field_span()


@value_class
class Not:
    operand: "Condition"
    span: Span = _field_span()


@value_class
class And:
    items: tuple["Condition", ...]
    separators: tuple[str, ...] = ()
    span: Span = _field_span()


@value_class
class Or:
    items: tuple["Condition", ...]
    span: Span = _field_span()


Condition = Union[Or, And, Not, Comparison]


@value_class
class When:
    condition: Union[Condition, Star]
    span: Span = _field_span()


# ---------------------------------------------------------------- clauses


@value_class
class Assignment:
    target: Path
    value: Value
    span: Span = _field_span()


@value_class
class SelectItem:
    source: Path
    dest: Path | None = None
    default: Value | None = None
    span: Span = _field_span()

    @property
    def target(self) -> Path:
        return self.dest if self.dest is not None else self.source


@value_class
class Select:
    star: bool
    items: tuple[SelectItem, ...] = ()
    span: Span = _field_span()


@value_class
class WithPair:
    key: tuple[str, ...]
    value: Value
    key_span: Span = attrs.field(default=NO_SPAN, eq=False)
    span: Span = _field_span()

    @property
    def key_text(self) -> str:
        return ".".join(self.key)


@value_class
class Priority:
    value: int
    span: Span = _field_span()


@value_class
class Exec:
    target: str
    target_span: Span = attrs.field(default=NO_SPAN, eq=False)
    span: Span = _field_span()


@value_class
class ClauseMark:
    kind: str
    span: Span = _field_span()


@value_class
class Loop:
    until: Condition
    set: tuple[Assignment, ...] = ()
    every_ns: int | None = None
    max: int | None = None
    modifiers: tuple[ClauseMark, ...] = ()
    span: Span = _field_span()


@value_class
class Comment:
    text: str
    span: Span = _field_span()


@value_class
class Rule:
    when: When | None = None
    set_pre: tuple[Assignment, ...] = ()
    select: Select | None = None
    set_post: tuple[Assignment, ...] = ()
    with_: tuple[WithPair, ...] = ()
    priority: Priority | None = None
    exec: Exec | None = None
    loop: Loop | None = None
    emit: tuple[Assignment, ...] = ()
    clauses: tuple[ClauseMark, ...] = ()
    comments: tuple[Comment, ...] = ()
    filename: str = "<string>"
    span: Span = _field_span()

    @property
    def priority_value(self) -> int:
        return self.priority.value if self.priority is not None else 0


Node = Union[
    Rule, When, Star, Or, And, Not, Comparison, Assignment, Select, SelectItem, WithPair,
    Priority, Exec, Loop, ClauseMark, Comment, Path, IntLit, FloatLit, StringLit, BoolLit,
    NullLit, ArrayLit, Call, Regex,
]


# ---------------------------------------------------------------- JSON form

_SKIP_FIELDS = {"span", "compiled"}


def to_json(node: Any) -> Any:
    """The JSON form of the AST (`txcl parse --json`): `{"node": Class, fields…, "span": [l, c, l, c]}`."""
    if isinstance(node, Path):
        return {"node": "Path", "text": node.text, "at_sugar": node.at_sugar,
                "span": node.span.as_list()}
    if isinstance(node, CmpOp):
        return node.value
    if isinstance(node, Span):
        return node.as_list()
    if isinstance(node, tuple):
        return [to_json(item) for item in node]
    if attrs.has(type(node)):
        out: dict[str, Any] = {"node": type(node).__name__}
        for field in attrs.fields(type(node)):
            if field.name in _SKIP_FIELDS:
                continue
            name = "with" if field.name == "with_" else field.name
            out[name] = to_json(getattr(node, field.name))
        out["span"] = node.span.as_list()
        return out
    return node
