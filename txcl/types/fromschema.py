"""A JSON Schema as the shape of the values it accepts (txcl.types.shape).

What is understood: `type` (and type unions), `enum`, `const`, `properties` with `required`,
`additionalProperties`, `patternProperties`, `items`, `prefixItems`, `oneOf`/`anyOf` (either
branch), `allOf` (every branch), `$ref` (inside the file and to sibling files), `description`.
Everything else (`minimum`, `pattern`, `format`, …) narrows values the checker does not track,
so it is ignored: the shape may accept more than the schema, never less.

Closed objects: an object schema with `properties` and no `additionalProperties` counts as
closed — a path below it that it does not list is reported as unknown. An explicitly open
object (`additionalProperties: true` or a schema, or `patternProperties`) and an object schema
that lists no properties at all accept any path below them.
"""

from __future__ import annotations

from typing import Any

import attrs

from txcl.types.schema import SchemaFile, SchemaSet
from txcl.types.shape import ALL_TYPES, ANY, MAX_DEPTH, Shape, enum_key, join, type_of

_MAX_REF_DEPTH = 16


def to_shape(schema: Any, file: SchemaFile, schemas: SchemaSet, origin: str, depth: int = 0) -> Shape:
    """The shape of the values `schema` (a node of `file`) accepts; `certain` is left False
    (the caller knows whether the place is required)."""
    if depth > MAX_DEPTH or schema is True or not isinstance(schema, dict):
        return attrs.evolve(ANY, origins=frozenset({origin})) if schema is not False else Shape(frozenset())
    ref = schema.get("$ref")
    if isinstance(ref, str) and depth <= _MAX_REF_DEPTH:
        found = schemas.resolve(ref, file)
        if found is None:
            return attrs.evolve(ANY, origins=frozenset({origin}))
        target, target_file, _ = found
        base = to_shape(target, target_file, schemas, origin, depth + 1)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        if set(rest) <= {"description", "title", "$comment", "examples", "default"}:
            return attrs.evolve(base, description=rest.get("description") or base.description)
        return _both(base, to_shape(rest, file, schemas, origin, depth + 1))
    branches = [b for key in ("oneOf", "anyOf") for b in (schema.get(key) or []) if isinstance(schema.get(key), list)]
    own = _own(schema, file, schemas, origin, depth)
    if branches:
        either = None
        for branch in branches:
            shape = to_shape(branch, file, schemas, origin, depth + 1)
            either = shape if either is None else join(either, shape)
        own = _both(own, either) if either is not None else own
    all_of = schema.get("allOf")
    if isinstance(all_of, list):
        for branch in all_of:
            own = _both(own, to_shape(branch, file, schemas, origin, depth + 1))
    return own


def _own(schema: dict, file: SchemaFile, schemas: SchemaSet, origin: str, depth: int) -> Shape:
    types = _types(schema)
    enum = None
    values = None
    if "const" in schema:
        values = [schema["const"]]
    elif isinstance(schema.get("enum"), list):
        values = schema["enum"]
    if values is not None:
        enum = frozenset(enum_key(v) for v in values)
        types = frozenset(t for t in types if any(_fits(type_of(v), t) for v in values))
    props: dict[str, Shape] = {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    for name, sub in properties.items():
        child = to_shape(sub, file, schemas, origin, depth + 1)
        props[name] = attrs.evolve(child, certain=name in required)
    extra = schema.get("additionalProperties", None)
    pattern = isinstance(schema.get("patternProperties"), dict) and bool(schema["patternProperties"])
    if extra is None:
        open_ = pattern or not properties  # an object that lists nothing says nothing of its members
    else:
        open_ = extra is not False or pattern
    for name in required:  # required but not described: there, of any type
        if isinstance(name, str) and name not in props:
            props[name] = attrs.evolve(ANY, certain=True, origins=frozenset({origin}))
    items = None
    item_schemas = []
    if isinstance(schema.get("prefixItems"), list):
        item_schemas += schema["prefixItems"]
    if "items" in schema and schema["items"] is not False:
        item_schemas.append(schema["items"])
    if item_schemas:
        for sub in item_schemas:
            shape = to_shape(sub, file, schemas, origin, depth + 1)
            items = shape if items is None else join(items, shape)
    elif schema.get("items") is False and not schema.get("prefixItems"):
        items = Shape(frozenset())
    description = schema.get("description") if isinstance(schema.get("description"), str) else None
    return Shape(types, False, enum, tuple(sorted(props.items())), open_, items, description, frozenset({origin}))


def _fits(value_type: str, schema_type: str) -> bool:
    return value_type == schema_type or (value_type == "integer" and schema_type == "number")


def _types(schema: dict) -> frozenset[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        names = {declared}
    elif isinstance(declared, list):
        names = {t for t in declared if isinstance(t, str)}
    else:
        names = set()
        if any(k in schema for k in ("properties", "additionalProperties", "patternProperties", "required")):
            names.add("object")
        if any(k in schema for k in ("items", "prefixItems")):
            names.add("array")
        if not names:
            return ALL_TYPES
    if "number" in names:
        names.add("integer")
    return frozenset(names) & ALL_TYPES


def _both(a: Shape, b: Shape) -> Shape:
    """Values both shapes accept (allOf, `$ref` beside other keywords): types meet, members of
    either are known (required by either: certain)."""
    types = a.types & b.types if a.types != ALL_TYPES and b.types != ALL_TYPES else (
        a.types if b.types == ALL_TYPES else b.types)
    if a.enum is not None and b.enum is not None:
        enum = a.enum & b.enum
    else:
        enum = a.enum if a.enum is not None else b.enum
    props = a.prop_map
    for name, child in b.props:
        props[name] = _both(props[name], child) if name in props else child
        if name in a.prop_map and (a.prop_map[name].certain or child.certain):
            props[name] = attrs.evolve(props[name], certain=True)
    open_ = a.open and b.open if (a.props or b.props) else (a.open and b.open)
    items = a.items if b.items is None else b.items if a.items is None else _both(a.items, b.items)
    return Shape(types, a.certain or b.certain, enum, tuple(sorted(props.items())), open_, items,
                 a.description or b.description, a.origins | b.origins)


__all__ = ["to_shape"]
