"""A `txcl test` session: find the test files, read them, check them against the OPS tree, run
the selected cases and collect the results (reports are `txcl.ruletest.report`'s job)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from txcl.errors import Diagnostic
from txcl.ruletest.compare import differences
from txcl.ruletest.runner import CaseRun, run_case
from txcl.ruletest.spec import Case, TestFile, discover, read_test_file


@attrs.define
class CaseResult:
    file: Path
    case: Case
    run: CaseRun | None
    problems: list[str]

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def outcome(self) -> str:
        return "passed" if self.passed else "failed"


@attrs.define
class Session:
    workspace: Path
    files: list[TestFile] = attrs.field(factory=list)
    diagnostics: list[Diagnostic] = attrs.field(factory=list)
    results: list[CaseResult] = attrs.field(factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if not r.passed]

    @property
    def load_failed(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)


def target_texts(tree: Any) -> set[str]:
    """The EXEC strings of every rule of the tree."""
    out: set[str] = set()
    for stack in tree.stacks():
        for scope in tree.own_scopes(stack):
            for op in tree.rules_at(stack, scope):
                if op.exec_text:
                    out.add(op.exec_text)
    return out


def case_stack(tree: Any, test_file: TestFile, case: Case) -> str | None:
    if case.stack:
        return case.stack
    if test_file.stack:
        return test_file.stack
    stacks = tree.user_stacks()
    return stacks[0] if len(stacks) == 1 else None


def tree_checks(tree: Any, test_file: TestFile) -> list[Diagnostic]:
    """What needs the OPS tree: stacks that exist (TX403), mocks and workers for targets that
    no rule names (TX407, a warning)."""
    found = _tree_problems(tree, test_file)
    if found and not test_file.positioned:  # read again to point at the keys
        found = _tree_problems(tree, test_file.with_positions())
    return found


def _tree_problems(tree: Any, test_file: TestFile) -> list[Diagnostic]:
    from txcl.suggest import did_you_mean

    out: list[Diagnostic] = []
    targets = target_texts(tree)
    known = tree.known_stacks()
    ops = {op.key for op in tree.all_rules()}
    if test_file.stack and not tree.has_stack(test_file.stack):  # the file's own stack: said once
        guess = did_you_mean(test_file.stack, known)
        out.append(Diagnostic("TX403", f"no stack {test_file.stack!r} in the OPS tree", str(test_file.path),
                              _top_key_span(test_file.text, "stack"),
                              f"did you mean {guess!r}?" if guess else f"stacks: {', '.join(known)}",
                              source=test_file.text))
    for case in test_file.cases:
        stack = case_stack(tree, test_file, case)
        span = case.spans.get("stack") or case.spans.get("name")
        for field in ("ran", "not_ran"):
            for key in getattr(case.expect, field):
                if key not in ops:
                    guess = did_you_mean(key, sorted(ops))
                    out.append(Diagnostic("TX408", f"case {case.name!r}: expect.{field} names {key}, which is not an "
                                          "op of the OPS tree (<stack>/<scope>/<op name>)", str(test_file.path),
                                          case.spans.get("expect") or span,
                                          f"did you mean {guess}?" if guess else "txcl test --coverage lists the ops",
                                          source=test_file.text))
        if stack is not None and not case.stack and test_file.stack == stack and not tree.has_stack(stack):
            continue  # reported once above
        if stack is None:
            out.append(Diagnostic("TX403", f"case {case.name!r} names no stack and the workspace has several "
                                  f"({', '.join(tree.user_stacks())})", str(test_file.path), span,
                                  "add `stack:` to the case or to the top of the file", source=test_file.text))
        elif not tree.has_stack(stack):
            guess = did_you_mean(stack, known)
            out.append(Diagnostic("TX403", f"case {case.name!r}: no stack {stack!r} in the OPS tree",
                                  str(test_file.path), span,
                                  f"did you mean {guess!r}?" if guess else f"stacks: {', '.join(known)}",
                                  source=test_file.text))
        for kind, names in (("mocks", case.mocks), ("workers", case.workers)):
            for target in names:
                if not any(t == target or t.rstrip("/") == target.rstrip("/") for t in targets):
                    out.append(Diagnostic("TX407", f"case {case.name!r}: {kind} names {target}, which no rule "
                                          "calls", str(test_file.path), case.spans.get(kind),
                                          "check the EXEC string of the rule it is meant for",
                                          source=test_file.text))
    return out


def _top_key_span(text: str, key: str) -> Any:
    """The span of a top-level `key:` in a YAML test file (its first line when not found)."""
    import re

    from txcl.errors import Position, Span

    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if re.match(rf"{re.escape(key)}\s*:", line):
            return Span(Position(number, 1, offset), Position(number, len(key) + 1, offset + len(key)))
        offset += len(line)
    return Span(Position(1, 1, 0), Position(1, 2, 1))


def run_session(paths: Iterable[str | Path], *, workspace: Path, tree: Any, settings: Any,
                select: str | None = None, stop_first: bool = False, allow_network: bool = False,
                observers: list[Any] | None = None, ops_fixtures: bool = True,
                on_result: Callable[[CaseResult], None] | None = None) -> Session:
    started = time.perf_counter()
    session = Session(workspace)
    for path in discover(paths):
        test_file, diags = read_test_file(path)
        session.diagnostics += diags
        if test_file is None:
            continue
        checks = tree_checks(tree, test_file)
        session.diagnostics += checks
        if any(d.severity == "error" for d in checks):
            continue
        session.files.append(test_file)
    if session.load_failed:
        session.seconds = time.perf_counter() - started
        return session
    from txcl.ruletest.runner import needs_store

    durable = needs_store(tree)  # one look at the tree, not one per case
    for test_file in session.files:
        for case in test_file.cases:
            if select and select.lower() not in case.name.lower():
                continue
            stack = case_stack(tree, test_file, case)
            try:
                run = run_case(case, tree, settings, stack or "", allow_network=allow_network,
                               observers=observers, durable=durable)
                problems = differences(case.expect, run)
            except Exception as exc:  # noqa: BLE001 - a case that cannot run fails with the reason
                import logging

                logging.getLogger("txcl.test").debug("case %s failed to run", case.name, exc_info=True)
                run, problems = None, [f"the case could not run: {type(exc).__name__}: {exc}"]
            result = CaseResult(test_file.path, case, run, problems)
            session.results.append(result)
            if on_result is not None:
                on_result(result)
            if stop_first and not result.passed:
                session.seconds = time.perf_counter() - started
                return session
    if ops_fixtures:
        from txcl.ruletest.fixtures import fixture_case, fixture_file, fixture_ops, run_fixture

        for op in fixture_ops(tree):
            case = fixture_case(op)
            if select and select.lower() not in case.name.lower():
                continue
            run, problems = run_fixture(op, tree, settings, allow_network)
            result = CaseResult(fixture_file(op), case, run, problems)
            session.results.append(result)
            if on_result is not None:
                on_result(result)
            if stop_first and not result.passed:
                break
    session.seconds = time.perf_counter() - started
    return session


__all__ = ["Session", "CaseResult", "run_session", "tree_checks", "case_stack", "target_texts"]
