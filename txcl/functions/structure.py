"""Structure: get, has, set, object, array."""

from __future__ import annotations

from typing import Any

from txcl.functions.helpers import describe, err, walkable, want_str
from txcl.functions.registry import function
from txcl.values.merge import copy_value
from txcl.values.paths import MISSING, PathError, read, split_path_string, split_set_path, write


@function("get", min_args=2, max_args=2, signature="get(obj, path)",
          doc="the value at a path string in obj (null when missing)")
def _get(args: list) -> Any:
    path = want_str("get", args[1], 1, "path")
    doc = walkable("get", args[0])
    if path == "":
        return None
    v = read(doc, split_path_string(path))
    return None if v is MISSING else v


@function("has", min_args=2, max_args=2, signature="has(obj, path)",
          doc="true when the path exists in obj, even holding null")
def _has(args: list) -> bool:
    path = want_str("has", args[1], 1, "path")
    doc = walkable("has", args[0])
    if path == "":
        return False
    return read(doc, split_path_string(path)) is not MISSING


@function("set", min_args=3, max_args=3, signature="set(obj, path, value)",
          doc="a copy of obj with value written at the path (\":\" forces an object key)")
def _set(args: list) -> Any:
    path = want_str("set", args[1], 1, "path")
    if path == "":
        raise err("set", "empty path")
    obj = args[0]
    doc = walkable("set", obj) if isinstance(obj, str) else copy_value(obj)
    segments, forced = split_set_path(path)
    try:
        return write(doc, segments, copy_value(args[2]), force_key=forced)
    except PathError as exc:
        raise err("set", str(exc)) from None


@function("object", min_args=0, max_args=None, even_args=True,
          signature="object(k1, v1, ...)", doc="an object from key/value pairs")
def _object(args: list) -> dict:
    out: dict[str, Any] = {}
    for i in range(0, len(args), 2):
        key = args[i]
        if not isinstance(key, str):
            raise err("object", f"key {i // 2 + 1} must be a string, got {describe(key)}")
        out[key] = args[i + 1]
    return out


@function("array", min_args=0, max_args=None, signature="array(...)",
          doc="a list of the arguments")
def _array(args: list) -> list:
    return list(args)
