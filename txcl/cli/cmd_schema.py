"""`txcl schema infer`: draft a stack's `schema.json` (or an op's `<name>.schema.json`) from
sample documents, stored traces or rule test inputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from txcl.cli.common import DB_HELP, fail


@click.group("schema")
def command() -> None:
    """Work with the JSON Schemas of typed envelopes (OPS/<stack>/schema.json)."""


def _samples_of_file(path: str) -> list[Any]:
    """The documents of a file: a JSON object, a JSON array of them, or JSON Lines."""
    from txcl.values.jsonio import JsonError, loads

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--from {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}")
    try:
        value = loads(text)
    except (JsonError, ValueError):
        value = None
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            return [loads(line) for line in lines]
        except (JsonError, ValueError) as exc:
            fail(f"--from {path}: neither JSON nor JSON Lines: {exc}")
    return value if isinstance(value, list) else [value]


def _samples_of_tests(paths: tuple[str, ...]) -> list[Any]:
    from txcl.ruletest.spec import discover, read_test_file

    out = []
    files = discover(list(paths))
    if not files:
        fail(f"--from-tests: no rule test files (*.test.yaml, *.test.yml, *.test.json) under {', '.join(paths)}")
    for path in files:
        test_file, diags = read_test_file(path)
        if test_file is None:
            fail(f"--from-tests: {path}: {diags[0].message if diags else 'unreadable'}")
        for case in test_file.cases:
            value = getattr(case, "input", None)
            if isinstance(value, dict):
                out.append(value)
    return out


def _samples_of_traces(directory: str, db: str | None, stack: str) -> tuple[list[Any], list[Any]]:
    from txcl.ops.tree import WorkspaceNotFound, find_workspace
    from txcl.runtime.config import ConfigError, load_settings
    from txcl.store import open_store, sqlite_file
    from txcl.store.errors import StoreError
    from txcl.values.jsonio import JsonError, loads

    try:
        ws, _ = find_workspace(directory)
        settings = load_settings(ws)
    except (WorkspaceNotFound, ConfigError) as exc:
        fail(str(exc))
    where = db or settings.db_path(ws)
    file = sqlite_file(where)
    if file is not None and not file.exists():
        fail(f"--from-traces: no trace database at {file}")
    try:
        store = open_store(where, create=False)
        try:
            rows = store.trace_documents(stack)
        finally:
            store.close()
    except StoreError as exc:
        fail(f"--from-traces: cannot read traces: {exc}")
    inputs, outputs = [], []
    for text_in, text_out in rows:
        for text, into in ((text_in, inputs), (text_out, outputs)):
            try:
                value = loads(text) if text else None
            except (JsonError, ValueError):
                continue
            if isinstance(value, dict):
                into.append({k: v for k, v in value.items() if k not in ("_txc", "_ts")})
    if not inputs:
        fail(f"--from-traces: no full trace of stack {stack} holds its input (record some with --trace-mode full)")
    return inputs, outputs


@command.command("infer")
@click.argument("directory", default=".", required=False)
@click.option("--from", "from_files", multiple=True, metavar="FILE",
              help="Sample documents: a JSON object, an array of them, or JSON Lines (repeatable).")
@click.option("--from-traces", "stack", metavar="STACK",
              help="The inputs (and answers) of the stored full traces of STACK.")
@click.option("--from-tests", "tests", multiple=True, metavar="PATH",
              help="The inputs of the cases of rule test files under PATH (repeatable).")
@click.option("--op", is_flag=True, help="Draft an op's <name>.schema.json: the samples are its answers "
              "($defs.output) instead of request inputs.")
@click.option("--output", "-o", "output", metavar="FILE", help="Write the draft there (default: print it).")
@click.option("--db", default=None, help=DB_HELP)
def infer(directory: str, from_files: tuple[str, ...], stack: str | None, tests: tuple[str, ...], op: bool,
          output: str | None, db: str | None) -> None:
    """Draft a schema from samples: merged types, `required` for what every sample has, a
    suggested `enum` (in a `$comment`) for strings with few values. Review it, then save it as
    OPS/<stack>/schema.json."""
    from txcl.types.infer import infer as infer_schema
    from txcl.types.infer import stack_schema

    if not (from_files or stack or tests):
        fail("give samples: --from FILE, --from-traces STACK or --from-tests PATH")
    inputs: list[Any] = []
    outputs: list[Any] = []
    for path in from_files:
        inputs.extend(_samples_of_file(path))
    if tests:
        inputs.extend(_samples_of_tests(tests))
    if stack:
        found_in, found_out = _samples_of_traces(directory, db, stack)
        inputs.extend(found_in)
        outputs.extend(found_out)
    if not inputs:
        fail("the samples hold no document")
    if op:
        draft = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                 "$comment": f"drafted by txcl schema infer from {len(inputs)} answer(s); review before use",
                 "$defs": {"output": infer_schema(inputs)}}
    else:
        draft = stack_schema(inputs, outputs)
    text = json.dumps(draft, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"--output {output}: {exc.strerror or exc}")
    click.echo(f"txcl: wrote {output} from {len(inputs)} sample(s)", err=True)
    sys.exit(0)
