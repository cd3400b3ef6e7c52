"""Following the envelope through every walk of the typed stacks of an OPS tree.

A *node* is one scope of one stack (a child stack's scopes include the ones it inherits). The
walk goes from a scope to the next one in order, to the target of a literal `@goto` or
stage-jump EXEC (the first scope at or above it), and — for a `@goto` whose value is
computed — anywhere. The entry of a stack's first scope holds its `$defs.input`; every other
entry is the join of what its predecessors leave. A deferred op (`mode = "async"` with a
`join_at_scope` above its scope) adds its answer at the first scope at or above the join, not
before; an itemized op adds the array of its item answers at `into`.

One scope, as the runtime runs it: every rule sees the scope-entry envelope; each op's input
is that envelope with its SET PRE (where missing) and SELECT writes; its answer is what its
`$defs.output` declares (nested under `into`), `{}` for no EXEC, or *unknown* — an object that
may hold anything — for an op without a schema; EMIT writes onto the answer; the answers merge
into the envelope; SET POST writes where missing.

The result (`FlowResult`) holds the entry shape of every node (the language server's
completion and hover read it) and the facts the findings need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import attrs

from txcl.check.tree import Member, TreeContext, lineage
from txcl.types.fromschema import to_shape
from txcl.types.schema import SchemaFile, SchemaSet, definition
from txcl.types.shape import (
    ANY,
    KNOWN,
    UNKNOWN,
    Shape,
    absent_object,
    ensure_present,
    join,
    literal,
    lookup,
    of_types,
    write,
)
from txcl.types.signatures import result_types

MAX_ROUNDS = 64
_OPEN_DEPTH = 12


@attrs.frozen
class OpTypes:
    """The declared input and output of one op (from its `<name>.schema.json` or its MCP tool)."""

    file: SchemaFile | None
    input: Shape | None
    output: Shape | None
    input_pointer: str | None = None
    output_pointer: str | None = None


@attrs.frozen
class StackTypes:
    stack: str  # the stack whose schema.json it is (a child may inherit it)
    file: SchemaFile
    input: Shape
    output: Shape | None
    output_schema: Any = None  # the raw $defs.output (for the required-output finding)
    output_pointer: str | None = None


@attrs.frozen
class State:
    shape: Shape
    pending: frozenset = frozenset()  # deferred ops not joined yet: (member file, join scope)


def join_states(a: State | None, b: State) -> State:
    if a is None:
        return b
    return State(join(a.shape, b.shape), a.pending | b.pending)


def opened(shape: Shape, depth: int = 0) -> Shape:
    """`shape` after an answer nobody described merged into it: every object may now hold
    members it does not list (types of known members are kept)."""
    if depth > _OPEN_DEPTH:
        return shape
    changed = False
    props = []
    for name, child in shape.props:
        now = opened(child, depth + 1)
        changed = changed or now is not child
        props.append((name, now))
    open_ = True if "object" in shape.types else shape.open
    if not changed and open_ == shape.open:
        return shape
    return Shape(shape.types, shape.certain, shape.enum, tuple(props) if changed else shape.props, open_,
                 shape.items, shape.description, shape.origins)


class Flow:
    """The analysis of one OPS tree's typed stacks."""

    def __init__(self, tree: TreeContext, schemas: SchemaSet, stack_schema_files: dict[str, Path],
                 op_schema_files: dict[str, Path], mcp_tools: Callable[[str], dict | None] | None = None) -> None:
        self.tree = tree
        self.schemas = schemas
        self.stack_files = stack_schema_files
        self.op_files = op_schema_files  # member file (as shown) -> schema path
        self.mcp_tools = mcp_tools
        self.stacks: dict[str, StackTypes] = {}
        self.ops: dict[str, OpTypes] = {}
        self.entry: dict[tuple[str, int], State] = {}
        self.exit: dict[tuple[str, int], State] = {}
        self.ends: dict[str, list[State]] = {}
        self.converged = True
        self._by_file: dict[str, Member] | None = None
        self._inputs: dict[tuple[str, int], tuple[Shape, Shape]] = {}

    # ------------------------------------------------------------ declared types

    def stack_types(self, stack: str) -> StackTypes | None:
        """The schema a stack walks under: its own schema.json, else its nearest ancestor's."""
        if stack in self.stacks:
            return self.stacks[stack]
        found = None
        for owner in lineage(stack):
            path = self.stack_files.get(owner)
            if path is None:
                continue
            file = self.schemas.load(path)
            if file is None:
                break
            inp = definition(file, "input")
            if inp is None:
                break  # reported (TX260) by the findings
            out = definition(file, "output")
            input_shape = attrs.evolve(to_shape(inp[0], file, self.schemas, f"{file.shown} $defs.input"),
                                       certain=True)
            output_shape = to_shape(out[0], file, self.schemas, f"{file.shown} $defs.output") if out else None
            found = StackTypes(owner, file, _with_txc(input_shape), output_shape,
                               out[0] if out else None, out[1] if out else None)
            break
        self.stacks[stack] = found  # type: ignore[assignment]
        return found

    def op_types(self, member: Member) -> OpTypes | None:
        if member.file in self.ops:
            return self.ops[member.file]
        found = None
        path = self.op_files.get(member.file)
        if path is not None:
            file = self.schemas.load(path)
            if file is not None:
                inp, out = definition(file, "input"), definition(file, "output")
                found = OpTypes(
                    file,
                    to_shape(inp[0], file, self.schemas, f"{file.shown} $defs.input") if inp else None,
                    attrs.evolve(to_shape(out[0], file, self.schemas, f"op {member.stack}/{member.name}"),
                                 certain=True) if out else None,
                    inp[1] if inp else None, out[1] if out else None)
        elif self.mcp_tools is not None and isinstance(member.facts.get("exec"), str) \
                and member.facts["exec"].startswith("mcp+"):
            tool = self.mcp_tools(member.facts["exec"])
            if tool is not None:
                found = tool
        self.ops[member.file] = found  # type: ignore[assignment]
        return found

    # ------------------------------------------------------------ the graph

    def typed_stacks(self) -> list[str]:
        stacks = set(self.tree.by_stack) | set(self.stack_files)
        return sorted(s for s in stacks if self.stack_types(s) is not None)

    def nodes(self, stack: str) -> list[int]:
        return self.tree.effective_scopes(stack)

    def successors(self, stack: str, scope: int, members: list[Member]) -> list[tuple[str, int] | None]:
        """Where the walk may go after (stack, scope); None: the walk may end here."""
        scopes = self.nodes(stack)
        out: list[tuple[str, int] | None] = []
        index = scopes.index(scope)
        out.append((stack, scopes[index + 1]) if index + 1 < len(scopes) else None)
        for m in members:
            for target_stack, target_scope, _, _ in m.facts.get("gotos", ()):
                dest_stack = target_stack or stack
                dest_scopes = self.nodes(dest_stack)
                at = next((s for s in dest_scopes if s >= target_scope), None)
                out.append((dest_stack, at) if at is not None else None)
            if m.facts.get("halts"):
                out.append(None)
            if m.facts.get("flow", {}).get("dyn_goto"):
                for other in self.typed_stacks():
                    out.extend((other, s) for s in self.nodes(other))
                out.append(None)
        return out

    # ------------------------------------------------------------ the fixed point

    def run(self) -> None:
        typed = self.typed_stacks()
        incoming: dict[tuple[str, int], State] = {}
        order = [(stack, scope) for stack in typed for scope in self.nodes(stack)]
        for stack in typed:
            scopes = self.nodes(stack)
            if scopes:
                incoming[(stack, scopes[0])] = State(self.stack_types(stack).input)
        for round_ in range(MAX_ROUNDS):
            changed = False
            ends: dict[str, list[State]] = {}
            for node in order:
                state = incoming.get(node)
                if state is None:
                    continue  # no walk reaches it (yet)
                state = self.joined(node[0], node[1], state)
                if self.entry.get(node) != state:
                    self.entry[node] = state
                    changed = True
                stack, scope = node
                members = self.tree.rules_at(stack, scope)
                out = self.transfer(stack, scope, members, state)
                self.exit[node] = out
                for succ in self.successors(stack, scope, members):
                    if succ is None:
                        ends.setdefault(stack, []).append(out)
                        continue
                    if succ[0] not in self.stacks or self.stacks.get(succ[0]) is None:
                        continue  # into an untyped stack: not followed
                    merged = join_states(incoming.get(succ), out)
                    if round_ >= MAX_ROUNDS // 2:
                        merged = State(opened(merged.shape), merged.pending)  # widen
                    incoming[succ] = merged
            self.ends = ends
            if not changed:
                return
        self.converged = False

    # ------------------------------------------------------------ one scope

    def joined(self, stack: str, scope: int, state: State) -> State:
        """`state` with the answers of the deferred ops that join at this scope merged in."""
        if not state.pending:
            return state
        shape = state.shape
        pending = set()
        for file, join_scope in state.pending:
            member = self._member(file)
            if join_scope <= scope and member is not None and member.stack in lineage(stack):
                shape = self.merge_answer(shape, member, certain=False)
            else:
                pending.add((file, join_scope))
        return State(shape, frozenset(pending))

    def transfer(self, stack: str, scope: int, members: list[Member], state: State) -> State:
        shape = state.shape
        pending = set(state.pending)
        filtered = any(m.facts.get("flow", {}).get("priority", 0) > 0 for m in members)
        merged = shape
        opaque = False
        for m in members:
            flow = m.facts.get("flow") or {}
            certain = not flow.get("conditional") and not filtered
            join_scope = m.facts.get("join")
            if m.facts.get("mode") == "async" and isinstance(join_scope, int) and join_scope > scope:
                pending.add((m.file, join_scope))  # its answer (and EMIT) arrive at the join
                continue
            merged, unknown = self._merge_answer(merged, m, certain, shape)
            opaque = opaque or unknown
        if opaque:  # an answer nobody described merged: any member may now be there
            merged = opened(merged)
        if not filtered:
            merged = _complementary_writes(merged, members)
        for m in members:
            flow = m.facts.get("flow") or {}
            if not any(w[0] == "post" for w in flow.get("writes", ())):
                continue
            certain = not flow.get("conditional") and not filtered
            merged = self._apply_writes(merged, m, merged, ("post",), certain, answer=None)
        return State(merged, frozenset(pending))

    def _member(self, file: str) -> Member | None:
        if self._by_file is None:
            self._by_file = {m.file: m for m in self.tree.members}
        return self._by_file.get(file)

    # ------------------------------------------------------------ an op

    def answer(self, m: Member) -> Shape | None:
        """The shape of what `m`'s op answers before EMIT (None: unknown — no schema)."""
        target = m.facts.get("exec")
        if target is None or target == "txco://noop" or _is_jump(m):
            return absent_object()
        types = self.op_types(m)
        if types is not None and types.output is not None:
            out = types.output
            if m.facts.get("flow", {}).get("each"):
                out = Shape(frozenset({"array"}), True, None, (), False, out)
            into = m.facts.get("into")
            if into:
                segments = tuple(s for s in into.split(".") if s)
                return write(absent_object(), segments, out, True) if segments else out
            return out
        return None

    def input_shape(self, m: Member, entry: Shape) -> Shape:
        """The op's input: the entry envelope with SET PRE (where missing) and SELECT writes."""
        key = (m.file, id(entry))
        hit = self._inputs.get(key)
        if hit is not None and hit[0] is entry:
            return hit[1]
        shape = entry
        flow = m.facts.get("flow") or {}
        for kind, segments, _span, value in flow.get("writes", ()):
            if kind == "pre":
                found = lookup(shape, segments)
                if not (found.status == KNOWN and found.certain):
                    shape = write(shape, segments, self.value_shape(value, shape, None, shape), False)
            elif kind == "select":
                shape = write(shape, segments, self.value_shape(value, shape, None, shape), True)
        if len(self._inputs) > 4096:
            self._inputs.clear()
        self._inputs[key] = (entry, shape)  # the entry kept alive: its id is not reused meanwhile
        return shape

    def output_shape(self, m: Member, entry: Shape) -> Shape | None:
        """The op's answer after its synthetic SELECT entries and EMIT (None: unknown)."""
        answer = self.answer(m)
        if answer is None:
            return None
        inp = self.input_shape(m, entry)
        out = answer
        flow = m.facts.get("flow") or {}
        for kind, segments, _span, value in flow.get("writes", ()):
            if kind in ("select", "emit"):
                out = write(out, segments, self.value_shape(value, inp, answer, inp), True)
        return out

    def merge_answer(self, envelope: Shape, m: Member, certain: bool, entry: Shape | None = None) -> Shape:
        merged, unknown = self._merge_answer(envelope, m, certain, envelope if entry is None else entry)
        return opened(merged) if unknown else merged

    def _merge_answer(self, envelope: Shape, m: Member, certain: bool, entry: Shape) -> tuple[Shape, bool]:
        """The envelope with `m`'s answer merged, and whether that answer is unknown (the
        caller then opens the envelope: anything may have come with it)."""
        out = self.output_shape(m, entry)
        if out is None:
            return self._apply_writes(envelope, m, entry, ("select", "emit"), certain, answer=None), True
        return write(envelope, (), out, certain), False

    def _apply_writes(self, envelope: Shape, m: Member, read_from: Shape, kinds: tuple[str, ...],
                      certain: bool, answer: Shape | None) -> Shape:
        flow = m.facts.get("flow") or {}
        inp = self.input_shape(m, read_from) if "post" not in kinds else read_from
        for kind, segments, _span, value in flow.get("writes", ()):
            if kind not in kinds or (segments and segments[0] == "_txc"):
                continue
            if kind == "post":
                found = lookup(envelope, segments)
                if found.status == KNOWN and found.certain:
                    continue
                envelope = write(envelope, segments, self.value_shape(value, envelope, None, envelope), False)
                if certain:
                    envelope = ensure_present(envelope, segments)
            else:
                envelope = write(envelope, segments, self.value_shape(value, inp, answer, inp), certain)
        return envelope

    # ------------------------------------------------------------ values

    def value_shape(self, value: list, doc: Shape, answer: Shape | None, inp: Shape, depth: int = 0) -> Shape:
        """The shape of a written value (its descriptor from txcl.types.rulefacts); `answer`
        is read first for EMIT's paths (None: not known, or not EMIT)."""
        kind = value[0] if value else "any"
        if depth > 16:
            return ANY
        if kind == "lit":
            return literal(value[1])
        if kind == "type":
            return of_types([value[1]])
        if kind == "path":
            segments, where = tuple(value[1]), value[2]
            if segments and segments[0] == "_txc":
                return attrs.evolve(ANY, certain=True)
            if where == "emit":
                if answer is None:
                    return attrs.evolve(ANY, certain=True)
                first = lookup(answer, segments)
                if first.status == UNKNOWN:
                    return attrs.evolve(ANY, certain=True)
                if first.status == KNOWN and first.certain:
                    return attrs.evolve(first.shape, certain=True)
                options = [attrs.evolve(first.shape, certain=True)] if first.status == KNOWN else []
                options.append(_read_value(inp, segments))
                out = options[0]
                for option in options[1:]:
                    out = join(out, option)
                return out
            return _read_value(doc, segments)
        if kind == "call":
            types = result_types(value[1])
            return of_types(types) if types is not None else attrs.evolve(ANY, certain=True)
        if kind == "arr":
            items = None
            for item in value[1]:
                s = self.value_shape(item, doc, answer, inp, depth + 1)
                items = s if items is None else join(items, s)
            return Shape(frozenset({"array"}), True, None, (), False, items or Shape(frozenset(), True))
        if kind == "select":
            source = self.value_shape(["path", value[1], "input"], inp, None, inp, depth + 1)
            default = self.value_shape(value[2], inp, None, inp, depth + 1) if value[2] else literal("")
            return join(source, default)
        return attrs.evolve(ANY, certain=True)


_OPPOSITE = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def _complementary_writes(shape: Shape, members: list[Member]) -> Shape:
    """Two rules of one scope whose WHENs are one comparison each, opposite on the same path
    and literal (`== true` / `!= true`): one of them runs on every walk, so what both write
    without an op (EMIT of a rule without EXEC) is certainly there."""
    singles = []
    for m in members:
        flow = m.facts.get("flow") or {}
        if flow.get("when_single") and m.facts.get("exec") is None:
            singles.append((tuple(flow["when_single"]), m))
    for i, (a, ma) in enumerate(singles):
        for b, mb in singles[i + 1:]:
            if a[0] == b[0] and a[2:] == b[2:] and _OPPOSITE.get(a[1]) == b[1] and not (
                    a[2] == "float" and a[1] not in ("==", "!=")):  # NaN is neither < nor >=
                both = _emitted(ma) & _emitted(mb)
                for segments in both:
                    shape = ensure_present(shape, segments)
    return shape


def _emitted(m: Member) -> set[tuple[str, ...]]:
    flow = m.facts.get("flow") or {}
    return {tuple(w[1]) for w in flow.get("writes", ()) if w[0] in ("emit", "select") and w[1] and w[1][0] != "_txc"}


def tool_types(url: str, tool: str, schemas: dict) -> OpTypes | None:
    """The declared input and output of an MCP tool (its inputSchema and outputSchema)."""
    import json

    from txcl.types.jsonpos import parse
    from txcl.types.schema import SchemaFile

    shapes = []
    for key in ("input", "output"):
        schema = schemas.get(key)
        if not isinstance(schema, dict) or not schema:
            shapes.append(None)
            continue
        text = json.dumps(schema)
        doc, positions = parse(text)
        file = SchemaFile(Path(f"/mcp-tool/{tool}.json"), f"{url}#{tool}", text, doc, positions)
        holder = SchemaSet(Path("/mcp-tool"), lambda p: str(p))
        shape = to_shape(doc, file, holder, f"MCP tool {tool} {key}Schema")
        shapes.append(attrs.evolve(shape, certain=True) if key == "output" else shape)
    if shapes == [None, None]:
        return None
    return OpTypes(None, shapes[0], shapes[1])


def _read_value(doc: Shape, segments: tuple[str, ...]) -> Shape:
    """The value a path read gives: a copy of what is there, null when it may be missing."""
    found = lookup(doc, segments)
    if found.status == UNKNOWN:
        return attrs.evolve(ANY, certain=True)
    if found.status != KNOWN:
        return literal(None)
    got = found.shape.present()
    return got if found.certain else join(got, literal(None))


def _is_jump(m: Member) -> bool:
    """A stage-jump EXEC (`goto://…` or `<stack>/<scope>`): its answer is only the jump."""
    target = m.facts.get("exec")
    return isinstance(target, str) and (target.startswith("goto://") or ("://" not in target and "/" in target))


def _with_txc(shape: Shape) -> Shape:
    """The input shape with the runtime's `_txc` facts (never checked: any path below)."""
    txc = attrs.evolve(ANY, certain=True, types=frozenset({"object"}), origins=frozenset({"the runtime's facts"}))
    props = shape.prop_map
    props.setdefault("_txc", txc)
    # the arrival time every inlet stamps on the envelope
    props.setdefault("_ts", Shape(frozenset({"string"}), True, None, (), False, None,
                                  "when the request arrived (RFC 3339)", frozenset({"the runtime"})))
    return attrs.evolve(shape, props=tuple(sorted(props.items())),
                        types=shape.types & frozenset({"object"}) or frozenset({"object"}))


__all__ = ["Flow", "State", "OpTypes", "StackTypes", "opened"]
