"""The three ways a debug session starts a walk (the `launch` request's arguments).

- a stack on an input: `{"workspace", "stack", "input" | "inputFile"}`, with optional `mocks`
  and `workers` written as in a rule test file, and a `clock`;
- one case of a rule test file: `{"test": "path/to/file.test.yaml::case name"}` — its mocks and
  simulated workers on the virtual clock, as `txcl test` runs it, and its expectations checked
  at the end;
- a stored request: `{"trace": RID | "last"}` — walked again through the workspace's tree with
  every op answered from its recording, as `txcl replay` does (record with `--trace-ops
  answers`).

Nothing is sent over the network unless the launch says `"allowNetwork": true`: an op that is
neither mocked nor simulated fails with the reason, as in `txcl test`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

DEBUG_REQUEST_DEADLINE_MS = 7 * 24 * 3600 * 1000  # a walk held at a breakpoint must not time out


class LaunchError(ValueError):
    """The launch arguments cannot start a walk (the message says why)."""


@dataclass
class LaunchResult:
    status: str  # completed | halted | failed | suspended | …
    envelope: Any = None
    error: Any = None
    summary: str = ""
    exit_code: int = 0


@dataclass
class Launch:
    kind: str  # input | test | trace
    title: str
    workspace: Path
    tree: Any
    settings: Any
    start: Callable[[Any], LaunchResult]  # blocking; runs the walk with the debugger attached

    def scope_problem(self, name: str) -> str | None:
        """Why a function breakpoint's name (`stack/scope` or `stack/scope/rule`) is not in the tree."""
        parts = name.split("/")
        stacks = set(self.tree.stacks())
        for cut in range(len(parts) - 1, 0, -1):
            stack = "/".join(parts[:cut])
            if stack not in stacks:
                continue
            rest = parts[cut:]
            try:
                scope = int(rest[0])
            except ValueError:
                return f"{rest[0]!r} is not a scope number"
            rules = self.tree.rules_at(stack, scope)
            if not rules:
                return f"stack {stack} has no scope {scope}"
            if len(rest) == 1:
                return None
            if len(rest) == 2 and any(op.name == rest[1] for op in rules):
                return None
            return f"scope {stack}/{scope} has no rule {'/'.join(rest[1:])}"
        return f"no stack in {name!r} (write stack/scope or stack/scope/rule)"


def _settings(workspace: Path, args: dict) -> Any:
    from txcl.runtime.config import ConfigError, load_settings

    flags: dict[str, Any] = {}
    if args.get("db"):
        flags["db"] = str(args["db"])
    try:
        settings = load_settings(workspace, flags)
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    return settings.evolve(request_deadline=DEBUG_REQUEST_DEADLINE_MS)


def _workspace(args: dict) -> Path:
    from txcl.ops.tree import WorkspaceNotFound, find_workspace

    where = args.get("workspace") or "."
    if not isinstance(where, str):
        raise LaunchError('"workspace" must be a path')
    try:
        workspace, _ = find_workspace(where)
    except WorkspaceNotFound as exc:
        raise LaunchError(str(exc)) from None
    return Path(workspace)


def _tree(workspace: Path, import_python: bool = True) -> Any:
    from txcl.errors import TxclError
    from txcl.ops.tree import load_ops

    try:
        return load_ops(workspace, import_python=import_python)
    except TxclError as exc:
        raise LaunchError(f"the tree of {workspace} does not load:\n{exc}") from None


def prepare(args: dict) -> Launch:
    """The walk a `launch` request asks for, ready to start; LaunchError when it cannot be."""
    if not isinstance(args, dict):
        raise LaunchError("the launch arguments must be an object")
    kinds = [k for k in ("trace", "test") if args.get(k) is not None]
    if len(kinds) > 1:
        raise LaunchError('give one of "trace", "test" or "input", not several')
    workspace = _workspace(args)
    settings = _settings(workspace, args)
    allow_network = args.get("allowNetwork") is True
    if kinds == ["trace"]:
        return _trace_launch(args, workspace, settings)
    if kinds == ["test"]:
        return _test_launch(args, workspace, settings, allow_network)
    return _input_launch(args, workspace, settings, allow_network)


def _read_case(path: Path, text: str) -> Any:
    from txcl.ruletest.spec import parse_test_text

    found, problems = parse_test_text(path, text)
    errors = [d for d in problems if d.severity == "error"]
    if found is None or errors:
        lines = [f"{d.code} {d.message}" for d in (errors or problems)] or ["the case could not be read"]
        raise LaunchError("\n".join(lines))
    return found


def _input_launch(args: dict, workspace: Path, settings: Any, allow_network: bool) -> Launch:
    tree = _tree(workspace)
    stack = args.get("stack")
    stacks = tree.user_stacks()
    if stack is None:
        if len(stacks) != 1:
            raise LaunchError('name the stack ("stack"): the tree has ' +
                              (", ".join(stacks) if stacks else "no stack"))
        stack = stacks[0]
    if stack not in tree.stacks():
        raise LaunchError(f"the tree has no stack {stack!r} (it has {', '.join(stacks) or 'none'})")
    if "input" in args and "inputFile" in args:
        raise LaunchError('give "input" or "inputFile", not both')
    if "inputFile" in args:
        path = Path(str(args["inputFile"]))
        path = path if path.is_absolute() else workspace / path
        try:
            envelope = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LaunchError(f"cannot read the input file {path}: {exc}") from None
    else:
        envelope = args.get("input", {})
    if not isinstance(envelope, dict):
        raise LaunchError("the input must be a JSON object")
    case_doc: dict[str, Any] = {"name": "debug", "input": envelope}
    for key in ("mocks", "workers", "clock"):
        if args.get(key) is not None:
            case_doc[key] = args[key]
    test_file = _read_case(workspace / "launch.json", json.dumps({"stack": stack, "cases": [case_doc]}))
    case = test_file.cases[0]

    def start(debugger: Any) -> LaunchResult:
        from txcl.ruletest.runner import run_case

        run = run_case(case, tree, settings, stack, allow_network=allow_network, observers=[debugger])
        return _result(run.status, run.envelope, run.error)

    return Launch("input", f"{stack} on an input", workspace, tree, settings, start)


def _test_launch(args: dict, workspace: Path, settings: Any, allow_network: bool) -> Launch:
    from txcl.ruletest.session import case_stack, tree_checks

    spec = str(args["test"])
    file_part, sep, name = spec.rpartition("::")
    if not sep:
        file_part, name = spec, ""
    path = Path(file_part)
    path = path if path.is_absolute() else workspace / path
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LaunchError(f"cannot read the test file {path}: {exc.strerror or exc}") from None
    test_file = _read_case(path, text)
    case = _pick_case(test_file.cases, name, path)
    tree = _tree(workspace)
    problems = [d for d in tree_checks(tree, test_file) if d.severity == "error"]
    if problems:
        raise LaunchError("\n".join(f"{d.code} {d.message}" for d in problems))
    stack = case_stack(tree, test_file, case)
    if stack is None:
        raise LaunchError(f"the case {case.name!r} names no stack and the tree has several")

    def start(debugger: Any) -> LaunchResult:
        from txcl.ruletest.compare import differences
        from txcl.ruletest.runner import run_case

        run = run_case(case, tree, settings, stack, allow_network=allow_network, observers=[debugger])
        result = _result(run.status, run.envelope, run.error)
        failures = differences(case.expect, run)
        if failures:
            result.summary += "\nthe case FAILED:\n" + "\n".join(f"  - {p}" for p in failures)
            result.exit_code = 1
        else:
            result.summary += "\nthe case passed"
            result.exit_code = 0
        return result

    return Launch("test", f"{path.name}::{case.name}", workspace, tree, settings, start)


def _pick_case(cases: Any, name: str, path: Path) -> Any:
    cases = list(cases)
    if not cases:
        raise LaunchError(f"{path} has no case")
    if not name:
        if len(cases) == 1:
            return cases[0]
        raise LaunchError(f"name the case after '::' — {path.name} has: " + "; ".join(c.name for c in cases))
    for case in cases:
        if case.name == name:
            return case
    found = [c for c in cases if name.lower() in c.name.lower()]
    if len(found) == 1:
        return found[0]
    listing = "; ".join(c.name for c in cases)
    if found:
        raise LaunchError(f"{name!r} matches several cases of {path.name}: " + "; ".join(c.name for c in found))
    raise LaunchError(f"{path.name} has no case {name!r} (it has: {listing})")


def _trace_launch(args: dict, workspace: Path, settings: Any) -> Launch:
    from txcl.continuations.service import open_run_store
    from txcl.replay import NotReplayable, load_mocks, replayable
    from txcl.store.errors import StoreError

    rid = str(args["trace"])
    path = settings.db_path(workspace)
    if "://" not in str(path) and not Path(path).exists():
        raise LaunchError(f"no database at {path}: nothing was recorded there")
    try:
        store = open_run_store(path, settings)
    except StoreError as exc:
        raise LaunchError(f"cannot open the database {path}: {exc}") from None
    try:
        if rid == "last":
            last = store.last_trace_rid()
            if last is None:
                raise LaunchError("no stored request yet")
            rid = last
        record = store.get_trace(rid)
    finally:
        store.close()
    if record is None:
        raise LaunchError(f"no stored request {rid}")
    why = replayable(record)
    if why is not None:
        raise LaunchError(f"request {rid} cannot be walked again: {why}")
    mocks = None
    if args.get("mocks"):
        mock_path = Path(str(args["mocks"]))
        try:
            mocks = load_mocks(mock_path if mock_path.is_absolute() else workspace / mock_path)
        except (OSError, ValueError) as exc:
            raise LaunchError(f"cannot read the mocks file: {exc}") from None
    tree = _tree(workspace, import_python=False)  # py:// ops are answered from the recording

    def start(debugger: Any) -> LaunchResult:
        import asyncio

        from txcl.replay import rewalk
        from txcl.runtime.interpreter import Completed, Failed

        try:
            outcome, _ = asyncio.run(rewalk(tree, settings, record, mocks, attach=debugger.attach))
        except NotReplayable as exc:
            return LaunchResult("not replayable", summary=f"request {rid} is not replayable: {exc}", exit_code=1)
        if isinstance(outcome, Completed):
            return _result("halted" if outcome.halted else "completed", outcome.envelope, None)
        if isinstance(outcome, Failed):
            payload = outcome.payload
            return _result("failed", None, payload.get("error", payload) if isinstance(payload, dict) else payload)
        return _result("suspended", None, None)

    return Launch("trace", f"request {rid}", workspace, tree, settings, start)


def _result(status: str, envelope: Any, error: Any) -> LaunchResult:
    from txcl.values.jsonio import dumps

    if status in ("completed", "halted"):
        summary = f"the walk {status}:\n{dumps(envelope, indent=2)}"
        code = 0
    elif status == "failed":
        summary = f"the walk failed:\n{dumps(error, indent=2)}"
        code = 1
    else:
        summary = f"the walk ended {status}"
        code = 0 if status == "suspended" else 1
    return LaunchResult(status, envelope, error, summary, code)
