"""The reference implementation's convention for testing one op: next to a rule, a
`mock-request.json` (the envelope the op sees) and a `mock-response.json` (what its EXEC must
answer). Each such pair is a case of `txcl test` (`--ops-fixtures`, on by default): the rule's
SET and SELECT prepare the op's input from the request, the EXEC target is called as in a walk
(network targets only with --allow-network), and its answer must equal the response (the
identity stamp `_txc` left aside on both sides).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from txcl.ruletest.runner import CaseRun
from txcl.ruletest.spec import Case, Expect

REQUEST, RESPONSE = "mock-request.json", "mock-response.json"


def fixture_ops(tree: Any) -> list[Any]:
    """The ops of the tree that have both fixture files and an EXEC target to call."""
    out = []
    for stack in tree.stacks():
        for scope in tree.own_scopes(stack):
            for op in tree.rules_at(stack, scope):
                if op.stack == stack and REQUEST in op.fixtures and RESPONSE in op.fixtures and op.target is not None:
                    out.append(op)
    return out


def fixture_case(op: Any) -> Case:
    return Case(name=f"{op.key} (mock-request.json -> mock-response.json)", line=1, input=op.fixtures[REQUEST],
                stack=op.stack, clock_ms=0, mocks={}, workers={}, expect=Expect())


def _without_stamp(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "_txc"}
    return value


async def _call(op: Any, tree: Any, settings: Any, allow_network: bool) -> tuple[Any, str | None]:
    import httpx

    from txcl.evaluate.rule import prepare
    from txcl.runtime.dispatch import OpError
    from txcl.runtime.interpreter import Interpreter
    from txcl.runtime.state import Frame, PreparedOp
    from txcl.values.merge import deep_copy

    interp = Interpreter(tree, settings=settings)
    refused: list[str] = []
    if not allow_network:
        def refuse(request: Any) -> Any:
            refused.append(str(request.url))
            raise httpx.ConnectError(f"{request.url} is not mocked: txcl test makes no network calls "
                                     "(pass --allow-network to call it)", request=request)
        interp.services.http_client = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    try:
        request = op.fixtures[REQUEST] if isinstance(op.fixtures[REQUEST], dict) else {}
        run = interp.new_run(deep_copy(request), op.stack, src="test")
        frame = Frame(op.stack, op.scope, f"{op.stack}/{op.scope}", 1)
        prepared = prepare(op.rule, deep_copy(request))
        if prepared.error is not None:
            return None, f"the rule's SET or WITH failed: {prepared.error}"
        pop = PreparedOp(op, prepared, "sync")
        walker = interp.walker
        timeout_ms, problem = walker.op_timeout(prepared.directives, settings.op_timeout)
        if problem is not None:
            return None, problem
        op_input = walker.stamped_input(frame, pop, op.target, prepared.dispatched)
        try:
            raw, _ = await walker.call_target(run, frame, pop, op.target, op_input, prepared.directives, timeout_ms)
        except OpError as exc:
            if refused:
                return None, f"{refused[0]} was called but is not mocked (pass --allow-network to call it)"
            return None, f"the op failed: {exc.message}"
        return raw, None
    finally:
        await interp.aclose_http()
        interp.close()


def run_fixture(op: Any, tree: Any, settings: Any, allow_network: bool = False) -> tuple[CaseRun, list[str]]:
    """Call the op on its request; (what it did, the differences from the response)."""
    from txcl.ruletest.compare import subset_diff

    started = time.perf_counter()
    raw, problem = asyncio.run(_call(op, tree, settings, allow_network))
    expected = _without_stamp(op.fixtures[RESPONSE])
    got = _without_stamp(raw)
    problems = [problem] if problem else []
    if not problem and got != expected:
        problems = subset_diff(expected, got) or [f"the op answered {got!r}, not the response"]
        extra = sorted(set(got) - set(expected)) if isinstance(got, dict) and isinstance(expected, dict) else []
        problems += [f".{key}: not in mock-response.json, got {got[key]!r}" for key in extra]
    run = CaseRun("completed" if not problem else "failed", got, None, [op.key] if raw is not None else [], [], [],
                  [], [], (time.perf_counter() - started) * 1000)
    return run, problems


def fixture_file(op: Any) -> Path:
    return Path(op.file).parent / RESPONSE


__all__ = ["fixture_ops", "fixture_case", "run_fixture", "fixture_file"]
