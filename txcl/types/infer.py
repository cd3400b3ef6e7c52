"""Drafting a JSON Schema from sample documents (`txcl schema infer`).

Types are merged over the samples (an integer and a float make a number), a member is
`required` when every sample that has the object has it, arrays take the merged schema of all
their items, and a string member with a few distinct values gets those values suggested as an
`enum` in a `$comment` (not enforced: a sample set rarely holds every value). Objects list the
members the samples had and leave `additionalProperties` out: `txcl check` reads such an
object as closed (a misspelled path below it is reported), while run-time validation, which
follows JSON Schema, still accepts members the samples did not show. Review the draft.
"""

from __future__ import annotations

from typing import Any

ENUM_SUGGEST_MAX = 8
MAX_DEPTH = 32


class _Node:
    def __init__(self) -> None:
        self.count = 0  # samples that have a value here
        self.types: set[str] = set()
        self.props: dict[str, _Node] = {}
        self.objects = 0  # of them objects
        self.items: _Node | None = None
        self.strings: set[str] = set()
        self.too_many = False

    def add(self, value: Any, depth: int = 0) -> None:
        from txcl.types.shape import type_of

        self.count += 1
        kind = type_of(value)
        self.types.add(kind)
        if depth >= MAX_DEPTH:
            return
        if kind == "object":
            self.objects += 1
            for key, child in value.items():
                self.props.setdefault(key, _Node()).add(child, depth + 1)
        elif kind == "array":
            for item in value:
                if self.items is None:
                    self.items = _Node()
                self.items.add(item, depth + 1)
        elif kind == "string" and not self.too_many:
            self.strings.add(value)
            if len(self.strings) > ENUM_SUGGEST_MAX:
                self.too_many, self.strings = True, set()

    def schema(self) -> dict:
        types = set(self.types)
        if {"integer", "number"} <= types:
            types.discard("integer")
        out: dict[str, Any] = {}
        if len(types) == 1:
            out["type"] = next(iter(types))
        elif types:
            out["type"] = sorted(types)
        if "object" in types:
            out["properties"] = {k: n.schema() for k, n in sorted(self.props.items())}
            required = sorted(k for k, n in self.props.items() if n.count == self.objects)
            if required:
                out["required"] = required
        if "array" in types and self.items is not None:
            out["items"] = self.items.schema()
        if types == {"string"} and self.strings and not self.too_many and self.count > len(self.strings):
            values = ", ".join(f'"{s}"' for s in sorted(self.strings))
            out["$comment"] = f"seen only: {values}; consider \"enum\": [{values}]"
        return out


def infer(samples: list[Any]) -> dict:
    """A JSON Schema (2020-12) that every sample satisfies."""
    root = _Node()
    for sample in samples:
        root.add(sample)
    return root.schema() if samples else {}


def stack_schema(inputs: list[Any], outputs: list[Any] | None = None) -> dict:
    """A draft `schema.json`: `$defs.input` from the inputs, `$defs.output` from the outputs."""
    defs: dict[str, Any] = {"input": infer(inputs)}
    if outputs:
        defs["output"] = infer(outputs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": f"drafted by txcl schema infer from {len(inputs)} sample(s); review before use",
            "$defs": defs}


__all__ = ["infer", "stack_schema"]
