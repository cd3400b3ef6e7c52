"""Arithmetic: add, sub, mul, div in IEEE doubles; mod on integers."""

from __future__ import annotations

import math
from typing import Any, Callable

from txcl.functions.helpers import err, want_num
from txcl.functions.registry import function

_LIMIT = 2.0**53


def _result(name: str, a: float, b: float, r: float) -> int | float:
    """An int when both operands and the result are integral and |r| <= 2^53."""
    if not math.isfinite(r):
        raise err(name, "result is not finite")
    if a.is_integer() and b.is_integer() and r.is_integer() and abs(r) <= _LIMIT:
        return int(r)
    return r


def _binary(name: str, op: Callable[[float, float], float]) -> Callable[[list], Any]:
    def impl(args: list) -> int | float:
        a = want_num(name, args[0], 0)
        b = want_num(name, args[1], 1)
        try:
            r = op(a, b)
        except OverflowError:
            raise err(name, "result is not finite") from None
        return _result(name, a, b, r)

    return impl


function("add", min_args=2, max_args=2, signature="add(a, b)",
         doc="a + b (int when both operands and the result are integral)")(
    _binary("add", lambda a, b: a + b))
function("sub", min_args=2, max_args=2, signature="sub(a, b)",
         doc="a - b (int when both operands and the result are integral)")(
    _binary("sub", lambda a, b: a - b))
function("mul", min_args=2, max_args=2, signature="mul(a, b)",
         doc="a × b (int when both operands and the result are integral)")(
    _binary("mul", lambda a, b: a * b))


@function("div", min_args=2, max_args=2, signature="div(a, b)",
          doc="a / b (int when both operands and the result are integral)")
def _div(args: list) -> int | float:
    a = want_num("div", args[0], 0)
    b = want_num("div", args[1], 1)
    if b == 0:
        raise err("div", "division by zero")
    return _result("div", a, b, a / b)


def _integral(name: str, v: Any, pos: int) -> int:
    f = want_num(name, v, pos)
    if not f.is_integer():
        raise err(name, f"{'first' if pos == 0 else 'second'} argument is not an integer: {f!r}")
    if abs(f) > _LIMIT:
        raise err(name, f"{'first' if pos == 0 else 'second'} argument is larger than 2^53")
    return int(f)


@function("mod", min_args=2, max_args=2, signature="mod(a, b)",
          doc="remainder of truncated integer division, with the sign of a")
def _mod(args: list) -> int:
    a = _integral("mod", args[0], 0)
    b = _integral("mod", args[1], 1)
    if b == 0:
        raise err("mod", "modulo by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r
