"""Values a JSON Schema accepts, generated with Hypothesis (for `txcl test --generate` and the
checker's soundness tests).

The generator reads the schema itself (not the checker's shapes, so it can catch the checker
being too narrow): `type`, `enum`/`const`, `properties`/`required`/`additionalProperties`,
`patternProperties` (as extra keys), `items`/`prefixItems`, `minItems`/`maxItems`,
`minimum`/`maximum`, `minLength`/`maxLength`, `oneOf`/`anyOf`/`allOf` (a branch), and `$ref`
(through a resolver). What it cannot honour exactly (`pattern`, `format`, `multipleOf`, …)
is filtered by validating each value with the real validator, so every value it gives
satisfies the schema.
"""

from __future__ import annotations

from typing import Any, Callable

Resolve = Callable[[str], Any]

_MAX_DEPTH = 6
_KEYS = "abcdefghijklmnopqrstuvwxyz_"


def strategy(schema: Any, resolve: Resolve, validator: Any | None = None) -> Any:
    """A Hypothesis strategy of values `schema` accepts (`validator`: a compiled jsonschema_rs
    validator for the same schema, used as the final filter)."""

    base = _strategy(schema, resolve, 0)
    if validator is not None:
        base = base.filter(validator.is_valid)
    return base


def _json(depth: int) -> Any:
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6, allow_nan=False) | \
        st.text(max_size=8)
    if depth >= 2:
        return scalars
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) |
                        st.dictionaries(st.text(_KEYS, min_size=1, max_size=6), inner, max_size=3), max_leaves=6)


def _strategy(schema: Any, resolve: Resolve, depth: int) -> Any:
    from hypothesis import strategies as st

    if schema is True or schema == {}:
        return _json(depth)
    if schema is False:
        return st.nothing()
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return _json(depth)
    if isinstance(schema.get("$ref"), str):
        target = resolve(schema["$ref"])
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        merged = {**target, **rest} if isinstance(target, dict) else rest
        return _strategy(merged, resolve, depth + 1)
    if "const" in schema:
        return st.just(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return st.sampled_from(schema["enum"])
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            rest = {k: v for k, v in schema.items() if k != key}
            return st.one_of([_strategy({**rest, **b} if isinstance(b, dict) else b, resolve, depth + 1)
                              for b in schema[key]])
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for branch in schema["allOf"]:
            if isinstance(branch, dict):
                merged = _merge(merged, branch)
        return _strategy(merged, resolve, depth + 1)
    types = schema.get("type")
    if isinstance(types, str):
        types = [types]
    if not types:
        types = []
        if any(k in schema for k in ("properties", "required", "additionalProperties", "patternProperties")):
            types.append("object")
        if any(k in schema for k in ("items", "prefixItems")):
            types.append("array")
        if not types:
            return _json(depth)
    return st.one_of([_typed(t, schema, resolve, depth) for t in types if isinstance(t, str)])


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for key, value in b.items():
        if key == "properties" and isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = {**out[key], **value}
        elif key == "required" and isinstance(out.get(key), list) and isinstance(value, list):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        else:
            out[key] = value
    return out


def _typed(kind: str, schema: dict, resolve: Resolve, depth: int) -> Any:
    from hypothesis import strategies as st

    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        lo = lo if isinstance(lo, (int, float)) and not isinstance(lo, bool) else -10**6
        hi = hi if isinstance(hi, (int, float)) and not isinstance(hi, bool) else 10**6
        ints = st.integers(int(lo) if lo == int(lo) else int(lo) + 1, int(hi))
        return ints if kind == "integer" else ints | st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    if kind == "string":
        lo = schema.get("minLength", 0) if isinstance(schema.get("minLength"), int) else 0
        hi = schema.get("maxLength", 12) if isinstance(schema.get("maxLength"), int) else max(12, lo)
        return st.text(min_size=lo, max_size=max(lo, min(hi, 24)))
    if kind == "array":
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        item = schema.get("items", True)
        lo = schema.get("minItems", 0) if isinstance(schema.get("minItems"), int) else 0
        hi = schema.get("maxItems", 4) if isinstance(schema.get("maxItems"), int) else max(4, lo)
        rest = st.lists(_strategy(item, resolve, depth + 1), min_size=max(0, lo - len(prefix)),
                        max_size=max(0, min(hi, 6) - len(prefix))) if item is not False else st.just([])
        if prefix:
            return st.tuples(*[_strategy(p, resolve, depth + 1) for p in prefix], rest).map(
                lambda parts: [*parts[:-1], *parts[-1]])
        return rest
    if kind == "object":
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)] \
            if isinstance(schema.get("required"), list) else []
        fixed = {name: _strategy(properties.get(name, True), resolve, depth + 1) for name in required}
        optional = {name: _strategy(sub, resolve, depth + 1) for name, sub in properties.items()
                    if name not in required}
        base = st.fixed_dictionaries(fixed, optional=optional)
        extra = schema.get("additionalProperties", True)
        if extra is False or (properties and "additionalProperties" not in schema):
            return base
        names = st.text(_KEYS, min_size=1, max_size=6).filter(lambda k: k not in properties)
        extras = st.dictionaries(names, _strategy(extra, resolve, depth + 1), max_size=2)
        return st.tuples(base, extras).map(lambda parts: {**parts[1], **parts[0]})
    return _json(depth)


__all__ = ["strategy"]
