"""Number formatting: the text form of conditions, the JSON form and the print form.

All three forms start from the shortest round-trip digits of a float (Python's `repr`
gives exactly those) and differ only in when they switch to exponent notation.
"""

from __future__ import annotations

import math

_PLAIN_LOW = 1e-6
_INTEGRAL_LIMIT = 1e21


def decompose(x: float) -> tuple[bool, str, int]:
    """Shortest digits of a finite float: (negative, digits, dp) with x = 0.digits × 10^dp.

    `digits` has no leading or trailing zeros ("0" for zero, with dp = 1).
    """
    r = repr(x)
    neg = r[0] == "-"
    if neg:
        r = r[1:]
    e = r.find("e")
    if e >= 0:
        mant, exp = r[:e], int(r[e + 1:])
    else:
        mant, exp = r, 0
    dot = mant.find(".")
    if dot >= 0:
        intpart, frac = mant[:dot], mant[dot + 1:]
    else:
        intpart, frac = mant, ""
    digits = intpart + frac
    dp = len(intpart) + exp
    stripped = digits.lstrip("0")
    dp -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    if not digits:
        return neg, "0", 1
    return neg, digits, dp


def _plain(neg: bool, digits: str, dp: int) -> str:
    if dp <= 0:
        body = "0." + "0" * (-dp) + digits
    elif dp >= len(digits):
        body = digits + "0" * (dp - len(digits))
    else:
        body = digits[:dp] + "." + digits[dp:]
    return "-" + body if neg else body


def _exponent(neg: bool, digits: str, dp: int, min_exp_digits: int) -> str:
    exp = dp - 1
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if exp < 0 else "+"
    e = str(abs(exp)).rjust(min_exp_digits, "0")
    return ("-" if neg else "") + mant + "e" + sign + e


def _integral_text(x: float) -> str | None:
    if x.is_integer() and abs(x) < _INTEGRAL_LIMIT:
        if x == 0:
            return "-0" if math.copysign(1.0, x) < 0 else "0"
        return str(int(x))
    return None


def float_json(x: float) -> str:
    """JSON form. The caller guarantees x is finite."""
    t = _integral_text(x)
    if t is not None:
        return t
    neg, digits, dp = decompose(x)
    ax = abs(x)
    if _PLAIN_LOW <= ax < _INTEGRAL_LIMIT:
        return _plain(neg, digits, dp)
    return _exponent(neg, digits, dp, 1)


def float_text(x: float) -> str:
    """Text form of conditions: always plain decimal, no trailing `.0`."""
    r = float.__repr__(x)
    if "e" not in r and "n" not in r:  # plain repr: 1e-4 <= |x| < 1e16
        return r[:-2] if r.endswith(".0") else r
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "+Inf" if x > 0 else "-Inf"
    t = _integral_text(x)
    if t is not None:
        return t
    return _plain(*decompose(x))


def float_print(x: float) -> str:
    """Print form (Go's %v except for integral floats below 1e21)."""
    r = float.__repr__(x)
    if "e" not in r and "n" not in r and -1e6 < x < 1e6:  # plain in both notations
        return r[:-2] if r.endswith(".0") else r
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "+Inf" if x > 0 else "-Inf"
    t = _integral_text(x)
    if t is not None:
        return t
    neg, digits, dp = decompose(x)
    exp = dp - 1
    if exp < -4 or exp >= 6:
        return _exponent(neg, digits, dp, 2)
    return _plain(neg, digits, dp)
