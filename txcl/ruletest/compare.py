"""What a case expected against what it did: the differences, one line per path.

`envelope` and `error` are subset matches — every key given must be there with an equal value
(objects recursively, arrays element by element and of the same length); keys not given are
not looked at. Numbers compare by value (1 == 1.0), never across types (1 != "1", 1 != true).
"""

from __future__ import annotations

import json
from typing import Any

from txcl.ruletest.runner import CaseRun
from txcl.ruletest.spec import Expect

_MISSING = object()


def _show(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    text = json.dumps(value, ensure_ascii=False, sort_keys=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def subset_diff(expected: Any, actual: Any, path: str = "") -> list[str]:
    """`path: expected X, got Y` for every place `actual` does not hold `expected`."""
    where = path or "."
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]
        out: list[str] = []
        for key, value in expected.items():
            segment = key if key.replace("_", "a").isalnum() else json.dumps(key)
            out += subset_diff(value, actual.get(key, _MISSING), f"{path}.{segment}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]
        if len(expected) != len(actual):
            return [f"{where}: expected {len(expected)} items {_show(expected)}, got {len(actual)} {_show(actual)}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += subset_diff(e, a, f"{path}.{i}")
        return out
    if actual is _MISSING or not _same_scalar(expected, actual):
        return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]
    return []


def _has_path(document: Any, path: str) -> bool:
    from txcl.values.paths import has, split_path_string

    if not isinstance(document, dict):
        return False
    return has(document, split_path_string(path[1:]))


def differences(expect: Expect, run: CaseRun) -> list[str]:
    """Every way `run` falls short of `expect` (empty: the case passed)."""
    out: list[str] = []
    if run.problem:
        out.append(run.problem)
    for url in dict.fromkeys(run.refused):
        out.append(f"{url} was called but is not mocked (txcl test makes no network calls: mock it under "
                   "`mocks:` or `workers:`, or pass --allow-network)")
    wanted = expect.status
    if wanted is None:  # not given: a run that ended well (completed or halted), or failed when an error is expected
        wanted = "failed" if expect.error is not None else ("halted" if run.status == "halted" else "completed")
    if run.status != wanted:
        detail = f" ({_show(run.error)})" if run.status == "failed" and run.error is not None else ""
        out.append(f"status: expected {wanted}, got {run.status}{detail}")
    if expect.has_envelope:
        if run.envelope is None:
            out.append(f"envelope: expected {_show(expect.envelope)}, but the run ended {run.status}")
        else:
            out += subset_diff(expect.envelope, run.envelope)
    for path in expect.absent:
        if run.envelope is not None and _has_path(run.envelope, path):
            from txcl.values.paths import read, split_path_string

            out.append(f"{path}: expected absent, got {_show(read(run.envelope, split_path_string(path[1:])))}")
    if expect.error is not None:
        if run.error is None:
            out.append(f"error: expected {_show(expect.error)}, but the run ended {run.status} without one")
        else:
            out += [f"error{line}" if line.startswith(".") else f"error: {line}"
                    for line in subset_diff(expect.error, run.error)]
    ran = set(run.ran)
    for op in expect.ran:
        if op not in ran:
            out.append(f"ran: {op} did not run (ran: {', '.join(run.ran) or 'nothing'})")
    for op in expect.not_ran:
        if op in ran:
            out.append(f"not_ran: {op} ran")
    return out


__all__ = ["differences", "subset_diff"]
