"""The typed-envelope findings of an OPS tree (TX260–TX268), from what txcl.types.flow
computed. Untyped stacks — no schema.json in the stack or its ancestors — get none of them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterable


from txcl.check.tree import Member, TreeContext
from txcl.errors import Diagnostic
from txcl.types.flow import Flow, OpTypes
from txcl.types.jsonpos import escape_pointer
from txcl.types.schema import SchemaSet, definition
from txcl.types.shape import (ABSENT, ALL_TYPES, KNOWN, UNKNOWN, Shape, describe_types, enum_key, enum_values, join,
                              lookup, paths)
from txcl.types.signatures import never_accepted

CODES = ("TX260", "TX261", "TX262", "TX263", "TX264", "TX265", "TX266", "TX267", "TX268")

_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")


def typed_findings(tree: TreeContext, ops_dir: Path, stack_schemas: dict[str, Path], op_schemas: dict[Path, Path],
                   show: Callable[[Path], str], mcp_tools: Callable[[str], OpTypes | None] | None = None,
                   schema_texts: dict[Path, str] | None = None) -> tuple[list[Diagnostic], Flow | None]:
    """Every TX26x finding of one tree, and the flow analysis (None when nothing is typed).
    `schema_texts`: editor buffers standing in for schema files."""
    schemas = SchemaSet(ops_dir, show, schema_texts)
    found: list[Diagnostic] = []
    for stack, path in sorted(stack_schemas.items()):
        file = schemas.load(path)
        if file is not None and definition(file, "input") is None:
            found.append(file.diag("", "a stack's schema.json needs $defs.input: the document a request brings "
                                       "({} accepts anything)",
                                   hint='add "$defs": {"input": {...}}, and "output" for the envelope it answers'))
    by_file = {m.file: m for m in tree.members}
    op_files: dict[str, Path] = {}
    for rule_path, schema_path in op_schemas.items():
        shown = show(rule_path)
        if shown in by_file:
            op_files[shown] = schema_path
        file = schemas.load(schema_path)
        if file is not None and definition(file, "input") is None and definition(file, "output") is None:
            found.append(file.diag("", "an op's schema file declares neither $defs.input nor $defs.output"))
    flow = Flow(tree, schemas, stack_schemas, op_files, mcp_tools)
    if not flow.typed_stacks():
        found.extend(schemas.diagnostics)
        return _dedupe(found), None
    flow.run()
    found.extend(schemas.diagnostics)
    checker = _Checker(flow, tree)
    for stack in flow.typed_stacks():
        checker.stack(stack)
    found.extend(checker.found)
    return _dedupe(found), flow


def _dedupe(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    seen, out = set(), []
    for d in diags:
        key = (d.file, d.code, tuple(d.span) if d.span is not None else None, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _text(segments: Iterable[str]) -> str:
    from txcl.syntax import ast

    return ast.Path(tuple(segments)).source_text if segments else "."


class _Checker:
    def __init__(self, flow: Flow, tree: TreeContext) -> None:
        self.flow, self.tree = flow, tree
        self.found: list[Diagnostic] = []
        self._provided: dict[str, Shape] = {}

    def diag(self, m: Member, code: str, span: Any, message: str, hint: str | None = None) -> None:
        self.found.append(self.tree.diag(m, code, tuple(span) if span is not None else None, message, hint))

    def provided(self, stack: str) -> Shape:
        """Everything the stack's walks ever hold, joined (what "provided somewhere" means)."""
        if stack not in self._provided:
            shapes = [s.shape for (st, _), s in (*self.flow.entry.items(), *self.flow.exit.items()) if st == stack]
            for scope in self.flow.nodes(stack):
                for m in self.tree.rules_at(stack, scope):
                    out = self.flow.answer(m)
                    if out is not None:
                        shapes.append(out)
            total = shapes[0]
            for shape in shapes[1:]:
                total = join(total, shape)
            self._provided[stack] = total
        return self._provided[stack]

    # ------------------------------------------------------------ per stack

    def stack(self, stack: str) -> None:
        for scope in self.flow.nodes(stack):
            state = self.flow.entry.get((stack, scope))
            if state is None:
                continue
            exit_ = self.flow.exit.get((stack, scope), state)
            for m in self.tree.rules_at(stack, scope):
                self.member(stack, scope, m, state.shape, exit_.shape)
        self.required_output(stack)

    def member(self, stack: str, scope: int, m: Member, entry: Shape, exit_: Shape) -> None:
        flow = m.facts.get("flow")
        if not flow:
            return
        deferred = m.facts.get("mode") == "async" and isinstance(m.facts.get("join"), int) and m.facts["join"] > scope
        inp = self.flow.input_shape(m, entry)
        answer = self.flow.answer(m)
        docs = {"env": entry, "input": inp, "post": exit_}
        for doc, segments, at_sugar, span, comparison, argument in flow.get("reads", ()):
            segments = tuple(segments)
            if not segments or segments[0] == "_txc" or at_sugar:
                continue
            if doc == "emit":
                if answer is None or deferred:
                    continue
                found = lookup(answer, segments)
                if found.status == UNKNOWN:
                    continue
                if found.status != KNOWN or not found.certain:
                    other = lookup(inp, segments)
                    found = found if other.status == ABSENT else other if found.status != KNOWN else found
            elif doc == "view":
                if answer is None:
                    continue
                found = lookup(join(inp, answer), segments)
            else:
                found = lookup(docs[doc], segments)
            if found.status == ABSENT:
                self.absent_read(stack, m, segments, span, docs.get(doc, inp))
            elif found.status == KNOWN and comparison is not None:
                self.comparison(m, segments, span, comparison, found.shape, found.certain)
        for name, span, args, doc in flow.get("calls", ()):
            self.call(m, name, span, args, docs.get(doc, inp), answer if doc == "emit" else None, inp)
        self.writes(stack, m, flow, inp, answer)
        self.op_input(m, flow, inp)
        self.select_shadows(m, flow, answer)

    # ------------------------------------------------------------ reads

    def absent_read(self, stack: str, m: Member, segments: tuple[str, ...], span: Any, here: Shape) -> None:
        text = _text(segments)
        somewhere = lookup(self.provided(stack), segments)
        if somewhere.status != ABSENT:
            where = self._where(stack, segments)
            self.diag(m, "TX262", span, f"{text} is read before anything provides it: no walk reaching "
                                        f"{m.stack}/{m.scope} has it yet",
                      hint=f"it is provided {where}" if where else "move the read after the scope that writes it")
            return
        known = ["." + ".".join(p) for p, _ in paths(here) if p and p[0] != "_txc"]
        from txcl.suggest import did_you_mean

        close = did_you_mean(text, known)
        schema = self.flow.stack_types(stack)
        owner = f" ({schema.file.shown})" if schema is not None else ""
        self.diag(m, "TX261", span, f"{text} is not in the envelope of stack {stack} on any walk: no schema declares "
                                    f"it{owner} and no rule writes it",
                  hint=f"did you mean {close}?" if close else "declare it in the stack's schema, or write it first")

    def _where(self, stack: str, segments: tuple[str, ...]) -> str | None:
        for scope in self.flow.nodes(stack):
            state = self.flow.exit.get((stack, scope))
            if state is not None and lookup(state.shape, segments).status != ABSENT:
                return f"at {stack}/{scope}"
        for scope in self.flow.nodes(stack):
            for m in self.tree.rules_at(stack, scope):
                out = self.flow.answer(m)
                if out is not None and lookup(out, segments).status != ABSENT:
                    return f"by {m.stack}/{m.name}'s answer, which arrives at its join"
        return None

    def comparison(self, m: Member, segments: tuple[str, ...], span: Any, comparison: Any, shape: Shape,
                   certain: bool) -> None:
        op, kind, value = comparison
        types = set(shape.types) | ({"null"} if not certain else set())
        text = _text(segments)
        if kind == "regex" and types and types <= {"object", "array"}:
            self.diag(m, "TX263", span, f"{text} is {describe_types(types)}: a regex matches its JSON text, never "
                                        "its members", hint="match a member of it instead")
            return
        if op in ("<", "<=", ">", ">=") and types and types <= {"object", "array"}:
            self.diag(m, "TX263", span, f"{text} is {describe_types(types)}: ordering compares its JSON text",
                      hint="compare a member, or &len of it")
            return
        outcomes = _outcomes(op, kind, value, types, shape.enum if certain or shape.enum is None else
                             shape.enum | {enum_key(None)})
        if outcomes == {False}:
            self.diag(m, "TX263", span, f"{op} {_lit(kind, value)} is never true for {text} "
                                        f"({_describe(shape, certain)})", hint=_hint(shape))
        elif outcomes == {True}:
            self.diag(m, "TX263", span, f"{op} {_lit(kind, value)} is always true for {text} "
                                        f"({_describe(shape, certain)})", hint=_hint(shape))

    def call(self, m: Member, name: str, span: Any, args: list, doc: Shape, answer: Shape | None,
             inp: Shape) -> None:
        if all(a and a[0] == "lit" for a in args):
            return  # all literal: TX207 evaluates it
        for index, arg in enumerate(args):
            never = never_accepted(name, index)
            if not never or not arg or arg[0] in ("any",):
                continue
            if arg[0] == "path" and arg[2] == "emit" and answer is None:
                continue
            shape = self.flow.value_shape(arg, doc, answer, inp)
            if shape.types == ALL_TYPES or not shape.types:
                continue
            if set(shape.types) <= never:
                self.diag(m, "TX267", span, f"&{name} never accepts {describe_types(shape.types)} as argument "
                                            f"{index + 1}: the call always fails",
                          hint="pass a value of another type, or use the try_ variant" if "try_" + name in
                          _TRY_NAMES else "pass a value of another type")

    # ------------------------------------------------------------ writes

    def writes(self, stack: str, m: Member, flow: dict, inp: Shape, answer: Shape | None) -> None:
        types = self.flow.stack_types(stack)
        if types is None:
            return
        declared = types.output if types.output is not None else types.input
        for kind, segments, span, value in flow.get("writes", ()):
            segments = tuple(segments)
            if kind not in ("emit", "post", "select") or not segments or segments[0] == "_txc":
                continue
            slot = lookup(declared, segments)
            if slot.status != KNOWN or slot.shape.types == ALL_TYPES:
                continue
            if kind == "emit" and value[0] == "path" and answer is None:
                continue
            written = self.flow.value_shape(value, inp, answer if kind == "emit" else None, inp)
            if written.types == ALL_TYPES:
                continue
            allowed = set(slot.shape.types) | ({"integer"} if "number" in slot.shape.types else set())
            if not (set(written.types) & allowed):
                self.diag(m, "TX264", span, f"{_text(segments)} is declared {describe_types(slot.shape.types)}; "
                                            f"this writes {describe_types(written.types)}", hint=_hint(slot.shape))
            elif slot.shape.enum is not None and written.enum is not None and not (written.enum & slot.shape.enum):
                shown = ", ".join(repr_json(v) for v in enum_values(written.enum))
                self.diag(m, "TX264", span, f"{_text(segments)} may only be {_enum_text(slot.shape)}; this writes "
                                            f"{shown}", hint=_hint(slot.shape))

    def required_output(self, stack: str) -> None:
        types = self.flow.stack_types(stack)
        if types is None or types.stack != stack or not isinstance(types.output_schema, dict):
            return
        ends = self.flow.ends.get(stack, [])
        if not ends:
            return
        for segments, pointer in _required(types.output_schema, types.output_pointer or ""):
            missing = [s for s in ends if not _certain(s.shape, segments)]
            if missing:
                self.found.append(types.file.diag(
                    pointer, f"{_text(segments)} is required by $defs.output, but a walk of stack {stack} can end "
                             "without writing it", code="TX265",
                    hint="write it on every walk (a rule without WHEN, or SET POST as a default), or make it optional"))

    # ------------------------------------------------------------ op input

    def op_input(self, m: Member, flow: dict, inp: Shape) -> None:
        op = self.flow.op_types(m)
        if op is None or op.input is None:
            return
        required = [name for name, child in op.input.props if child.certain]
        select = flow.get("select")
        if isinstance(select, list):
            given = {tuple(dest)[0] for dest, *_ in select if dest}
            lacking = [name for name in required if name not in given]
            if lacking:
                self.diag(m, "TX266", flow.get("select_span"),
                          f"SELECT gives the op no {', '.join('.' + n for n in lacking)}, which its $defs.input "
                          f"requires "
                          f"({op.file.shown if op.file else 'its tool'})",
                          hint=f"add … AS .{lacking[0]}")
            for dest, source, span, default in select:
                dest = tuple(dest)
                if len(dest) != 1:
                    continue
                slot = op.input.prop(dest[0])
                if slot is None or slot.types == ALL_TYPES:
                    continue
                value = self.flow.value_shape(["select", source, default], inp, None, inp)
                allowed = set(slot.types) | ({"integer"} if "number" in slot.types else set())
                if value.types != ALL_TYPES and not (set(value.types) & allowed):
                    self.diag(m, "TX266", span, f"the op's $defs.input declares {dest[0]} "
                                                f"{describe_types(slot.types)}; SELECT gives it "
                                                f"{describe_types(value.types)}", hint=_hint(slot))
            return
        for name in required:
            if lookup(inp, (name,)).status == ABSENT:
                self.diag(m, "TX266", flow.get("exec_span"),
                          f"the op is sent the whole envelope, which never holds {name}, required by its "
                          f"$defs.input", hint=f"SELECT … AS .{name}, or write it before this scope")

    def select_shadows(self, m: Member, flow: dict, answer: Shape | None) -> None:
        select = flow.get("select")
        if not isinstance(select, list) or answer is None or m.facts.get("exec") is None:
            return
        if self.flow.op_types(m) is None:
            return  # (under a literal `into` the per-file rule reports it, typed or not)
        into = tuple(s for s in (m.facts.get("into") or "").split(".") if s)
        for dest, source, span, default in select:
            if into and (tuple(dest)[: len(into)] == into or into[: len(dest)] == tuple(dest)):
                continue
            found = lookup(answer, tuple(dest))
            if found.status == KNOWN:
                self.diag(m, "TX268", span, f"SELECT writes {_text(dest)} over the op's answer, which provides it: "
                                            "the selected value (or \"\") wins",
                          hint="select into another name, or read the answer's value in EMIT")


_TRY_NAMES = frozenset({"try_json", "try_b64decode", "try_urldecode", "try_get", "try_substr", "try_tz_offsets"})


def repr_json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _lit(kind: str, value: Any) -> str:
    if kind == "string":
        return repr_json(value) if value is not None else "a long string"
    if kind == "null":
        return "null"
    if kind == "bool":
        return "true" if value else "false"
    return repr_json(value)


def _enum_text(shape: Shape) -> str:
    return ", ".join(repr_json(v) for v in enum_values(shape.enum or ()))


def _describe(shape: Shape, certain: bool) -> str:
    base = _enum_text(shape) if shape.enum is not None else describe_types(shape.types)
    where = ", ".join(sorted(shape.origins)) if shape.origins else ""
    return f"{base}{' or missing' if not certain else ''}{'; from ' + where if where else ''}"


def _hint(shape: Shape) -> str | None:
    return shape.description


def _certain(shape: Shape, segments: tuple[str, ...]) -> bool:
    found = lookup(shape, segments)
    return found.status == KNOWN and found.certain


def _required(schema: dict, pointer: str, prefix: tuple[str, ...] = (), depth: int = 0):
    """(path, pointer of its entry in `required`) of every required member, following inline
    `properties` of required objects."""
    if depth > 8:
        return
    required = schema.get("required")
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    if not isinstance(required, list):
        return
    for i, name in enumerate(required):
        if not isinstance(name, str):
            continue
        yield (*prefix, name), f"{pointer}/required/{i}"
        sub = properties.get(name)
        if isinstance(sub, dict):
            yield from _required(sub, f"{pointer}/properties/{escape_pointer(name)}", (*prefix, name), depth + 1)


def _compare(op: str, kind: str, literal: Any, value: Any) -> bool:
    """A WHEN comparison of `value` with a literal, as the runtime decides it (the literal's
    kind picks the form; `_MISSING` reads like null)."""
    from txcl.values.coerce import bool_form, float_form, int_form, text_form

    if value is _MISSING:
        value = None
    if kind == "bool":
        if op not in ("==", "!="):
            return False
        return (bool_form(value) == literal) == (op == "==")
    if kind == "int":
        left, right = int_form(value), literal
    elif kind == "float":
        left, right = float_form(value), literal
    else:  # string or null: text form
        left, right = text_form(value), "" if kind == "null" else literal
    return {"==": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
            ">": left > right, ">=": left >= right}[op]


def _outcomes(op: str, kind: str, literal: Any, types: set[str], enum: frozenset[str] | None) -> set[bool]:
    """The results a comparison can have for a value of `types` (or exactly `enum`)."""
    if kind not in ("int", "float", "string", "null", "bool") or (kind == "string" and literal is None):
        return {True, False}
    out: set[bool] = set()
    if enum is not None:
        return {_compare(op, kind, literal, value) for value in enum_values(enum)}
    for t in types:
        if _free(t, kind, op, literal):
            return {True, False}
        out.update(_compare(op, kind, literal, sample) for sample in _samples(t, kind, literal))
    return out


_MISSING = object()


def _samples(t: str, kind: str, literal: Any) -> list[Any]:
    """Values of type `t` that show every result a comparison with a literal can have, where
    the type's coerced forms are few (null, booleans, containers)."""
    return {"null": [None, _MISSING], "boolean": [True, False], "object": [{}, {"a": 1}], "array": [[], [1]],
            "integer": [0, 7, -3], "number": [0.5, 2.0, -1.5], "string": ["", "x"]}.get(t, [])


def _free(t: str, kind: str, op: str, literal: Any) -> bool:
    """Whether values of type `t` can give either result (so nothing can be said)."""
    if t in ("null", "boolean"):
        return False
    if t in ("object", "array"):
        if kind == "string" and op in ("==", "!=") and isinstance(literal, str):
            return literal.startswith("{" if t == "object" else "[")
        return kind == "string" and op not in ("==", "!=")
    if t == "string":
        return True
    # integer or number
    if kind == "string" and op in ("==", "!=") and isinstance(literal, str):
        pattern = _INT_TEXT if t == "integer" else _FLOAT_TEXT
        return bool(pattern.fullmatch(literal)) and literal != "-0"
    if kind == "null" and op in ("==", "!="):
        return False  # a number's text is never ""
    if kind == "bool" and op not in ("==", "!="):
        return False
    return True


__all__ = ["typed_findings", "CODES"]
