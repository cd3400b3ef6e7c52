"""Schema files of an OPS tree: a stack's `OPS/<stack>/schema.json` and an op's
`<name>.schema.json` beside its `<name>.txcl`.

Both are JSON Schema 2020-12 documents; a stack's holds `$defs.input` (required: the document
a request brings) and `$defs.output` (optional: the envelope it answers), an op's holds
`$defs.input` (what it is dispatched) and `$defs.output` (what it answers). `$ref` may point
inside the file (`#/$defs/address`) or at a sibling file in the same OPS tree
(`common.schema.json#/$defs/money`); nothing is fetched from the network. A file that cannot
be read, is not JSON, is not a valid schema, or holds a `$ref` that leads nowhere is a finding
(TX260) with its line and column, never an exception.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlsplit

import attrs

from txcl.errors import Diagnostic
from txcl.types.jsonpos import JsonPosError, Positions, escape_pointer, parse

STACK_SCHEMA = "schema.json"
OP_SCHEMA_SUFFIX = ".schema.json"
MAX_SCHEMA_BYTES = 4 * 1024 * 1024
CODE = "TX260"


@attrs.frozen(eq=False)
class SchemaFile:
    path: Path  # absolute
    shown: str  # as messages show it
    text: str
    doc: Any
    positions: Positions

    def diag(self, pointer: str, message: str, hint: str | None = None, code: str = CODE,
             key: bool = False) -> Diagnostic:
        return Diagnostic(code, message, file=self.shown, span=self.positions.span_of(pointer, key=key),
                          hint=hint, source=self.text)

    def at(self, pointer: str) -> Any:
        """The value at a JSON pointer (KeyError when there is none)."""
        node = self.doc
        if not pointer:
            return node
        for raw in pointer.lstrip("/").split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise KeyError(pointer)
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise KeyError(pointer)
        return node


def read_schema_file(path: Path, shown: str, text: str | None = None) -> tuple[SchemaFile | None, list[Diagnostic]]:
    """Read and check one schema file (`text`: an editor's buffer standing in for it): (the
    file, []) or (None or the file, findings)."""
    try:
        if text is not None:
            data = text.encode("utf-8", "surrogatepass")
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_SCHEMA_BYTES + 1)
    except OSError as exc:
        return None, [Diagnostic(CODE, f"cannot read the schema: {exc.strerror or exc}", file=shown)]
    if len(data) > MAX_SCHEMA_BYTES:
        return None, [Diagnostic(CODE, f"the schema is larger than {MAX_SCHEMA_BYTES:,} bytes", file=shown)]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, [Diagnostic(CODE, "the schema is not UTF-8 text", file=shown)]
    try:
        doc, positions = parse(text)
    except JsonPosError as exc:
        from txcl.errors import Position, Span

        at = Position(exc.line, exc.column, exc.offset)
        span = Span(at, Position(exc.line, exc.column + 1, exc.offset + 1))
        return None, [Diagnostic(CODE, f"the schema is not JSON: {exc.message}", file=shown, span=span, source=text)]
    file = SchemaFile(path, shown, text, doc, positions)
    if not isinstance(doc, dict):
        return None, [file.diag("", "a schema file must hold a JSON object")]
    return file, _meta_findings(file)


def _meta_findings(file: SchemaFile) -> list[Diagnostic]:
    """What JSON Schema 2020-12's meta-schema says of the document (one finding per place)."""
    import jsonschema_rs

    doc = file.doc
    if "$schema" not in doc:
        doc = {**doc, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    found: list[Diagnostic] = []
    seen: set[str] = set()
    try:
        validator = jsonschema_rs.validator_for(_META_2020_12)
        errors = list(validator.iter_errors(doc))
    except Exception:  # noqa: BLE001 - an unknown $schema, say: checked below by our own reading
        errors = []
    for error in errors:
        pointer = "".join("/" + escape_pointer(str(p)) for p in error.instance_path)
        if pointer in seen:
            continue
        seen.add(pointer)
        found.append(_friendly(file, pointer, error.message))
    return found


_TYPE_NAMES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _friendly(file: SchemaFile, pointer: str, message: str) -> Diagnostic:
    if pointer.endswith("/type"):
        from txcl.suggest import did_you_mean

        try:
            value = file.at(pointer)
        except KeyError:
            value = None
        bad = [v for v in (value if isinstance(value, list) else [value]) if v not in _TYPE_NAMES]
        if bad and isinstance(bad[0], str):
            close = did_you_mean(bad[0], list(_TYPE_NAMES))
            return file.diag(pointer, f'"{bad[0]}" is not a JSON Schema type',
                             hint=f'did you mean "{close}"?' if close else "one of: " + ", ".join(_TYPE_NAMES))
    return file.diag(pointer, f"not a valid JSON Schema at {pointer or '/'}: {message}")


_META_2020_12 = {"$ref": "https://json-schema.org/draft/2020-12/schema"}


# ---------------------------------------------------------------- $ref

class SchemaSet:
    """The schema files of one OPS tree, read once, and `$ref` resolution between them."""

    def __init__(self, ops_dir: Path, show: Callable[[Path], str], overrides: dict[Path, str] | None = None) -> None:
        self.ops_dir = ops_dir.resolve()
        self.show = show
        self.overrides = {Path(p).resolve(): t for p, t in (overrides or {}).items()}
        self.files: dict[Path, SchemaFile | None] = {}
        self.diagnostics: list[Diagnostic] = []

    def load(self, path: Path) -> SchemaFile | None:
        path = path.resolve()
        if path not in self.files:
            file, diags = read_schema_file(path, self.show(path), self.overrides.get(path))
            self.files[path] = file
            self.diagnostics.extend(diags)
            if file is not None:
                self.diagnostics.extend(self._dangling_refs(file))
        return self.files[path]

    def resolve(self, ref: str, base: SchemaFile) -> tuple[Any, SchemaFile, str] | None:
        """(schema, its file, its pointer) that `ref` names from `base`; None: nothing there."""
        if not isinstance(ref, str):
            return None
        parts = urlsplit(ref)
        if parts.scheme or parts.netloc:
            return None  # remote: never fetched
        target = base
        if parts.path:
            candidate = (base.path.parent / unquote(parts.path)).resolve()
            if os.path.commonpath([candidate, self.ops_dir]) != str(self.ops_dir):
                return None  # outside the OPS tree
            loaded = self.load(candidate)
            if loaded is None:
                return None
            target = loaded
        pointer = unquote(parts.fragment)
        if pointer and not pointer.startswith("/"):
            return None  # anchors are not followed
        try:
            return target.at(pointer), target, pointer
        except KeyError:
            return None

    def _dangling_refs(self, file: SchemaFile) -> list[Diagnostic]:
        found = []

        def walk(node: Any, pointer: str, depth: int) -> None:
            if depth > 64:
                return
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and self.resolve(ref, file) is None:
                    parts = urlsplit(ref)
                    why = ("remote references are not fetched" if parts.scheme or parts.netloc
                           else "nothing is there")
                    found.append(file.diag(f"{pointer}/$ref", f'$ref "{ref}" leads nowhere: {why}',
                                           hint="point at a definition in this file (#/$defs/…) or in a "
                                                "sibling schema file of the OPS tree"))
                for key, value in node.items():
                    if key not in ("const", "enum", "examples", "default"):
                        walk(value, f"{pointer}/{escape_pointer(key)}", depth + 1)
            elif isinstance(node, list):
                for i, value in enumerate(node):
                    walk(value, f"{pointer}/{i}", depth + 1)

        walk(file.doc, "", 0)
        return found

    def retriever(self) -> Callable[[str], Any]:
        """For the run-time validator: sibling files of the tree, nothing from the network."""
        def retrieve(uri: str) -> Any:
            parts = urlsplit(uri)
            if parts.scheme != "file":
                raise ValueError(f"{uri}: remote schemas are not fetched")
            file = self.load(Path(unquote(parts.path)))
            if file is None:
                raise ValueError(f"{uri}: no readable schema there")
            return file.doc
        return retrieve


def definition(file: SchemaFile, name: str) -> tuple[Any, str] | None:
    """`$defs.<name>` of a schema file and its pointer (None: not there)."""
    defs = file.doc.get("$defs") if isinstance(file.doc, dict) else None
    if isinstance(defs, dict) and name in defs:
        return defs[name], f"/$defs/{escape_pointer(name)}"
    return None


__all__ = ["SchemaFile", "SchemaSet", "read_schema_file", "definition", "STACK_SCHEMA", "OP_SCHEMA_SUFFIX", "CODE"]
