"""The types of the built-in functions, for the checker: what each returns, and which JSON
types an argument can never be (the call fails for every value of those types under the
function's coercions). A test calls every function with values of every type to hold this
table to the implementations.
"""

from __future__ import annotations

NUM = frozenset({"integer", "number"})
STR = frozenset({"string"})
_NOT_NUMERIC = frozenset({"null", "boolean", "array", "object"})
_NOT_TEXT = frozenset({"null", "boolean", "integer", "number", "array", "object"})
_NOT_INT = frozenset({"null", "boolean", "array", "object", "string"})

#: name -> the types a successful call returns
RESULTS: dict[str, frozenset[str]] = {
    "add": NUM, "sub": NUM, "mul": NUM, "div": NUM, "mod": frozenset({"integer"}),
    "len": frozenset({"integer"}), "get": frozenset({"null", "boolean", "integer", "number", "string", "array", "object"}),
    "has": frozenset({"boolean"}), "join": STR, "json": frozenset({"null", "boolean", "integer", "number", "string",
                                                                    "array", "object"}),
    "b64decode": STR, "b64encode": STR, "pad": STR, "repeat": STR, "sha256": STR, "split": frozenset({"array"}),
    "substr": STR, "to_json": STR, "urldecode": STR, "urlencode": STR, "concat": STR, "uuid": STR,
    "object": frozenset({"object"}), "array": frozenset({"array"}), "set": frozenset({"object"}),
    "now": frozenset({"integer", "string"}), "tz": frozenset({"integer"}), "tz_offsets": frozenset({"array"}),
}

#: name -> per argument position, the types that argument can never be
NEVER: dict[str, tuple[frozenset[str], ...]] = {
    "add": (_NOT_NUMERIC, _NOT_NUMERIC), "sub": (_NOT_NUMERIC, _NOT_NUMERIC),
    "mul": (_NOT_NUMERIC, _NOT_NUMERIC), "div": (_NOT_NUMERIC, _NOT_NUMERIC),
    "mod": (_NOT_NUMERIC, _NOT_NUMERIC),
    "len": (frozenset({"boolean", "integer", "number"}),),
    "get": (frozenset(), _NOT_TEXT), "has": (frozenset(), _NOT_TEXT),
    "join": (frozenset({"null", "boolean", "integer", "number", "string", "object"}), _NOT_TEXT),
    "json": (_NOT_TEXT,), "b64decode": (_NOT_TEXT,), "b64encode": (_NOT_TEXT,),
    "pad": (_NOT_TEXT, _NOT_INT, _NOT_TEXT),
    "repeat": (_NOT_TEXT, frozenset({"null", "boolean", "array", "object"})),
    "set": (frozenset({"array"}), _NOT_TEXT, frozenset()),
    "sha256": (_NOT_TEXT,), "split": (_NOT_TEXT, _NOT_TEXT),
    "substr": (_NOT_TEXT, frozenset({"null", "boolean", "array", "object"}), frozenset({"null", "boolean", "array",
                                                                                         "object"})),
    "urldecode": (_NOT_TEXT,), "urlencode": (_NOT_TEXT,),
}


def result_types(name: str) -> frozenset[str] | None:
    """What `&name(...)` returns (None: unknown); a `try_` variant may also give null."""
    base = name[4:] if name.startswith("try_") else name
    found = RESULTS.get(base)
    if found is None:
        return None
    return found | {"null"} if name.startswith("try_") else found


def never_accepted(name: str, index: int) -> frozenset[str]:
    """The types argument `index` of `&name` can never be (empty: no such knowledge); `try_`
    variants never fail, so nothing."""
    if name.startswith("try_"):
        return frozenset()
    if name == "object":
        return _NOT_TEXT if index % 2 == 0 else frozenset()
    per = NEVER.get(name, ())
    return per[index] if index < len(per) else frozenset()


__all__ = ["result_types", "never_accepted", "RESULTS", "NEVER"]
