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
from typing import Any

from txcl.jsonschemas import MAX_ERRORS, SchemaProblem, Validator, compile_definition  # noqa: F401 - re-exported
from txcl.ops.layout import lineage

_UNSET = object()


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
