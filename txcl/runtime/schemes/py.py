"""`py://module:function` in-process ops.

Plain functions run in a bounded thread pool; `async def` functions on the event loop. A
raised exception is an op error `<ExceptionType>: <message>` (the traceback goes to the trace
only); a result that is not JSON-serialisable is an op error.
"""

from __future__ import annotations

import asyncio
import inspect
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from txcl.runtime.dispatch import OpContext, OpError
from txcl.values.merge import deep_copy


class PyOpError(OpError):
    def __init__(self, message: str, tb: str):
        super().__init__(message)
        self.traceback = tb


async def call_py(func: Callable[..., Any], op_input: dict, ctx: OpContext, executor: ThreadPoolExecutor | None) -> Any:
    arg = deep_copy(op_input)
    try:
        if inspect.iscoroutinefunction(func):
            result = await func(arg, ctx)
        elif executor is None:
            result = func(arg, ctx)
        else:
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(executor, func, arg, ctx)
            if inspect.isawaitable(result):
                result = await result
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the op's own failure
        raise PyOpError(f"{type(exc).__name__}: {exc}", traceback.format_exc()) from None
    if result is None:
        return {}
    return _check_json(result)


def _check_json(value: Any, depth: int = 0) -> Any:
    if depth > 200:
        raise OpError("py:// result is nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise OpError("py:// result is not JSON-serialisable: NaN or infinity")
        return value
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise OpError(f"py:// result is not JSON-serialisable: key {key!r} is not a string")
            _check_json(item, depth + 1)
        return value
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_json(item, depth + 1)
        return list(value) if isinstance(value, tuple) else value
    raise OpError(f"py:// result is not JSON-serialisable: {type(value).__name__}")
