"""TX203 duplicate-with-key, TX209 invalid-with-value."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule, is_literal, literal_value
from txcl.errors import Diagnostic
from txcl.syntax import ast
from txcl.vocabulary import WITH_KEY_DOCS, WithKey, json_type, parse_duration_ns, with_article


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

def duration_ok(value) -> bool:
    """A non-negative number of milliseconds or a Go duration string."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return value >= 0
    if isinstance(value, str):
        ns = parse_duration_ns(value)
        return ns is not None and ns >= 0
    return False


def _type_name(value) -> str:
    """A literal WITH value's type as TX209 words it (a float is ``a float`` here)."""
    name = json_type(value)
    return "a float" if name == "number" else with_article(name)


def _choices_text(choices: tuple) -> str:
    shown = [f'"{c}"' for c in choices]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _value_problem(spec: WithKey, key: str, value) -> str | None:
    """Why a literal value does not suit the kind of value `spec` says its key takes."""
    check = spec.check
    if check == "duration" and not duration_ok(value):
        return f"{key} needs milliseconds or a duration such as \"3s\", got {_show(value)}"
    if check == "choice" and value not in spec.choices:
        return f"{key} must be {_choices_text(spec.choices)}, got {_show(value)}"
    if check == "scope":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{key} needs an integer scope, got {_type_name(value)}"
        if not 0 <= value <= 999_999_999:
            return f"{key} {value} is not a scope (0 to 999999999)"
    if check == "integer" and (isinstance(value, bool) or not isinstance(value, int)
                               or not spec.minimum <= value <= spec.maximum):
        return f"{key} must be an integer from {spec.minimum} to {spec.maximum}, got {_show(value)}"
    if check == "array" and not isinstance(value, list):
        return f"{key} needs an array (usually a path), got {_type_name(value)}"
    if check == "count-or-percent":
        from txcl.values.coerce import tolerance_text

        if tolerance_text(value) == "0" and value not in (0, "0", "0%"):
            return (f"{key} must be a count (an integer from 0) or a percentage such as "
                    f"\"10%\", got {_show(value)}")
    if check == "url" and (not isinstance(value, str) or not value.startswith(("http://", "https://"))):
        return f"{key} needs an http(s) URL, got {_show(value)}"
    if check == "path":
        if not isinstance(value, str):
            return f"{key} needs a path string such as \"result\", got {_type_name(value)}"
        if value == "":
            return f"{key} is empty"
        if value[0] in ".@":
            return f"{key} is a path string without a leading '{value[0]}' (write \"{value[1:]}\")"
    if check == "string" and not isinstance(value, str):
        return f"{key} needs a string, got {_type_name(value)}"
    if check == "literal-string" and not isinstance(value, str):
        return f"{key} needs a literal string of comma-separated paths, got {_type_name(value)}"
    if check == "boolean" and not isinstance(value, bool):
        return f"{key} needs true or false, got {_show(value)}"
    return None


def _missing_requirement(spec: WithKey, key: str, pairs: dict[str, ast.WithPair]) -> str | None:
    """`key` has no effect without another key (or without it set to one value)."""
    for needed, wanted in spec.requires:
        pair = pairs.get(needed)
        if wanted is None and pair is None:
            return f"{key} has no effect without {needed}"
        if wanted is not None and (pair is None or (is_literal(pair.value) and literal_value(pair.value) != wanted)):
            return f'{key} has no effect without {needed} = "{wanted}"'
    return None


def _problem(key: str, value, pairs: dict[str, ast.WithPair]) -> str | None:
    """Why a literal value of a consumed key is wrong, or None (the table in txcl.vocabulary
    says what each key takes and needs)."""
    if key == "headers":  # only `headers.<name>` carries a header
        return None
    spec = WITH_KEY_DOCS.get(key) or (WITH_KEY_DOCS["headers"] if key.startswith("headers.") else None)
    if spec is None or spec.check is None:
        return None
    return _value_problem(spec, key, value) or _missing_requirement(spec, key, pairs)


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
