"""Reports of a `txcl test` session: `full` and `concise` for people, `json` for tools, `junit`
for CI systems. The closing line reads `N passed, M failed in S s` (as pytest prints it)."""

from __future__ import annotations

import json
import os
from typing import Any

from txcl.ruletest.session import CaseResult, Session


def _style(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def _display(path: Any) -> str:
    try:
        return os.path.relpath(path, os.getcwd())
    except ValueError:
        return str(path)


def summary(session: Session, color: bool = False) -> str:
    passed = sum(1 for r in session.results if r.passed)
    failed = len(session.results) - passed
    text = f"{passed} passed, {failed} failed in {session.seconds:.2f}s"
    return _style(text, "1;31" if failed else "1;32", color)


def _steps(result: CaseResult) -> list[str]:
    if result.run is None:
        return []
    out = []
    for step in result.run.steps:
        where = f"{step.get('stack')}/{step.get('scope')}/{step.get('name')}"
        extra = f": {step['error']}" if step.get("error") else ""
        out.append(f"{where} {step.get('transport')} {step.get('status')}{extra}")
    return out


def full(session: Session, color: bool = False) -> str:
    lines: list[str] = []
    by_file: dict[Any, list[CaseResult]] = {}
    for result in session.results:
        by_file.setdefault(result.file, []).append(result)
    for path, results in by_file.items():
        marks = "".join(_style(".", "32", color) if r.passed else _style("F", "1;31", color) for r in results)
        lines.append(f"{_display(path)} {marks}")
    for result in session.failed:
        lines.append("")
        lines.append(_style(f"FAILED {_display(result.file)}::{result.case.name}", "1;31", color))
        for problem in result.problems:
            lines.append("  " + _color_problem(problem, color))
        steps = _steps(result)
        if steps:
            lines.append("  steps:")
            lines += [f"    {s}" for s in steps]
        if result.run is not None and result.run.deliveries:
            lines.append("  callbacks:")
            for d in result.run.deliveries:
                answer = f"{d.answer[0]} {json.dumps(d.answer[1])}" if d.answer else "not delivered"
                lines.append(f"    {d.target} {d.kind} at +{d.due_ms - result.case.clock_ms} ms -> {answer}")
    lines.append("")
    lines.append(summary(session, color))
    return "\n".join(lines)


def _color_problem(problem: str, color: bool) -> str:
    if not color or ": expected " not in problem:
        return problem
    head, _, rest = problem.partition(": expected ")
    wanted, sep, got = rest.partition(", got ")
    if not sep:
        return problem
    return f"{head}: expected {_style(wanted, '32', True)}, got {_style(got, '31', True)}"


def concise(session: Session, color: bool = False) -> str:
    lines = []
    for result in session.results:
        name = f"{_display(result.file)}::{result.case.name}"
        if result.passed:
            lines.append(f"{name} {_style('PASSED', '32', color)}")
        else:
            lines.append(f"{name} {_style('FAILED', '1;31', color)} {result.problems[0]}")
    lines.append(summary(session, color))
    return "\n".join(lines)


def as_json(session: Session) -> str:
    cases = []
    for result in session.results:
        run = result.run
        cases.append({
            "file": _display(result.file),
            "name": result.case.name,
            "outcome": result.outcome,
            "duration_ms": round(run.duration_ms, 3) if run else None,
            "diff": result.problems,
            "status": run.status if run else None,
            "envelope": run.envelope if run else None,
            "error": run.error if run else None,
            "ran": run.ran if run else [],
            "calls": [{"target": c.target, "kind": c.kind, "item_index": c.item_index} for c in run.calls] if run else [],
        })
    passed = sum(1 for r in session.results if r.passed)
    return json.dumps({"cases": cases, "passed": passed, "failed": len(cases) - passed,
                       "seconds": round(session.seconds, 3)}, indent=2, ensure_ascii=False)


def junit(session: Session) -> str:
    """JUnit XML: one testsuite per test file, one testcase per case."""
    from xml.etree import ElementTree as ET

    root = ET.Element("testsuites", name="txcl test", tests=str(len(session.results)),
                      failures=str(len(session.failed)), time=f"{session.seconds:.3f}")
    by_file: dict[Any, list[CaseResult]] = {}
    for result in session.results:
        by_file.setdefault(result.file, []).append(result)
    for path, results in by_file.items():
        name = _display(path)
        seconds = sum((r.run.duration_ms if r.run else 0.0) for r in results) / 1000
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(results)),
                              failures=str(sum(1 for r in results if not r.passed)), time=f"{seconds:.3f}")
        for result in results:
            case = ET.SubElement(suite, "testcase", classname=name, name=result.case.name,
                                 time=f"{(result.run.duration_ms if result.run else 0) / 1000:.3f}")
            case.set("file", name)
            case.set("line", str(result.case.line))
            if not result.passed:
                failure = ET.SubElement(case, "failure", message=result.problems[0], type="AssertionError")
                failure.text = "\n".join(result.problems + ([""] + _steps(result) if _steps(result) else []))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render(session: Session, output_format: str, color: bool = False) -> str:
    if output_format == "concise":
        return concise(session, color)
    if output_format == "json":
        return as_json(session)
    if output_format == "junit":
        return junit(session)
    return full(session, color)


__all__ = ["render", "summary", "full", "concise", "as_json", "junit"]
