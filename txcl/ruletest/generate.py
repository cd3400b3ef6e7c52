"""`txcl test --generate N`: property-based runs of each typed stack.

For every stack with a `schema.json`, N inputs are generated from its `$defs.input`, and every
op is answered with data generated from its `<name>.schema.json` `$defs.output` (an async
op's simulated worker too; an itemized op's items each get one). An op without an output
schema is run as it is when it runs in process (`py://`, `txco://`) and answered `{}` when it
would go over the network. Each run must end without an internal error and without an error
its own rules caused (a failing function in EMIT or SET, a WITH that does not resolve, an
answer that breaks `WITH validate`), and a completed or halted run's envelope must satisfy
`$defs.output`. The first failure is shrunk by Hypothesis to a small input and printed as a
case ready to paste into a `*.test.yaml` file. `--seed` makes a run repeatable.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any, Callable

import attrs

from txcl import runtime_codes as rc
from txcl.ruletest.spec import Answer, Case, Expect, Mock

_RULE_ERRORS = ("overlay ", "decorate ", "WITH ")  # an error object a rule's own clause made
CLOCK_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the default clock of a case


@attrs.frozen
class Generated:
    """One stack's outcome: how many runs, and the shrunk failure (None: all passed)."""

    stack: str
    runs: int
    failure: str | None = None  # what went wrong
    case_yaml: str | None = None  # the failing case, ready to paste


def _definitions(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _resolver(doc: dict, base: Path) -> Callable[[str], Any]:
    def resolve(ref: str) -> Any:
        file, _, pointer = ref.partition("#")
        node = doc if not file else json.loads((base.parent / file).read_text(encoding="utf-8"))
        for part in pointer.strip("/").split("/") if pointer.strip("/") else []:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node
    return resolve


def _strategy_for(path: Path, name: str) -> tuple[Any, Any] | None:
    """(strategy, validator) of `$defs.<name>` of a schema file (None: no such definition)."""
    import jsonschema_rs

    from txcl.types.generate import strategy
    from txcl.types.validate import compile_definition

    doc = _definitions(path)
    if not isinstance(doc.get("$defs"), dict) or name not in doc["$defs"]:
        return None
    validator = compile_definition(doc, name, path, lambda p: json.loads(p.read_text(encoding="utf-8")))
    schema = {"$defs": doc["$defs"], "$ref": f"#/$defs/{name}"}
    compiled = jsonschema_rs.validator_for(schema, retriever=lambda uri: _definitions(Path(uri[len("file://"):])),
                                           base_uri=path.resolve().as_uri())
    return strategy(schema, _resolver(doc, path), compiled), validator


def _op_schema_path(op: Any, workspace: Path) -> Path | None:
    """The `<name>.schema.json` beside an op's rule file (None: it has none)."""
    if op.schema_text is None or not op.file.endswith(".txcl"):
        return None
    rule = Path(op.file)
    rule = rule if rule.is_absolute() else Path.cwd() / rule
    path = rule.with_name(rule.name[: -len(".txcl")] + ".schema.json")
    return path if path.is_file() else None


def _ops(tree: Any, stack: str) -> list[Any]:
    ops = []
    for scope in tree.effective_scopes(stack):
        ops.extend(op for op in tree.rules_at(stack, scope) if op.rule.exec is not None)
    return ops


def _directives(op: Any) -> dict:
    """The literal WITH pairs of a rule (mode, each …) as written."""
    from txcl.syntax import ast

    out = {}
    for pair in op.rule.with_:
        if isinstance(pair.value, (ast.StringLit, ast.IntLit, ast.BoolLit)):
            out[".".join(pair.key)] = pair.value.value
        else:
            out[".".join(pair.key)] = None
    return out


def generate_stack(tree: Any, settings: Any, workspace: Path, stack: str, schema_path: Path, count: int,
                   seed: int, run_case: Callable[..., Any]) -> Generated:
    from hypothesis import HealthCheck, find
    from hypothesis import settings as hyp_settings
    from hypothesis import strategies as st
    from hypothesis.errors import NoSuchExample

    found = _strategy_for(schema_path, "input")
    if found is None:
        return Generated(stack, 0, f"{schema_path} has no $defs.input")
    inputs, _ = found
    outputs = _strategy_for(schema_path, "output")
    output_validator = outputs[1] if outputs is not None else None
    answers: dict[str, Any] = {}
    kinds: dict[str, str] = {}
    for op in _ops(tree, stack):
        target = op.rule.exec.target
        if target in answers or target.startswith("goto://") or ("://" not in target and "/" in target):
            continue
        directives = _directives(op)
        kind = "worker" if directives.get("mode") == "async" else "mock"
        schema = _op_schema_path(op, workspace)
        generated = _strategy_for(schema, "output") if schema is not None else None
        if generated is not None:
            answers[target] = generated[0]
        elif target.startswith(("http://", "https://", "mcp+")):
            answers[target] = st.just({})
        else:
            continue  # runs in process as it is
        kinds[target] = "each" if directives.get("each") is not None or "each" in directives else kind
    problems: list[str] = []

    def case_of(sample: tuple[Any, dict]) -> Case:
        document, given = copy.deepcopy(sample)  # the walk changes its envelope in place
        mocks = {t: (Mock(output=v),) for t, v in given.items() if kinds[t] == "mock"}
        workers = {t: (Answer(output=v),) for t, v in given.items() if kinds[t] == "worker"}
        workers.update({t: (Answer(each_output=v),) for t, v in given.items() if kinds[t] == "each"})
        return Case("generated", 0, document, stack, CLOCK_MS, mocks, workers, Expect())

    def fails(sample: tuple[Any, dict]) -> bool:
        problem = _problem(run_case(case_of(sample), tree, settings, stack), output_validator)
        if problem is not None and not problems:
            problems.append(problem)
        return problem is not None

    samples = st.tuples(inputs, st.fixed_dictionaries(answers))
    try:
        smallest = find(samples, fails, settings=hyp_settings(max_examples=count, database=None, deadline=None,
                                                              suppress_health_check=list(HealthCheck)),
                        random=random.Random(seed))
    except NoSuchExample:
        return Generated(stack, count)
    final = _problem(run_case(case_of(smallest), tree, settings, stack), output_validator) or problems[0]
    return Generated(stack, count, final, _case_yaml(stack, smallest, kinds, seed))


def _problem(run: Any, output_validator: Any) -> str | None:
    if run.problem is not None:
        return f"the case could not run: {run.problem}"
    if run.status == "failed":
        error = run.error if isinstance(run.error, dict) else {}
        code = (error.get("error") or error).get("code") if isinstance(error, dict) else None
        if code in (rc.INTERNAL_ERROR.code, None) or str(code).startswith("txcl_bad_"):
            return f"the run failed: {json.dumps(run.error, ensure_ascii=False)[:300]}"
    for step in run.steps:
        if step.get("status") == "error":
            return f"op {step.get('stack')}/{step.get('scope')}/{step.get('name')} failed: {step.get('error')}"
    envelope = run.envelope if isinstance(run.envelope, dict) else {}
    error = envelope.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"].startswith(_RULE_ERRORS):
        return f"a rule failed: {error['message']}"
    if output_validator is not None and run.status in ("completed", "halted"):
        from txcl.types.validate import answer_document

        errors = output_validator.errors(answer_document(envelope))
        if errors:
            return "the answer breaks $defs.output: " + "; ".join(f"{e['pointer'] or '/'}: {e['message']}"
                                                               for e in errors[:3])
    return None


def _case_yaml(stack: str, sample: tuple[Any, dict], kinds: dict[str, str], seed: int) -> str:
    document, given = sample
    lines = [f"  - name: generated with --seed {seed}", f"    input: {_flow(document)}"]
    mocks = {t: v for t, v in given.items() if kinds[t] == "mock"}
    workers = {t: v for t, v in given.items() if kinds[t] in ("worker", "each")}
    if mocks:
        lines.append("    mocks:")
        lines += [f"      {_flow(t)}: {{output: {_flow(v)}}}" for t, v in sorted(mocks.items())]
    if workers:
        lines.append("    workers:")
        lines += [f"      {_flow(t)}: {{{'each_output' if kinds[t] == 'each' else 'output'}: {_flow(v)}}}"
                  for t, v in sorted(workers.items())]
    return "\n".join(lines)


def _flow(value: Any) -> str:
    """JSON, which YAML reads as a flow value."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


__all__ = ["Generated", "generate_stack"]
