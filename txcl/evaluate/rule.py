"""One rule's data steps: SET PRE, WITH, SELECT, EMIT and SET POST.

The walker calls these pieces around dispatch; `apply_rule` strings them together for tools
and tests (no EXEC: the op output is given). Everything here is pure over plain values.
"""

from __future__ import annotations

from txcl import vocabulary

from typing import Any, Iterable

import attrs

from txcl.errors import TxclValueTooDeepError, TxclEvalError, depth_guarded
from txcl.evaluate.cow import private_input, write_paths
from txcl.evaluate.plan import EMIT_DROPPED, EMIT_TTL, RulePlan, emit_kind, is_dropped_target, rule_plan
from txcl.evaluate.values import compile_value
from txcl.evaluate.when import when_matches
from txcl.syntax import ast
from txcl.values.coerce import parse_go_float
from txcl.values.merge import copy_value, deep_copy, merge
from txcl.values.paths import MISSING, PathError, has, read, split_path_string, write
from txcl.values.reserved import path_text

TXC = "_txc"


def _error_object(message: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "code": code}} if code else {"error": {"message": message}}


@attrs.define(slots=True)
class Prepared:
    """An op ready for dispatch.

    `input` is the op's full input after SET PRE and the SELECT writes (LOOP's view and
    EMIT's fallback); `dispatched` is what EXEC receives — the projection plus `_ts`, or,
    without SELECT, the input object itself (copy it before stamping it).
    """

    input: dict
    directives: dict
    dispatched: dict
    synthetic_emits: list[tuple[tuple[str, ...], Any]]
    error: str | None = None
    pre_input: dict | None = None


def _as_object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def apply_set_pre(rule: ast.Rule, op_input: dict, plan: RulePlan | None = None) -> tuple[dict, str | None]:
    """SET PRE: set-if-absent on the op's private input (any path, `_txc` included)."""
    for segments, value_fn, text, put in (plan or rule_plan(rule)).set_pre:
        if has(op_input, segments):
            continue
        try:
            value = value_fn(op_input, None)
            op_input = _as_object(put(op_input, segments, value))
        except (TxclEvalError, PathError) as exc:
            message = f"decorate {text}: {exc}"
            return _error_object(message), message
    return op_input, None


def resolve_directives(rule: ast.Rule, view: dict, plan: RulePlan | None = None) -> dict:
    """Resolve WITH into one nested object; raises TxclEvalError naming the key."""
    directives: dict = {}
    for key, value_fn, key_text, put in (plan or rule_plan(rule)).with_:
        try:
            value = value_fn(view, None)
            directives = _as_object(put(directives, key, value))
        except (TxclEvalError, PathError) as exc:
            raise TxclEvalError(f"WITH {key_text}: {exc}") from None
    return directives


def _select(rule: ast.Rule, op_input: dict) -> tuple[dict, dict, list]:
    select = rule.select
    if select is None or select.star:
        return op_input, op_input, []
    projection: dict = {}
    synthetic: list[tuple[tuple[str, ...], Any]] = []
    for item in select.items:
        found = read(op_input, item.source.segments)
        if found is MISSING or found == "":
            value: Any = ""
            if item.default is not None:
                try:
                    value = compile_value(item.default)(op_input, None)
                except TxclEvalError:
                    value = ""
        else:
            value = copy_value(found) if isinstance(found, (dict, list)) else found  # TxclValueTooDeepError
        dest = item.target.segments
        try:
            op_input = _as_object(write(op_input, dest, value))
            projection = _as_object(write(projection, dest, deep_copy(value)))
        except PathError:
            continue
        synthetic.append((dest, value))
    if "_ts" in op_input and "_ts" not in projection:
        projection["_ts"] = op_input["_ts"]
    return op_input, projection, synthetic


def prepare(rule: ast.Rule, op_input: dict, keep_pre_input: bool = False,
            plan: RulePlan | None = None) -> Prepared:
    """SET PRE → WITH → SELECT on a private copy of the scope-entry envelope. `plan`: the
    rule's plan when the caller holds it (saves looking it up)."""
    if rule.set_pre:
        op_input, error = apply_set_pre(rule, op_input, plan)
    else:
        error = None
    directives: dict = {}
    if rule.with_:  # after a SET PRE error too: the op goes on, with its directives
        try:
            directives = resolve_directives(rule, op_input, plan)
        except TxclEvalError as exc:
            if error is None:  # the first error is the one the input reports
                error = str(exc)
                op_input = _error_object(error)
    pre_input = deep_copy(op_input) if keep_pre_input else None
    try:
        op_input, dispatched, synthetic = _select(rule, op_input)
    except TxclValueTooDeepError as exc:  # a selected value nests too deeply to move
        error = error or f"select: {exc}"
        op_input = dispatched = _error_object(f"select: {exc}", exc.code)
        synthetic = []
    return Prepared(op_input, directives, dispatched, synthetic, error, pre_input)


@attrs.define(slots=True)
class Finished:
    """The op output after `into`, the object check and EMIT.

    `output` is None when the output is an op error (`error` says why). `dropped` lists
    reserved targets that EMIT skipped; `ttl` is the lowered TTL when EMIT lowered it.
    """

    output: dict | None
    error: str | None = None
    dropped: list[str] = attrs.Factory(list)
    ttl: int | None = None


def nest_into(directives: dict, output: Any) -> tuple[Any, str | None]:
    """Nest the output under `into` when it is a usable path string."""
    into = directives.get("into") if directives else None
    if not isinstance(into, str) or not into.strip():
        return output, None
    segments = split_path_string(into.strip())
    if not segments or any(seg == "" for seg in segments):
        return output, None
    if is_dropped_target(segments):
        return {}, path_text(segments)
    return write({}, segments, output), None


def finish_output(
    rule: ast.Rule, prepared: Prepared, output: Any, ttl: int | None = None, plan: RulePlan | None = None
) -> Finished:
    """`into` nesting, the object check, then EMIT (synthetic SELECT entries first).

    Every EMIT value is computed before any is written: a value never sees another EMIT's
    write."""
    dropped: list[str] = []
    if prepared.directives:
        output, dropped_into = nest_into(prepared.directives, output)
        if dropped_into:
            dropped.append(dropped_into)
    if output is None:
        output = {}
    if not isinstance(output, dict):
        return Finished(None, f"op output is not a JSON object (got {json_type(output)})", dropped)
    if plan is None:
        plan = rule_plan(rule)
    view = prepared.input
    if plan.emit_all_plain and not prepared.synthetic_emits:
        fresh = plan.emit_fresh
        if fresh is not None and not output:
            made = fresh(view)
            if made is not None:
                return Finished(made, None, dropped, None)
        return _emit_plain(plan.emit, output, view, dropped)
    entries: list[tuple[tuple[str, ...], Any, int]] = [
        (segments, value, emit_kind(segments)) for segments, value in prepared.synthetic_emits]
    for segments, value_fn, text, kind, _put in plan.emit:
        try:
            entries.append((segments, value_fn(output, view), kind))
        except TxclEvalError as exc:
            return Finished(_error_object(f"overlay {text}: {exc}", exc.code), None, dropped, None)
    new_ttl: int | None = None
    for segments, value, kind in entries:
        if kind == EMIT_TTL:
            lowered = _lower_ttl(value, ttl if new_ttl is None else new_ttl)
            if lowered is not None:
                new_ttl = lowered
                try:
                    output = _as_object(write(output, segments, lowered))
                except PathError as exc:
                    return Finished(_error_object(f"overlay {path_text(segments)}: {exc}"), None, dropped, None)
            continue
        if kind == EMIT_DROPPED:
            dropped.append(path_text(segments))
            continue
        try:
            if isinstance(value, (dict, list)):
                value = copy_value(value)
            output = _as_object(write(output, segments, value))
        except PathError as exc:
            return Finished(_error_object(f"overlay {path_text(segments)}: {exc}"), None, dropped, None)
        except TxclEvalError as exc:
            return Finished(_error_object(f"overlay {path_text(segments)}: {exc}", exc.code), None, dropped, None)
    return Finished(output, None, dropped, new_ttl)


def local_output(rule: ast.Rule, op_input: dict, plan: RulePlan, ttl: int | None = None) -> tuple[dict | None, str | None, Any]:
    """`prepare` then `finish_output` for a rule without EXEC and WITH (its output is what
    EMIT builds on an empty object): `(output or None, error, dropped targets)`. The common
    shape — no SELECT, every EMIT target plain — is EMIT's one generated function over the
    SET PRE result, without the intermediate objects; any other goes the long way."""
    select = rule.select
    fresh = plan.emit_fresh
    if fresh is not None and plan.emit_all_plain and (select is None or select.star):
        view = apply_set_pre(rule, op_input, plan)[0] if plan.set_pre else op_input
        made = fresh(view)
        if made is not None:
            return made, None, ()
        prepared = Prepared(view, {}, view, [])
    else:
        prepared = prepare(rule, op_input, plan=plan)
    finished = finish_output(rule, prepared, {}, ttl, plan)
    return finished.output, finished.error, finished.dropped


def _emit_plain(emits: tuple, output: dict, view: dict, dropped: list[str]) -> Finished:
    """EMIT when every target is written as it is (the common case of `finish_output`)."""
    values = []
    for _segments, value_fn, text, _kind, _put in emits:
        try:
            values.append(value_fn(output, view))
        except TxclEvalError as exc:
            return Finished(_error_object(f"overlay {text}: {exc}", exc.code), None, dropped, None)
    for (segments, _fn, _text, _kind, put), value in zip(emits, values):
        try:
            if isinstance(value, (dict, list)):
                value = copy_value(value)
            output = _as_object(put(output, segments, value))
        except PathError as exc:
            return Finished(_error_object(f"overlay {path_text(segments)}: {exc}"), None, dropped, None)
        except TxclEvalError as exc:
            return Finished(_error_object(f"overlay {path_text(segments)}: {exc}", exc.code), None, dropped, None)
    return Finished(output, None, dropped, None)


def _lower_ttl(value: Any, current: int | None) -> int | None:
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        return None
    if isinstance(value, str):
        parsed = parse_go_float(value)
        if parsed is None:
            return None
        number = parsed
    else:
        number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        return None
    lowered = int(number) if abs(number) < 1e18 else (10**18 if number > 0 else -(10**18))
    lowered = max(lowered, 0)
    if current is not None:
        lowered = min(lowered, current)
    return lowered


def json_type(value: Any) -> str:
    """The JSON type name of a value, for messages (``number`` for every number)."""
    name = vocabulary.json_type(value)
    return "number" if name == "integer" else name


@attrs.define(slots=True)
class SetPostResult:
    envelope: dict
    error: str | None = None
    dropped: list[str] = attrs.Factory(list)


def apply_set_post(rules: Iterable[ast.Rule], envelope: dict) -> SetPostResult:
    """SET POST of every rule that ran (in name order): set-if-absent on the envelope."""
    dropped: list[str] = []
    for rule in rules:
        for segments, value_fn, text, is_dropped, put in rule_plan(rule).set_post:
            if is_dropped:
                dropped.append(text)
                continue
            if has(envelope, segments):
                continue
            try:
                value = value_fn(envelope, None)
                envelope = _as_object(put(envelope, segments, value))
            except (TxclEvalError, PathError) as exc:
                message = f"decorate {text}: {exc}"
                return SetPostResult(_error_object(message), message, dropped)
    return SetPostResult(envelope, None, dropped)


@attrs.frozen
class RuleResult:
    """What one rule does to an envelope, without EXEC (`txcl.apply_rule`).

    `matched` says whether WHEN matches; the other fields are computed either way so tools
    can show what the rule would do. `op_input` is the input after SET PRE, `directives` the
    resolved WITH, `dispatched` what EXEC would receive, `output` the op output after EMIT
    (None when it is an op error), `envelope` the envelope after merging that output and
    SET POST.
    """

    matched: bool
    op_input: dict
    directives: dict
    dispatched: dict
    output: dict | None
    envelope: dict
    error: str | None = None
    dropped: tuple[str, ...] = ()


@depth_guarded
def apply_rule(rule: ast.Rule, envelope: dict, output: Any = None) -> RuleResult:
    """Apply one rule to `envelope` as if EXEC returned `output` (default `{}`)."""
    matched = when_matches(rule, envelope)
    source = envelope if isinstance(envelope, dict) else {}
    # prepare writes only along the rule's write paths: copying the containers on them keeps
    # `envelope` untouched (what the walker does), and every result below is a copy of its own
    paths = write_paths(rule)
    op_input = deep_copy(source) if paths is None else private_input(source, paths) if paths else source
    prepared = prepare(rule, op_input, keep_pre_input=True)
    dispatched = deep_copy(prepared.dispatched)
    finished = finish_output(rule, prepared, deep_copy(output) if output is not None else {})
    merged = merge(source, finished.output) if finished.output else deep_copy(source)
    post = apply_set_post([rule], merged)
    return RuleResult(
        matched=matched,
        op_input=prepared.pre_input if prepared.pre_input is not None else {},
        directives=prepared.directives,
        dispatched=dispatched,
        output=finished.output,
        envelope=post.envelope,
        error=finished.error or post.error or prepared.error,
        dropped=tuple(finished.dropped + post.dropped),
    )
