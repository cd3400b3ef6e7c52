"""Run-time validation against the schemas of an OPS tree: a request's input document against
its stack's `$defs.input` (`--validate-input`), the answered envelope against `$defs.output`
(`--validate-output`), an op's answer against its `$defs.output` (`WITH validate = true`).

Each definition is compiled once (jsonschema-rs, a compiled validator) and kept; `$ref`s to
sibling files are served from the tree, never fetched. An error names the place in the value
as a JSON pointer.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlsplit

from txcl.ops.layout import lineage

MAX_ERRORS = 20
_UNSET = object()
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


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SchemaProblem(f"{path}: {exc}") from None


class TreeSchemas:
    """The stack schemas of one workspace, compiled on first use and kept."""

    def __init__(self, ops_dir: Path) -> None:
        from txcl.ops.scan import scan_ops

        self.ops_dir = ops_dir
        self.files = scan_ops(ops_dir).stack_schemas
        self._lock = threading.Lock()
        self._compiled: dict[tuple[str, str], Validator | None] = {}
        self._by_stack: dict[tuple[str, str], Validator | None] = {}  # (stack, name): read without the lock

    def owner(self, stack: str) -> str | None:
        """The stack whose schema.json `stack` walks under (itself or its nearest ancestor)."""
        return next((s for s in lineage(stack) if s in self.files), None)

    def validator(self, stack: str, name: str) -> Validator | None:
        """`$defs.<name>` of the stack's schema (None: no schema, or no such definition)."""
        found = self._by_stack.get((stack, name), _UNSET)
        if found is not _UNSET:
            return found
        found = self._validator(stack, name)
        self._by_stack[(stack, name)] = found
        return found

    def _validator(self, stack: str, name: str) -> Validator | None:
        owner = self.owner(stack)
        if owner is None:
            return None
        key = (owner, name)
        with self._lock:
            if key not in self._compiled:
                path = self.files[owner]
                self._compiled[key] = compile_definition(_read_json(path), name, path, _read_json)
            return self._compiled[key]

    def check_all(self, name: str) -> list[str]:
        """Problems compiling `$defs.<name>` of every stack schema (for a startup check)."""
        problems = []
        for stack in sorted(self.files):
            try:
                self.validator(stack, name)
            except SchemaProblem as exc:
                problems.append(f"{self.files[stack]}: {exc}")
        return problems


def answer_document(envelope: dict) -> dict:
    """The envelope as `$defs.output` describes it: without the runtime's `_txc` and `_ts`."""
    return {k: v for k, v in envelope.items() if k not in ("_txc", "_ts")}


__all__ = ["TreeSchemas", "Validator", "SchemaProblem", "compile_definition", "answer_document", "MAX_ERRORS"]
