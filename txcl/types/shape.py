"""What the envelope can hold at one point of a walk: a trie of path segments, each node with
its possible JSON types, its possible values (when they are few and known), whether it is
certainly there, and whether members the trie does not list may exist.

The lattice is small on purpose: `join` (two walks meet), `write` (a rule writes a value), and
`lookup` (a rule reads a path). A node's `open` flag is what keeps the checker sound where it
knows nothing: an object an untyped op answered, an explicitly open schema object, `_txc`.
"""

from __future__ import annotations

from txcl.vocabulary import json_type

import functools
import json
from typing import Any, Iterable, Iterator

import attrs

ALL_TYPES: frozenset[str] = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})
SCALARS = frozenset({"null", "boolean", "integer", "number", "string"})
MAX_ENUM = 64  # more possible values than this: any value of the types
MAX_DEPTH = 24  # deeper trie levels are not tracked (open)


def type_of(value: Any) -> str:
    """The JSON type name of a Python JSON value (bool before int)."""
    return json_type(value)


def enum_key(value: Any) -> str:
    """A hashable, canonical form of a JSON value (for sets of possible values)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def enum_values(keys: Iterable[str]) -> list[Any]:
    return [json.loads(k) for k in sorted(keys)]


@attrs.frozen
class Shape:
    """One node: the value at a path (given that its parent is there)."""

    types: frozenset[str] = ALL_TYPES
    certain: bool = False  # present whenever its parent is
    enum: frozenset[str] | None = None  # enum_key of each possible value; None: any value
    props: tuple[tuple[str, "Shape"], ...] = ()  # known object members, sorted by name
    open: bool = True  # object members beyond `props` may exist (of any shape)
    items: "Shape | None" = None  # array elements (None: any)
    description: str | None = None
    origins: frozenset[str] = frozenset()  # where the value comes from, for hover and messages

    def prop(self, name: str) -> "Shape | None":
        for key, child in self.props:
            if key == name:
                return child
        return None

    @property
    def prop_map(self) -> dict[str, "Shape"]:
        return dict(self.props)

    def with_props(self, props: dict[str, "Shape"]) -> "Shape":
        return attrs.evolve(self, props=tuple(sorted(props.items())))

    def maybe(self) -> "Shape":
        return self if not self.certain else Shape(self.types, False, self.enum, self.props, self.open, self.items,
                                                   self.description, self.origins)

    def present(self) -> "Shape":
        """This shape, certainly there."""
        return self if self.certain else Shape(self.types, True, self.enum, self.props, self.open, self.items,
                                               self.description, self.origins)


ANY = Shape()
ANY_PRESENT = Shape(certain=True)


def literal(value: Any, origin: str | None = None) -> Shape:
    """The shape of one known JSON value."""
    if origin is None and (value is None or type(value) in (str, int, float, bool)):
        return _scalar(type(value), value)
    kind = type_of(value)
    origins = frozenset({origin}) if origin else frozenset()
    if kind == "object":
        props = {k: literal(v, origin) for k, v in value.items()}
        return Shape(frozenset({"object"}), True, None, tuple(sorted(props.items())), False, None, None, origins)
    if kind == "array":
        items = None
        for item in value:
            items = literal(item, origin) if items is None else join(items, literal(item, origin))
        return Shape(frozenset({"array"}), True, None, (), False, items or Shape(frozenset(), True), None, origins)
    return Shape(frozenset({kind}), True, frozenset({enum_key(value)}), (), False, None, None, origins)


@functools.lru_cache(maxsize=4096)
def _scalar(kind: type, value: Any) -> Shape:
    return Shape(frozenset({type_of(value)}), True, frozenset({enum_key(value)}), (), False)


def of_types(types: Iterable[str], origin: str | None = None, certain: bool = True) -> Shape:
    return Shape(frozenset(types), certain, None, (), True, None, None, frozenset({origin}) if origin else frozenset())


def join(a: Shape, b: Shape) -> Shape:
    """Either of two shapes (where two walks meet, or a write that may not happen)."""
    if a is b:
        return a
    if a.enum is None or b.enum is None:
        enum = None
    else:
        enum = a.enum | b.enum
        if len(enum) > MAX_ENUM:
            enum = None
    props: dict[str, Shape] = {}
    left, right = a.prop_map, b.prop_map
    for name in left.keys() | right.keys():
        x, y = left.get(name), right.get(name)
        if x is not None and y is not None:
            props[name] = join(x, y)
        else:
            only = x if x is not None else y
            other_open = (b if x is not None else a).open and "object" in (b if x is not None else a).types
            props[name] = only.maybe() if not other_open else attrs.evolve(
                only.maybe(), types=ALL_TYPES, enum=None, open=True, items=None)
    if "array" in a.types and "array" in b.types:
        items = None if a.items is None or b.items is None else join(a.items, b.items)
    else:
        items = a.items if "array" in a.types else b.items
    return Shape(a.types | b.types, a.certain and b.certain, enum, tuple(sorted(props.items())),
                 a.open or b.open, items, a.description or b.description, a.origins | b.origins)


def join_all(shapes: Iterable[Shape]) -> Shape | None:
    out = None
    for shape in shapes:
        out = shape if out is None else join(out, shape)
    return out


# ---------------------------------------------------------------- reading

ABSENT, UNKNOWN, KNOWN = "absent", "unknown", "known"


@attrs.frozen
class Found:
    """What a read finds: `status` absent (certainly missing on this walk), unknown (the trie
    does not know: anything may be there), or known (`shape`; `certain` when every step is)."""

    status: str
    shape: Shape | None = None
    certain: bool = False


def lookup(root: Shape, segments: tuple[str, ...]) -> Found:
    node, certain = root, True
    for depth, segment in enumerate(segments):
        if depth >= MAX_DEPTH:
            return Found(UNKNOWN)
        candidates = []
        open_here = False
        if "object" in node.types:
            child = node.prop(segment)
            if child is not None:
                candidates.append(child)
            elif node.open:
                open_here = True
        if "array" in node.types and segment.isdigit():
            if node.items is None:
                open_here = True
            else:
                candidates.append(node.items.maybe())
        if open_here:
            return Found(UNKNOWN)
        if not candidates:
            return Found(ABSENT)
        step = candidates[0] if len(candidates) == 1 else join(candidates[0], candidates[1])
        certain = certain and step.certain and node.types <= {"object"}
        node = step
    return Found(KNOWN, node, certain)


def paths(root: Shape, prefix: tuple[str, ...] = (), depth: int = 0) -> Iterator[tuple[tuple[str, ...], Shape]]:
    """Every known path below `root` with its shape (array elements as segment "0")."""
    if depth >= MAX_DEPTH:
        return
    for name, child in root.props:
        here = (*prefix, name)
        yield here, child
        yield from paths(child, here, depth + 1)
    if root.items is not None and "array" in root.types:
        here = (*prefix, "0")
        yield from paths(root.items, here, depth + 1)


# ---------------------------------------------------------------- writing

def write(root: Shape, segments: tuple[str, ...], value: Shape, certain: bool) -> Shape:
    """`root` after a value of shape `value` is merged at `segments` (the envelope merge: a
    scalar replaces, an object deep-merges, an array appends); `certain`: the write happens on
    every walk through this point."""
    if not segments:
        merged = _merge(root, value)
        return merged if certain else join(root, merged)
    if len(segments) > MAX_DEPTH:
        return attrs.evolve(root, open=True, types=root.types | {"object"})
    head, rest = segments[0], segments[1:]
    if head.isdigit() and "array" in root.types and "object" not in root.types:
        items = root.items if root.items is not None else ANY
        changed = write(items, rest, value, certain) if rest else _merge(items, value)
        return attrs.evolve(root, items=join(items, changed), enum=None)
    is_object = "object" in root.types
    old = root.prop(head) if is_object else None
    if old is None and is_object and root.open:
        old = ANY
    new = write(old if old is not None else _EMPTY, rest, value, certain) if rest else (
        _merge(old, value) if old is not None else value)
    if certain:
        new = new.present()
    else:
        new = join(old, new) if old is not None else new.maybe()
    props = root.prop_map if is_object else {}
    props[head] = new
    types = frozenset({"object"}) if certain else root.types | {"object"}
    return Shape(types, root.certain, None, tuple(sorted(props.items())), root.open if is_object else False,
                 None if certain else root.items, root.description, root.origins)


_EMPTY = Shape(frozenset(), False, None, (), False)


def _merge(old: Shape, new: Shape) -> Shape:
    """The value after `new` is merged over `old` (the type change wins; objects deep-merge,
    arrays append)."""
    if new.types <= {"object"} and "object" in new.types and "object" in old.types:
        props = old.prop_map
        for name, child in new.props:
            if name in props:
                props[name] = _merge(props[name], child) if child.certain else join(props[name], _merge(props[name], child))
            else:
                props[name] = child
        return Shape(frozenset({"object"}), True, None, tuple(sorted(props.items())), old.open or new.open,
                     None, new.description or old.description, old.origins | new.origins)
    if new.types <= {"array"} and "array" in new.types and "array" in old.types:
        items = None if old.items is None or new.items is None else join(old.items, new.items)
        return Shape(new.types, True, None, new.props, new.open, items, new.description, new.origins)
    return new.present()


def ensure_present(root: Shape, segments: tuple[str, ...]) -> Shape:
    """`root` where the value at `segments` is certainly there (after a SET POST that writes
    it when missing, on a walk where the rule certainly runs)."""
    if not segments:
        return attrs.evolve(root, certain=True)
    child = root.prop(segments[0])
    if child is None or root.types != frozenset({"object"}):
        return root
    props = root.prop_map
    props[segments[0]] = attrs.evolve(ensure_present(child, segments[1:]), certain=True)
    return attrs.evolve(root, props=tuple(sorted(props.items())))


def absent_object() -> Shape:
    """A closed object holding nothing (an op answer known to be `{}`)."""
    return Shape(frozenset({"object"}), True, None, (), False)


def describe_types(types: Iterable[str]) -> str:
    order = ["object", "array", "string", "integer", "number", "boolean", "null"]
    names = [t for t in order if t in set(types)]
    if "integer" in names and "number" in names:
        names.remove("integer")
    return " or ".join(names) if names else "nothing"


__all__ = ["Shape", "ANY", "ANY_PRESENT", "ALL_TYPES", "literal", "of_types", "join", "join_all", "lookup",
           "Found", "write", "paths", "type_of", "enum_key", "enum_values", "describe_types", "ABSENT",
           "UNKNOWN", "KNOWN", "absent_object", "ensure_present"]
