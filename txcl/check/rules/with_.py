"""TX203 duplicate-with-key, TX209 invalid-with-value."""

from __future__ import annotations

import re
from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule, is_literal, literal_value
from txcl.errors import Diagnostic
from txcl.syntax import ast


@file_rule("TX203")
def duplicate_with_key(ctx: FileContext) -> Iterator[Diagnostic]:
    seen: list[ast.WithPair] = []
    for pair in ctx.rule.with_:
        for earlier in seen:
            a, b = earlier.key, pair.key
            if a == b:
                msg = f"WITH key {pair.key_text} is given twice (first at line {earlier.key_span.start.line}); the later value wins"
            elif b[: len(a)] == a or a[: len(b)] == b:
                msg = (f"WITH keys {earlier.key_text} (line {earlier.key_span.start.line}) and {pair.key_text} "
                       "overlap; the later write replaces part of the earlier one")
            else:
                continue
            yield ctx.diag("TX203", pair.key_span, msg, hint="keep one of them")
            break
        seen.append(pair)


# ---------------------------------------------------------------- TX209

_GO_DURATION = re.compile(r"^[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+$")
MODES = ("sync", "async", "continuable")


def duration_ok(value) -> bool:
    """A non-negative number of milliseconds or a Go duration string."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return value >= 0
    if isinstance(value, str):
        try:
            from txcl.values.coerce import parse_duration_ns
        except ImportError:
            parse_duration_ns = None
        if parse_duration_ns is not None:
            ns = parse_duration_ns(value)
            return ns is not None and ns >= 0
        return (value == "0" or bool(_GO_DURATION.match(value))) and not value.startswith("-")
    return False


def _type_name(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    return "an array"


def _problem(key: str, value, pairs: dict[str, ast.WithPair]) -> str | None:
    """Why a literal value of a consumed key is wrong, or None."""
    if key in ("timeout", "continue_after", "max_duration", "heartbeat", "join_deadline", "join_wait",
               "retry_backoff"):
        if not duration_ok(value):
            return f"{key} needs milliseconds or a duration such as \"3s\", got {_show(value)}"
        if key == "retry_backoff" and "retries" not in pairs:
            return "retry_backoff has no effect without retries"
    elif key == "mode":
        if value not in MODES:
            return f"mode must be \"sync\", \"async\" or \"continuable\", got {_show(value)}"
    elif key == "join_at_scope":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"join_at_scope needs an integer scope, got {_type_name(value)}"
        if not 0 <= value <= 999_999_999:
            return f"join_at_scope {value} is not a scope (0 to 999999999)"
    elif key == "each":
        if not isinstance(value, list):
            return f"each needs an array (usually a path), got {_type_name(value)}"
    elif key == "window":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
            return f"window must be an integer from 1 to 1024, got {_show(value)}"
        if "each" not in pairs:
            return "window has no effect without each"
    elif key == "on_item_error":
        if value not in ("fail", "collect", "tolerate"):
            return f"on_item_error must be \"fail\", \"collect\" or \"tolerate\", got {_show(value)}"
    elif key == "tolerated_failures":
        from txcl.values.coerce import tolerance_text

        if tolerance_text(value) == "0" and value not in (0, "0", "0%"):
            return ("tolerated_failures must be a count (an integer from 0) or a percentage such as "
                    f"\"10%\", got {_show(value)}")
        policy = pairs.get("on_item_error")
        if policy is None or (is_literal(policy.value) and literal_value(policy.value) != "tolerate"):
            return 'tolerated_failures has no effect without on_item_error = "tolerate"'

    elif key == "retries":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
            return f"retries must be an integer from 0 to 100, got {_show(value)}"
        mode = pairs.get("mode")
        if mode is None or (is_literal(mode.value) and literal_value(mode.value) != "async"):
            return 'retries has no effect without mode = "async"'
    elif key == "on_join_deadline":
        if value not in ("fail", "continue"):
            return f"on_join_deadline must be \"fail\" or \"continue\", got {_show(value)}"
    elif key == "cancel_url":
        if not isinstance(value, str) or not value.startswith(("http://", "https://")):
            return f"cancel_url needs an http(s) URL, got {_show(value)}"
        mode = pairs.get("mode")
        if mode is None or (is_literal(mode.value) and literal_value(mode.value) != "async"):
            return 'cancel_url has no effect without mode = "async"'
    elif key in ("into", "status_into"):
        if not isinstance(value, str):
            return f"{key} needs a path string such as \"result\", got {_type_name(value)}"
        if value == "":
            return f"{key} is empty"
        if value[0] in ".@":
            return f"{key} is a path string without a leading '{value[0]}' (write \"{value[1:]}\")"
    elif key in ("method", "url", "body_encoding", "body_path") or key.startswith("headers."):
        if not isinstance(value, str):
            return f"{key} needs a string, got {_type_name(value)}"
    elif key in ("redact", "omit"):
        if not isinstance(value, str):
            return f"{key} needs a literal string of comma-separated paths, got {_type_name(value)}"
    elif key == "debug":
        if not isinstance(value, bool):
            return f"debug needs true or false, got {_show(value)}"
    return None


def _show(value) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@file_rule("TX209")
def invalid_with_value(ctx: FileContext) -> Iterator[Diagnostic]:
    pairs = {p.key_text: p for p in ctx.rule.with_}
    for pair in ctx.rule.with_:
        key = pair.key_text
        if key in ("redact", "omit") and not is_literal(pair.value):
            yield ctx.diag("TX209", pair.value.span,
                           f"{key} must be a literal string; a computed value is not read")
            continue
        if not is_literal(pair.value):
            continue
        problem = _problem(key, literal_value(pair.value), pairs)
        if problem is not None:
            yield ctx.diag("TX209", pair.value.span, problem,
                           hint="the runtime ignores this value (or uses it literally)")


def _runtime_keys() -> tuple[str, ...]:
    from txcl.vocabulary import WITH_KEY_DOCS

    return tuple(WITH_KEY_DOCS)


@file_rule("TX214")
def with_key_near_miss(ctx: FileContext) -> Iterator[Diagnostic]:
    """A WITH key the runtime does not consume but that is one or two edits from one it does
    (`join_at_scop`): the op silently goes without the setting."""
    from txcl.suggest import edit_distance

    known = _runtime_keys()
    for pair in ctx.rule.with_:
        key = pair.key_text
        head = key.split(".")[0]
        if head in known or key in known:
            continue
        close = sorted((edit_distance(head, k), k) for k in known if "." not in k)
        if close and close[0][0] <= (1 if len(head) <= 4 else 2):
            yield ctx.diag("TX214", pair.key_span,
                           f'WITH {key} is not a key the runtime reads; did you mean {close[0][1]}?',
                           hint=f"the op receives {key} as its own setting and the runtime uses the default "
                                f"for {close[0][1]}")


@file_rule("TX268")
def select_under_into(ctx: FileContext) -> Iterator[Diagnostic]:
    """A SELECT item written under the op's own `into`: SELECT's copies are written over the
    answer (a missing source gives ""), so that part of the answer is lost."""
    rule = ctx.rule
    if rule.select is None or rule.select.star or rule.exec is None:
        return
    pairs = {p.key_text: p for p in rule.with_}
    into = pairs.get("into")
    if into is None or not is_literal(into.value) or not isinstance(literal_value(into.value), str):
        return
    from txcl.values.paths import split_path_string

    segments = tuple(s for s in split_path_string(literal_value(into.value).strip()) if s)
    if not segments:
        return
    for item in rule.select.items:
        dest = tuple(item.target.segments)
        if dest[: len(segments)] == segments or segments[: len(dest)] == dest:
            yield ctx.diag("TX268", item.span,
                           f"SELECT writes {item.target.source_text} over the op's answer, which `into` places at "
                           f".{'.'.join(segments)}: the selected value (or \"\") wins",
                           hint="select into another name, or read the answer's value in EMIT")
