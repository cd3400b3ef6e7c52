"""The REPL's state and behaviour, independent of any terminal.

A `ReplSession` holds the working envelope (and optionally a loaded OPS tree) and turns
one submitted entry into a `Reply`: the text to print and whether to leave. The
prompt-toolkit front end and batch mode (`txcl.repl.app`) only move text in and out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import attrs

from txcl.errors import Diagnostic, TxclError, TxclEvalError, TxclSyntaxError
from txcl.repl import render
from txcl.repl.entry import META_COMMANDS, Entry, parse_entry, looks_like_condition
from txcl.values.merge import deep_copy

HELP_INTRO = """\
Type a rule (it is submitted when it parses; an empty line submits anyway), an expression
such as &now("rfc3339") or .user.id, or a condition such as .total > 10 && @src == "http".
A rule shows whether WHEN matches, what the op would receive, and the envelope after
EMIT/merge as a diff; a matching rule changes the working envelope. EXEC is not run: the op
output is {} (or what .output set).  Prefix = to evaluate a path named like a command (= .env).
Keys: Tab completes, Ctrl-R searches history, → accepts a suggestion, Esc Enter adds a line.
"""


@attrs.define
class Reply:
    text: str = ""
    ok: bool = True
    quit: bool = False


class ReplSession:
    """One REPL session: the working envelope, the initial one, an optional OPS tree."""

    def __init__(self, envelope: dict | None = None, ops_dir: str | Path | None = None,
                 colour: bool = False, ops_loader: Callable[[str | Path], Any] | None = None):
        self.initial: dict = deep_copy(envelope) if envelope is not None else {}
        self.envelope: dict = deep_copy(self.initial)
        self.colour = colour
        self.op_output: Any = {}
        self.ops_dir = ops_dir
        self.ops: Any = None
        self.ops_error: str | None = None
        self._schema_paths: dict | None = None
        if ops_dir is not None:
            self._load_ops(ops_dir, ops_loader)

    # ------------------------------------------------------------------ helpers

    def _load_ops(self, ops_dir: str | Path, loader: Callable | None) -> None:
        try:
            if loader is None:
                from txcl import load_ops as loader
            self.ops = loader(ops_dir)
        except TxclError as exc:
            self.ops_error = str(exc)

    def completion_envelope(self) -> dict:
        """What path completion offers: the working envelope, and every path the loaded tree's
        stack schemas declare in `$defs.input` (typed envelopes)."""
        if self._schema_paths is None:
            self._schema_paths = _schema_paths(self.ops)
        if not self._schema_paths:
            return self.envelope
        from txcl.values.merge import merge

        return merge(self._schema_paths, self.envelope) if isinstance(self.envelope, dict) else self.envelope

    def stacks(self) -> list[str]:
        """Stack names of the loaded OPS tree (for `.run` completion)."""
        if self.ops is None:
            return []
        for attr in ("user_stacks", "stacks"):
            fn = getattr(self.ops, attr, None)
            if callable(fn):
                try:
                    return list(fn())
                except Exception:  # pragma: no cover - defensive: completion must not fail
                    return []
        return []

    def _paint(self, text: str, colour: str) -> str:
        return render.paint(text, colour, self.colour)

    def _diagnostics(self, diagnostics: list[Diagnostic], source: str) -> str:
        return "\n".join(d.render(source=source, color=self.colour) for d in diagnostics)

    def _error(self, message: str) -> Reply:
        return Reply(self._paint("error: ", "red") + message, ok=False)

    # ------------------------------------------------------------------ entry point

    def submit(self, text: str) -> Reply:
        """Handle one complete entry. Never raises for a user mistake."""
        entry = parse_entry(text)
        try:
            if entry.kind == "empty":
                return Reply()
            if entry.kind == "meta":
                return self._meta(entry)
            if entry.kind == "rule":
                return self.apply_rule_text(entry.text)
            return self.evaluate(entry.text)
        except TxclSyntaxError as exc:
            return Reply(self._diagnostics(exc.diagnostics, exc.diagnostics[0].source or text),
                         ok=False)
        except TxclError as exc:
            return self._error(str(exc))
        except RecursionError:
            return self._error("value is nested too deeply")

    # ------------------------------------------------------------------ expressions

    def evaluate(self, text: str) -> Reply:
        """Evaluate a value expression, or a condition (shown as true/false)."""
        from txcl.evaluate.expression import eval_expression

        try:
            value = eval_expression(text, self.envelope)
        except TxclSyntaxError as exc:
            if looks_like_condition(text):
                return self.evaluate_condition(text)
            raise TxclSyntaxError([d if d.source else attrs.evolve(d, source=text)
                                   for d in exc.diagnostics]) from None
        except TxclEvalError as exc:
            return self._error(exc.message)
        return Reply(render.json_text(value))

    def evaluate_condition(self, text: str) -> Reply:
        from txcl.evaluate.when import when_matches
        from txcl.syntax.parser import parse_rule

        prefix = "WHEN "
        try:
            rule = parse_rule(prefix + text, filename="<condition>")
        except TxclSyntaxError as exc:
            raise TxclSyntaxError([_shift(d, text, len(prefix)) for d in exc.diagnostics]) from None
        if len(rule.clauses) != 1:
            raise TxclSyntaxError([_shift(d, text, len(prefix)) for d in _single_clause_error(rule)])
        result = when_matches(rule, self.envelope)
        return Reply(self._paint("true", "green") if result else self._paint("false", "red"))

    # ------------------------------------------------------------------ rules

    def apply_rule_text(self, text: str, filename: str = "<repl>") -> Reply:
        from txcl.evaluate.rule import apply_rule
        from txcl.syntax.parser import parse_rule

        rule = parse_rule(text, filename=filename)
        before = self.envelope
        result = apply_rule(rule, before, output=deep_copy(self.op_output))
        out: list[str] = []
        if result.matched:
            out.append(self._paint("WHEN matches", "green"))
        else:
            out.append(self._paint("WHEN does not match", "red") + " (the envelope is not changed)")
        if rule.exec is not None:
            out.append(render.heading("op input", self.colour)
                       + f" (EXEC \"{rule.exec.target}\" is not run; its output is taken as "
                       + render.json_text(self.op_output, None) + "):")
        else:
            out.append(render.heading("op input", self.colour) + ":")
        out.append(render.json_text(result.dispatched))
        if result.directives:
            out.append(render.heading("WITH", self.colour) + ": "
                       + render.json_text(result.directives, None))
        if result.error:
            out.append(self._paint("op error: ", "red") + result.error)
        if result.dropped:
            out.append(self._paint("dropped reserved targets: ", "yellow")
                       + ", ".join(result.dropped))
        out.append(render.heading("envelope after EMIT + merge", self.colour) + ":")
        out.append(render.render_diff(before, result.envelope, self.colour))
        if result.matched:
            self.envelope = result.envelope
        return Reply("\n".join(out))

    # ------------------------------------------------------------------ meta-commands

    def _meta(self, entry: Entry) -> Reply:
        handler = getattr(self, "_cmd_" + entry.command[1:])
        return handler(entry.argument)

    def _cmd_help(self, _arg: str) -> Reply:
        lines = [HELP_INTRO, "Commands:"]
        lines += [f"  {text}" for text in META_COMMANDS.values() if text]
        return Reply("\n".join(lines))

    def _cmd_quit(self, _arg: str) -> Reply:
        return Reply(quit=True)

    _cmd_exit = _cmd_quit

    def _cmd_env(self, arg: str) -> Reply:
        if not arg:
            return Reply(render.json_text(self.envelope))
        return self.evaluate(arg)

    def _parse_path(self, text: str) -> tuple[str, ...]:
        from txcl.evaluate.expression import parse_expression
        from txcl.syntax import ast

        node = parse_expression(text)
        if not isinstance(node, ast.Path):
            raise TxclEvalError(f"{text.strip()} is not a path (write .name or @name)")
        return tuple(node.segments)

    def _split_path_arg(self, arg: str, usage: str) -> tuple[str, str]:
        path, _, rest = arg.partition(" ")
        if not path:
            raise TxclEvalError(f"usage: {usage}")
        return path, rest.strip()

    def _cmd_set(self, arg: str) -> Reply:
        from txcl.evaluate.expression import eval_expression
        from txcl.values.jsonio import JsonError, loads
        from txcl.values.paths import PathError, write

        path_text, value_text = self._split_path_arg(arg, ".set PATH VALUE")
        if not value_text:
            raise TxclEvalError("usage: .set PATH VALUE")
        segments = self._parse_path(path_text)
        try:
            value = eval_expression(value_text, self.envelope)
        except TxclSyntaxError as syntax_error:
            try:
                value = loads(value_text)  # JSON objects and null are welcome here too
            except JsonError:
                raise syntax_error from None
        try:
            root = write(deep_copy(self.envelope), segments, value)
        except PathError as exc:
            raise TxclEvalError(f"{path_text}: {exc}") from None
        if not isinstance(root, dict):
            raise TxclEvalError("the envelope must stay an object")
        before, self.envelope = self.envelope, root
        return Reply(render.render_diff(before, root, self.colour))

    def _cmd_unset(self, arg: str) -> Reply:
        from txcl.values.paths import delete

        path_text, _ = self._split_path_arg(arg, ".unset PATH")
        segments = self._parse_path(path_text)
        after = deep_copy(self.envelope)
        delete(after, segments)
        before, self.envelope = self.envelope, after
        return Reply(render.render_diff(before, after, self.colour))

    def _cmd_output(self, arg: str) -> Reply:
        from txcl.values.jsonio import JsonError, loads

        if arg:
            try:
                self.op_output = loads(arg)
            except JsonError as exc:
                raise TxclEvalError(f"invalid JSON: {exc}") from None
        return Reply("op output for typed rules: " + render.json_text(self.op_output, None))

    def _cmd_reset(self, _arg: str) -> Reply:
        self.envelope = deep_copy(self.initial)
        return Reply("envelope reset:\n" + render.json_text(self.envelope))

    def _cmd_save(self, arg: str) -> Reply:
        if not arg:
            raise TxclEvalError("usage: .save FILE")
        path = Path(arg).expanduser()
        try:
            path.write_text(render.json_text(self.envelope) + "\n", encoding="utf-8")
        except OSError as exc:
            raise TxclEvalError(f"cannot write {path}: {exc.strerror or exc}") from None
        return Reply(f"saved the envelope to {path}")

    def _cmd_load(self, arg: str) -> Reply:
        from txcl.values.jsonio import JsonError, loads

        if not arg:
            raise TxclEvalError("usage: .load FILE (a JSON envelope or a .txcl rule)")
        path = Path(arg).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TxclEvalError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
        if path.suffix == ".txcl":
            return self.apply_rule_text(text, filename=str(path))
        try:
            value = loads(text)
        except JsonError as exc:
            raise TxclEvalError(f"{path}: invalid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise TxclEvalError(f"{path}: the envelope must be a JSON object")
        before, self.envelope = self.envelope, value
        return Reply(f"loaded {path}\n" + render.render_diff(before, value, self.colour))

    def _cmd_run(self, arg: str) -> Reply:
        if self.ops is None:
            if self.ops_error:
                raise TxclEvalError(self.ops_error)
            raise TxclEvalError("no OPS tree loaded: start the REPL as `txcl repl OPS_DIR`")
        stack = arg.strip()
        if not stack:
            raise TxclEvalError("usage: .run STACK (stacks: " + ", ".join(self.stacks()) + ")")
        waiting = _async_ops(self.ops, stack)
        if waiting:
            raise TxclEvalError(
                f"stack {stack} has ops that wait for a worker ({', '.join(waiting[:3])}"
                f"{', …' if len(waiting) > 3 else ''}); the REPL runs a stack without a store or a callback "
                "endpoint, so it cannot run them. Use `txcl test` (mocks and simulated workers) or "
                "`txcl run --wait`")
        from txcl import Interpreter

        interpreter = Interpreter(self.ops)
        outcome = interpreter.run_sync(deep_copy(self.envelope), stack=stack)
        kind = type(outcome).__name__
        envelope = getattr(outcome, "envelope", None)
        if kind == "Completed" and isinstance(envelope, dict):
            before, self.envelope = self.envelope, envelope
            return Reply(self._paint(f"completed {stack}", "green") + "\n"
                         + render.render_diff(before, envelope, self.colour))
        if kind == "Failed":
            payload = getattr(outcome, "payload", None)
            status = getattr(outcome, "http_status", None)
            return Reply(self._paint(f"failed (HTTP {status})", "red") + "\n"
                         + render.json_text(payload), ok=False)
        return Reply(self._paint(f"{kind}", "yellow") + f": {outcome!r}")


def _async_ops(tree: Any, stack: str) -> list[str]:
    """`<stack>/<scope>/<name> (why)` of every op of the stack that suspends for a worker."""
    from txcl.syntax import ast

    found = []
    try:
        scopes = tree.effective_scopes(stack)
    except Exception:  # noqa: BLE001 - an unknown stack: the interpreter says so
        return []
    for scope in scopes:
        for op in tree.rules_at(stack, scope):
            for pair in op.rule.with_:
                key = pair.key_text
                literal = pair.value.value if isinstance(pair.value, ast.StringLit) else None
                if (key == "mode" and literal != "sync") or key in ("each", "join_at_scope"):
                    found.append(f"{op.key}: {key} = {literal!r}" if literal else f"{op.key}: {key}")
                    break
    return found


def _schema_paths(tree: Any) -> dict:
    """A skeleton envelope of the paths the tree's stack schemas declare (empty: none)."""
    workspace = getattr(tree, "workspace", None)
    if workspace is None:
        return {}
    try:
        from txcl.types.workspace import analyze, path_entries
        from txcl.values.paths import PathError, write

        analyzed = analyze(Path(workspace) / "OPS")
        flow = analyzed.flow
        skeleton: dict = {}
        for stack in flow.typed_stacks() if flow is not None else ():
            for segments, _shape in path_entries(flow.stack_types(stack).input):
                try:
                    skeleton = write(skeleton, segments, {})
                except PathError:
                    continue
        return skeleton
    except Exception:  # noqa: BLE001 - completion must never fail the REPL
        return {}


def _shift(diag: Diagnostic, text: str, by: int) -> Diagnostic:
    from txcl.errors import Position, Span

    def move(pos: Position) -> Position:
        offset = min(max(pos.offset - by, 0), len(text))
        before = text[:offset]
        line = before.count("\n") + 1
        return Position(line, offset - (before.rfind("\n") + 1) + 1, offset)

    return attrs.evolve(diag, span=Span(move(diag.span.start), move(diag.span.end)), source=text,
                        file="<condition>")


def _single_clause_error(rule: Any) -> list[Diagnostic]:
    from txcl.errors import Span

    mark = rule.clauses[1]
    return [Diagnostic("TX010", "expected a single condition", "<condition>",
                       Span(mark.span.start, mark.span.start))]
