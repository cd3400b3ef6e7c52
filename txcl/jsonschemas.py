"""Compiling one `$defs.<name>` of a JSON Schema document into a validator (jsonschema-rs, a
compiled validator): `$ref`s to sibling files are served by the caller's reader, never
fetched; an error names the place in the value as a JSON pointer. The OPS loader compiles an
op's `<name>.schema.json` with it; run-time validation (txcl.types.validate) keeps what it
compiled."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlsplit

MAX_ERRORS = 20
_DRAFT = "https://json-schema.org/draft/2020-12/schema"


class SchemaProblem(Exception):
    """A schema that cannot be used for validation (unreadable, not JSON, not a schema)."""


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class Validator:
    """One compiled definition."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    def errors(self, value: Any) -> list[dict[str, str]]:
        """[{"pointer", "message"}] of what in `value` the definition refuses (at most 20)."""
        if self._compiled.is_valid(value):  # the common case, without building error objects
            return []
        out = []
        for error in self._compiled.iter_errors(value):
            out.append({"pointer": _pointer(error.instance_path), "message": error.message})
            if len(out) >= MAX_ERRORS:
                break
        return out


def _file_retriever(read: Callable[[Path], Any]) -> Callable[[str], Any]:
    def retrieve(uri: str) -> Any:
        parts = urlsplit(uri)
        if parts.scheme != "file":
            raise ValueError(f"{uri}: remote schemas are not fetched")
        return read(Path(unquote(parts.path)))
    return retrieve


def compile_definition(doc: dict, name: str, base: Path | None, read: Callable[[Path], Any]) -> Validator | None:
    """A validator of `$defs.<name>` of `doc` (None when it has none). `base`: the file's path,
    against which `$ref`s to sibling files resolve."""
    import jsonschema_rs

    defs = doc.get("$defs") if isinstance(doc, dict) else None
    if not isinstance(defs, dict) or name not in defs:
        return None
    root = {key: value for key, value in doc.items() if key in ("$defs", "definitions", "$id", "$anchor")}
    root["$schema"] = doc.get("$schema", _DRAFT) if isinstance(doc.get("$schema"), str) else _DRAFT
    root["$ref"] = f"#/$defs/{name}"
    try:
        compiled = jsonschema_rs.validator_for(root, retriever=_file_retriever(read), validate_formats=True,
                                               base_uri=base.resolve().as_uri() if base is not None else None)
    except Exception as exc:  # noqa: BLE001 - any refusal of the library: the schema's problem
        raise SchemaProblem(f"$defs.{name} cannot be used: {str(exc).splitlines()[0]}") from None
    return Validator(compiled)


__all__ = ["SchemaProblem", "Validator", "compile_definition", "MAX_ERRORS"]
