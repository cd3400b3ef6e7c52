"""The one function registry.

Each family module (`time_`, `codecs`, `structure`, `strings`, `arithmetic`) registers its
functions with the `function` decorator; the six `try_` variants are added at the end.
Implementations take the list of resolved arguments and raise `TxclEvalError` with a
message that starts with `&name: `. The checker, the REPL and the language server read
`REGISTRY`; the evaluator uses `call` (or `spec.impl` after its own arity check).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Callable, Iterator

import attrs

from txcl.errors import TxclEvalError
from txcl.functions.helpers import MAX_STRING_BYTES, byte_len

__all__ = [
    "FunctionSpec", "REGISTRY", "TRY_VARIANTS", "lookup", "call", "suggest", "function",
    "FunctionEnvironment", "FixedEnvironment", "environment", "use_environment", "fail",
    "call_failure", "check_growth", "CHECK_GROWTH_FROM",
]


@attrs.frozen(slots=True)
class FunctionSpec:
    name: str
    min_args: int
    max_args: int | None  # None: unbounded
    even_args: bool
    doc: str
    signature: str
    deterministic: bool
    impl: Callable[[list], Any] = attrs.field(repr=False)
    is_try: bool = False

    def accepts(self, n: int) -> bool:
        if n < self.min_args:
            return False
        if self.max_args is not None and n > self.max_args:
            return False
        return not (self.even_args and n % 2)

    def arity_text(self) -> str:
        """`takes 3 arguments`, `takes 0 or 1 argument`, `takes an even number of arguments`
        ... without the `&name` in front (callers add it)."""
        lo, hi = self.min_args, self.max_args
        if self.even_args:
            return "takes an even number of arguments"
        if hi is None:
            if lo == 0:
                return "takes any number of arguments"
            return f"takes at least {lo} argument{'s' if lo != 1 else ''}"
        if lo == hi:
            if lo == 0:
                return "takes no arguments"
            return f"takes {lo} argument{'s' if lo != 1 else ''}"
        if hi == lo + 1:
            return f"takes {lo} or {hi} argument{'s' if hi != 1 else ''}"
        return f"takes {lo} to {hi} arguments"


REGISTRY: dict[str, FunctionSpec] = {}

#: The only `try_` functions, each with its base.
TRY_VARIANTS: dict[str, str] = {
    "try_json": "json", "try_b64decode": "b64decode", "try_urldecode": "urldecode",
    "try_get": "get", "try_substr": "substr", "try_tz_offsets": "tz_offsets",
}


def fail(name: str, message: str) -> TxclEvalError:
    """The error of a failing call: `&name: message` (raise the result)."""
    return TxclEvalError(f"&{name}: {message}")


def function(name: str, *, min_args: int, max_args: int | None, signature: str, doc: str,
             even_args: bool = False, deterministic: bool = True
             ) -> Callable[[Callable[[list], Any]], Callable[[list], Any]]:
    """Register `impl(args) -> value` under `name`."""

    def register(impl: Callable[[list], Any]) -> Callable[[list], Any]:
        if name in REGISTRY:
            raise RuntimeError(f"function {name} registered twice")
        REGISTRY[name] = FunctionSpec(name, min_args, max_args, even_args, doc, signature,
                                      deterministic, impl, False)
        return impl

    return register


def lookup(name: str) -> FunctionSpec | None:
    return REGISTRY.get(name)


def call(name: str, args: list) -> Any:
    """Run `&name(args...)`: check the arity, run, and turn any failure into
    `TxclEvalError("&name: ...")`."""
    spec = REGISTRY.get(name)
    if spec is None:
        raise TxclEvalError(f"&{name}: unknown function")
    n = len(args)
    if (n < spec.min_args or (spec.max_args is not None and n > spec.max_args)
            or (spec.even_args and n % 2)):
        raise TxclEvalError(f"&{name}: {spec.arity_text()}, got {n}")
    try:
        result = spec.impl(args)
    except TxclEvalError:
        raise
    except Exception as exc:  # a bug or an unexpected value shape: still a call failure
        raise call_failure(name, exc) from None
    if type(result) is str and len(result) > CHECK_GROWTH_FROM:
        check_growth(name, result, args)
    return result


#: Strings shorter than this (in characters) cannot exceed the limit `check_growth` enforces.
CHECK_GROWTH_FROM = MAX_STRING_BYTES // 4


def call_failure(name: str, exc: Exception) -> TxclEvalError:
    """The error of `&name` whose implementation raised `exc` (not a TxclEvalError)."""
    if isinstance(exc, RecursionError):
        return TxclEvalError(f"&{name}: value is nested too deeply")
    return TxclEvalError(f"&{name}: {exc}")


def check_growth(name: str, result: str, args: list) -> None:
    """A function's string may be longer than MAX_STRING_BYTES bytes of UTF-8 only by what its
    arguments bring in: at most MAX_STRING_BYTES more than the strings in its arguments (one
    level into lists and objects). Working on a big input is fine; building a big string out
    of a short rule is not (87 bytes of nested calls could otherwise allocate gigabytes, and
    `txcl check` evaluates calls whose arguments are all literals)."""
    size = byte_len(result)
    if size <= MAX_STRING_BYTES:
        return
    brought = 0
    for a in args:
        items = a if type(a) is list else a.values() if type(a) is dict else (a,)
        brought += sum(byte_len(x) for x in items if type(x) is str)
    if size <= brought + MAX_STRING_BYTES:
        return
    raise TxclEvalError(f"&{name}: result would be {size:,} bytes; a function may make a string at most "
                        f"1 MiB longer than the strings it is given ({brought:,} bytes here)")


# the functions rules use most, first: a tie between equally close names goes to these
COMMON = ("concat", "add", "get", "len", "now", "json", "sub", "mul", "div", "has", "set", "split", "join",
          "substr", "to_json", "array", "object", "mod", "pad", "repeat", "uuid", "sha256")


def suggest(name: str) -> str | None:
    """The closest registered name, for `did you mean` hints (TX101)."""
    from txcl.suggest import did_you_mean

    return did_you_mean(name[1:] if name.startswith("&") else name, REGISTRY, COMMON)


# ---------------------------------------------------------------- clock and randomness


class FunctionEnvironment:
    """Clock and randomness for `&now`, `&uuid` and `&tz`. Tests replace it with
    `use_environment` (for instance with a fixed `now_ns`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._seq = 0

    def now_ns(self) -> int:
        return time.time_ns()

    def random_bytes(self, n: int) -> bytes:
        return os.urandom(n)

    def uuid7(self) -> str:
        """A UUID version 7 (RFC 9562): 48-bit Unix ms, then a 12-bit counter that
        increases within one millisecond (so ids of one process are unique and sorted),
        then 62 random bits."""
        ms = self.now_ns() // 1_000_000
        with self._lock:
            if ms > self._last_ms:
                self._last_ms = ms
                # a random start that leaves room to count up (from the environment's randomness,
                # so a fixed environment gives a fixed id)
                self._seq = int.from_bytes(self.random_bytes(2), "big") & 0x7FF
            else:
                ms = self._last_ms
                self._seq += 1
                if self._seq > 0xFFF:  # counter exhausted: borrow the next millisecond
                    self._last_ms += 1
                    ms = self._last_ms
                    self._seq = 0
            seq = self._seq
        rand = int.from_bytes(self.random_bytes(8), "big") & ((1 << 62) - 1)
        value = ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | rand
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class FixedEnvironment(FunctionEnvironment):
    """A stopped clock (and, optionally, fixed random bytes) for tests."""

    def __init__(self, now_ns: int, random: bytes | None = None) -> None:
        super().__init__()
        self.now = now_ns
        self._random = random

    def now_ns(self) -> int:
        return self.now

    def random_bytes(self, n: int) -> bytes:
        if self._random is None:
            return super().random_bytes(n)
        return (self._random * (n // max(len(self._random), 1) + 1))[:n]


environment: FunctionEnvironment = FunctionEnvironment()


@contextlib.contextmanager
def use_environment(env: FunctionEnvironment) -> Iterator[FunctionEnvironment]:
    """Temporarily replace the module-level `environment` (tests)."""
    global environment
    saved = environment
    environment = env
    try:
        yield env
    finally:
        environment = saved


def current_environment() -> FunctionEnvironment:
    return environment


# ---------------------------------------------------------------- families and try_


def _make_try(base: str) -> Callable[[list], Any]:
    def impl(args: list) -> Any:
        try:
            return call(base, args)
        except Exception:
            return None

    return impl


def _register_all() -> None:
    from txcl.functions import arithmetic, codecs, strings, structure, time_  # noqa: F401

    for try_name, base in TRY_VARIANTS.items():
        spec = REGISTRY[base]
        params = spec.signature[spec.signature.index("("):]
        REGISTRY[try_name] = FunctionSpec(
            try_name, 0, None, False,
            f"like {base}, but null instead of an error",
            f"{try_name}{params}", spec.deterministic, _make_try(base), True,
        )


_register_all()
