"""The rule-code table: one source of truth for every diagnostic code.

The parser, the loader, `txcl check`, `txcl rule`, SARIF output and the docs all read
this table.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class CodeInfo:
    code: str
    name: str
    severity: str  # "error" | "warning" | "info"
    summary: str


_TABLE: tuple[tuple[str, str, str, str], ...] = (
    ('TX001', 'invalid-character', 'error', 'character not allowed where it appears'),
    ('TX002', 'invalid-encoding', 'error', 'file is not UTF-8 or contains NUL'),
    ('TX003', 'unterminated-string', 'error', 'string literal not closed'),
    ('TX004', 'unterminated-regex', 'error', 'regex literal not closed on its line'),
    ('TX005', 'invalid-regex', 'error', 'RE2 rejects the pattern'),
    ('TX006', 'malformed-number', 'error', 'text that starts like a number but is not one'),
    ('TX007', 'number-out-of-range', 'error', 'integer beyond 64 bits or float overflow'),
    ('TX008', 'invalid-path', 'error', 'path without a name start, or with an empty segment'),
    ('TX009', 'invalid-quoted-segment', 'error', 'misplaced, empty or unterminated quoted segment'),
    ('TX010', 'unexpected-token', 'error', 'token where a clause keyword or LOOP modifier is expected'),
    ('TX011', 'repeated-clause', 'error', 'second WHEN, SELECT, PRIORITY, EXEC or LOOP'),
    ('TX012', 'reserved-word', 'error', 'FN, LET, IF, ELSE or RETURN used'),
    ('TX013', 'expected-target', 'error', 'assignment does not start with a path'),
    ('TX014', 'expected-equals', 'error', '`=` missing in an assignment or WITH pair'),
    ('TX015', 'expected-value', 'error', 'value missing or not a value (`null`, `{`, keyword …)'),
    ('TX016', 'invalid-array', 'error', 'bad separator or non-literal array element'),
    ('TX017', 'invalid-call', 'error', 'malformed `&name(...)`'),
    ('TX018', 'expected-with-key', 'error', 'WITH item without a valid key'),
    ('TX019', 'expected-exec-target', 'error', 'EXEC without a string'),
    ('TX020', 'invalid-priority', 'error', 'PRIORITY without an integer in range'),
    ('TX021', 'invalid-select', 'error', 'empty SELECT, `*` with items, AS without destination'),
    ('TX022', 'expected-condition', 'error', 'condition does not start with a path, `(` or `!`'),
    ('TX023', 'expected-comparison', 'error', 'comparison operator missing'),
    ('TX024', 'dangling-operator', 'error', 'nothing after `&&`, `||`, `,` or `!`'),
    ('TX025', 'invalid-group', 'error', 'empty or unclosed parentheses'),
    ('TX026', 'invalid-comparison-value', 'error', 'right side of a comparison is not a constant'),
    ('TX027', 'invalid-match-operand', 'error', '`=~`/`!~` operand is not a regex, string or null'),
    ('TX028', 'non-literal-call-argument', 'error', 'call in WHEN/UNTIL reads a path'),
    ('TX029', 'loop-missing-until', 'error', 'LOOP without UNTIL'),
    ('TX030', 'invalid-loop-max', 'error', 'MAX not a positive integer'),
    ('TX031', 'invalid-loop-every', 'error', 'EVERY not a duration or milliseconds, or negative'),
    ('TX032', 'repeated-loop-modifier', 'error', 'LOOP modifier given twice'),
    ('TX033', 'nested-too-deeply', 'error', 'parentheses, brackets, calls or `!` nest deeper than the limit'),
    ('TX034', 'file-too-large', 'error', 'rule text longer than 1 MiB'),
    ('TX101', 'unknown-function', 'error', 'call to a function that does not exist'),
    ('TX102', 'wrong-arity', 'error', 'call with an argument count the function never accepts'),
    ('TX103', 'unsupported-exec-scheme', 'error', 'EXEC scheme this runtime does not have'),
    ('TX104', 'invalid-exec-target', 'error', 'malformed EXEC target'),
    ('TX105', 'invalid-goto-target', 'error', '`goto://` without a valid scope or stack/scope'),
    ('TX106', 'loop-without-exec', 'error', 'LOOP with nothing to repeat'),
    ('TX107', 'loop-on-noop', 'error', 'LOOP repeating `txco://noop`'),
    ('TX108', 'loop-on-stage-jump', 'error', 'LOOP repeating a stage jump'),
    ('TX109', 'loop-with-mode', 'error', 'LOOP combined with `mode = "async"` or `"continuable"`'),
    ('TX110', 'join-needs-async', 'error', '`join_at_scope` without `mode = "async"` (continuable or sync)'),
    ('TX111', 'async-unsupported-target', 'error', '`mode = "async"` or `join_at_scope` on a target that cannot run asynchronously'),
    ('TX112', 'itemize-needs-async', 'error', '`each` without `mode = "async"` and `into`'),
    ('TX113', 'mcp-target-without-tool', 'error', '`mcp+http(s)://` target without a valid `#tool` name'),
    ('TX120', 'no-scope-directory', 'error', 'rule file not under a numbered scope directory'),
    ('TX121', 'missing-stack-name', 'error', 'numbered directory directly under `OPS/`'),
    ('TX122', 'duplicate-operation', 'error', 'two files flatten to one stack/scope/name'),
    ('TX123', 'invalid-stage-name', 'error', 'stack, name or scope outside the allowed form'),
    ('TX201', 'leading-zero-number', 'warning', '`012` is twelve here but ten (octal) in the reference; write `12` (safe fix)'),
    ('TX202', 'bare-when', 'warning', '`WHEN` with no condition matches everything; write `WHEN *` or a condition'),
    ('TX203', 'duplicate-with-key', 'warning', 'a WITH key (or a key and one of its own prefixes) given twice; the later write wins'),
    ('TX204', 'duplicate-assignment-target', 'warning', 'the same target twice in SET (the first wins) or EMIT (the last wins)'),
    ('TX205', 'reserved-txc-write', 'warning', 'EMIT, SET POST, LOOP SET or a literal `@delete` target writes a reserved `_txc` path; dropped at run time'),
    ('TX206', 'set-pre-control-field', 'warning', "SET before SELECT writes `@halt`, `@goto`, `@delete` or `@web.res…`; it only decorates the op's input, use EMIT"),
    ('TX207', 'call-always-fails', 'warning', 'a call whose arguments are all literals fails when evaluated (`&div(5, 0)`, `&tz("Mars/Base", "hour", 9)`); in WHEN the comparison is always false'),
    ('TX208', 'try-wrong-arity', 'warning', 'a `try_` call with an argument count its base never accepts; always `null`'),
    ('TX209', 'invalid-with-value', 'warning', 'a literal value of a consumed WITH key has the wrong type or range (bad duration, unknown mode, non-integer `join_at_scope`, `window` outside 1–1024, non-literal `redact`/`omit`, `window` without `each`, an `into`/`status_into` that is empty or starts with `.` or `@`, a `tolerated_failures` that is not a count or percentage or comes without `on_item_error = "tolerate"`, an `on_join_deadline` other than "fail" or "continue", a `cancel_url` that is not an http(s) URL or comes without `mode = "async"`, `retries` outside 0–100 or without `mode = "async"`, `retry_backoff` without `retries`); the runtime ignores it or uses it literally'),
    ('TX210', 'loop-until-true-when-missing', 'warning', 'an UNTIL comparison with a boolean that is already true when its path is missing (`== false`, `!= true`, or `== true`/`!= false` under an odd number of `!`), so the loop may stop after one pass'),
    ('TX211', 'loop-max-above-ceiling', 'warning', 'LOOP MAX above the default ceiling 1000; the runtime refuses the loop unless `--op-loop-max` is raised'),
    ('TX212', 'loop-on-mock', 'warning', 'LOOP repeating `txco://mock`, which answers the same fixture every pass'),
    ('TX213', 'loop-cut-by-sibling-halt', 'warning', 'a rule at the same stage halts unconditionally (no WHEN, literal truthy `@halt`), which stops the loop after its first pass'),
    ('TX214', 'with-key-near-miss', 'warning', "a WITH key the runtime does not read but that is one or two edits from one it does (`join_at_scop`): the setting silently does not apply"),
    ('TX215', 'literal-evaluation-stopped', 'info', 'txcl check stopped evaluating the literal calls of a file (for TX207): the ones before built more than its per-file budget'),
    ('TX220', 'join-at-or-below-own-scope', 'warning', "`join_at_scope` at or below the op's own scope: it behaves as a plain async op and suspends at its own scope"),
    ('TX221', 'join-scope-not-reached', 'warning', 'no scope at or above `join_at_scope` exists in the stack (or the stacks it inherits); the result is never merged unless the flow jumps'),
    ('TX222', 'deferred-output-read-early', 'warning', "a rule at a scope the flow may run between a deferred op's dispatch and its join (the scopes after it in order, and those a literal jump in the same stack reaches) reads a path at or under what the op writes when it joins — its literal `into`, or a target of its EMIT or SET POST; it sees nothing yet (the reference does not check this)"),
    ('TX223', 'join-scope-has-async-op', 'info', 'the join scope also holds its own `mode = "async"` op; supported here (suspends are keyed by visit), but the reference stalls on it'),
    ('TX224', 'join-option-without-effect', 'warning', '`join_deadline`, `on_join_deadline` or `join_wait` on an op that does not defer its join (no `mode = "async"` with a `join_at_scope` above its scope), `on_join_deadline` without `join_deadline`, or a `join_wait` not shorter than the `join_deadline`'),
    ('TX230', 'unconditional-self-loop', 'warning', 'a rule with no condition and no literal truthy `@halt` jumps to its own stage by a literal `@goto` (EMIT or SET POST) or a stage-jump EXEC'),
    ('TX231', 'unconditional-two-stage-cycle', 'warning', 'two stages each hold an unconditional rule that jumps to the other; reported once per pair'),
    ('TX232', 'cross-stack-goto', 'warning', 'a literal `@goto` or stage-jump EXEC into another stack (guarded rules too): `_txc.stack` is not changed, and outstanding deferred joins resolve at the first scope of the new stack'),
    ('TX233', 'goto-unknown-stack', 'error', 'a literal `@goto` or stage-jump EXEC into a stack the OPS tree does not have: the request fails there'),
    ('TX240', 'stray-file', 'warning', 'a file in the OPS tree that is neither a rule nor an allowed companion'),
    ('TX250', 'mcp-unknown-tool', 'error', 'the MCP server of an `mcp+` target does not list its tool (`txcl check --mcp-schemas`)'),
    ('TX251', 'mcp-missing-argument', 'error', "the SELECT of an `mcp+` op gives none of an argument the tool's input schema requires (`--mcp-schemas`)"),
    ('TX252', 'mcp-schema-unavailable', 'warning', 'the MCP server of an `mcp+` target could not be asked for its tools (`--mcp-schemas`)'),
    ('TX260', 'schema-invalid', 'error', 'a schema file (`OPS/<stack>/schema.json` or `<name>.schema.json`) that cannot be read, is not JSON or not a valid JSON Schema, has a `$ref` that leads nowhere, or lacks `$defs.input`'),
    ('TX261', 'unknown-path', 'error', 'in a typed stack, a read of a path that nothing provides on any walk: no schema declares it and no rule writes it'),
    ('TX262', 'read-before-provided', 'warning', 'in a typed stack, a read of a path that is provided only after that point on every walk that reaches it (written at a later scope, or by a deferred op not joined yet)'),
    ('TX263', 'impossible-comparison', 'warning', "in a typed stack, a comparison that can never be true (or never false) for the path's declared types and values under TXCL's coercions, a regex against an object or array, or ordering on one"),
    ('TX264', 'write-type-mismatch', 'error', "in a typed stack, a write whose value can never match the type (or `enum`) declared for that path by the stack's `$defs.output` (or `$defs.input`)"),
    ('TX265', 'required-output-unwritten', 'warning', "a `required` member of a stack's `$defs.output` that some walk can end without writing"),
    ('TX266', 'op-input-mismatch', 'error', "an op whose SELECT (or, without one, the envelope) cannot satisfy its `$defs.input`: a required member never given, or given with a type it never has"),
    ('TX267', 'argument-type-never-accepted', 'warning', 'in a typed stack, a function argument whose possible types the function never accepts (`&len` of a number, `&sha256` of an object): the call always fails'),
    ('TX268', 'select-shadows-answer', 'warning', "a SELECT item writes a path the op's own answer provides (by its schema or `into`): the selected value (`\"\"` when missing) overwrites the answer"),
    ('TX301', 'clause-order', 'info', 'clauses are not in canonical order (safe fix: reorder, never moving a SET across SELECT)'),
    ('TX302', 'split-clause', 'info', 'a SET, EMIT or WITH list is written as several clauses (safe fix: join them)'),
    ('TX303', 'unused-noqa', 'info', 'a `# noqa` comment suppresses nothing'),
    ('TX400', 'test-file-unreadable', 'error', 'a rule test file is not valid YAML or JSON (or not UTF-8)'),
    ('TX401', 'test-unknown-key', 'error', 'a key a rule test file does not know'),
    ('TX402', 'test-invalid-value', 'error', 'a value of the wrong type or outside its choices in a rule test file'),
    ('TX403', 'test-unknown-stack', 'error', 'a rule test names a stack the OPS tree does not have'),
    ('TX404', 'test-duplicate-name', 'error', 'two cases of one test file share a name'),
    ('TX405', 'test-invalid-duration', 'error', 'a duration or time in a rule test that does not parse'),
    ('TX406', 'test-not-json', 'error', 'a test input or value that JSON cannot hold'),
    ('TX407', 'test-unused-mock', 'warning', 'a mock or worker for a target no rule calls'),
    ('TX408', 'test-unknown-op', 'error', 'a rule test expects an op (in `ran` or `not_ran`) that the OPS tree does not have'),
)

CODES: dict[str, CodeInfo] = {row[0]: CodeInfo(*row) for row in _TABLE}


def info(code: str) -> CodeInfo:
    """The table entry of `code` (KeyError when unknown)."""
    return CODES[code]


def default_severity(code: str) -> str:
    entry = CODES.get(code)
    return entry.severity if entry else "error"
