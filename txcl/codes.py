"""The rule-code table: one entry per diagnostic code, the single source of truth.

Each entry holds everything about its code, as ruff keeps a rule: its name, severity and
one-line summary, the explanation with a bad and a good example, and whether `txcl check
--fix` can rewrite it. The parser, the loader, `txcl check` (and its SARIF and JSON output),
`txcl check --fix`, `txcl rule` and the generated reference page (docs/reference/
rule-codes.md) all read it. Adding a code is adding an entry here (and a rule function that
reports it in `txcl/check/rules/`, found automatically); see CONTRIBUTING.md.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class CodeInfo:
    code: str
    name: str
    severity: str  # "error" | "warning" | "info"
    summary: str
    explanation: str = ""
    bad: str = ""
    good: str = ""
    fixable: bool = False  # `txcl check --fix` rewrites it safely (a fixer in txcl/check/fix.py)
    layout: bool = False  # the examples are OPS tree layouts (one `path: text` per line)
    test_file: bool = False  # the examples are parts of rule test files (YAML), not rules
    mcp_server: bool = False  # the finding needs a live MCP server (txcl check --mcp-schemas)

    @property
    def documented(self) -> bool:
        return bool(self.explanation)


def _code(code: str, name: str, severity: str, summary: str, explanation: str = "", bad: str = "",
          good: str = "", **flags: bool) -> CodeInfo:
    return CodeInfo(code, name, severity, summary, " ".join(explanation.split()), bad.strip("\n"),
                    good.strip("\n"), **flags)


_ENTRIES: tuple[CodeInfo, ...] = (
    _code('TX001', 'invalid-character', 'error',
          'character not allowed where it appears',
          ('A character that cannot start a token at this place. Only ASCII is allowed outside strings, '
           'comments, regex bodies and quoted path segments; `{ } ; : + ? $ % ^ ~` and others have no '
           'meaning in TXCL.'),
          'WHEN .total > 10;',
          'WHEN .total > 10'),
    _code('TX002', 'invalid-encoding', 'error',
          'file is not UTF-8 or contains NUL',
          'The file must be valid UTF-8 and must not contain NUL characters.',
          'EMIT .name = "caf\\xe9"   (saved as Latin-1)',
          'EMIT .name = "café"   (saved as UTF-8)'),
    _code('TX003', 'unterminated-string', 'error',
          'string literal not closed',
          'A string literal is not closed before the end of the file.',
          'EMIT .greeting = "hello',
          'EMIT .greeting = "hello"'),
    _code('TX004', 'unterminated-regex', 'error',
          'regex literal not closed on its line',
          'A regex literal must be closed with `/` on the line where it starts.',
          'WHEN .path =~ /^\\/api',
          'WHEN .path =~ /^\\/api/'),
    _code('TX005', 'invalid-regex', 'error',
          'RE2 rejects the pattern',
          'The pattern is not valid RE2 syntax (RE2 has no backreferences or lookaround).',
          'WHEN .name =~ /(a)\\1/',
          'WHEN .name =~ /(aa)/'),
    _code('TX006', 'malformed-number', 'error',
          'text that starts like a number but is not one',
          ('Text that starts like a number but is not one: numbers are `-digits` or `-digits.digits`, '
           'with no exponent, hexadecimal or arithmetic.'),
          'WHEN .size > 1e5',
          'WHEN .size > 100000'),
    _code('TX007', 'number-out-of-range', 'error',
          'integer beyond 64 bits or float overflow',
          'Integer literals must fit in a signed 64-bit integer; floats must be finite.',
          'WHEN .n > 99999999999999999999',
          'WHEN .n > 9223372036854775807'),
    _code('TX008', 'invalid-path', 'error',
          'path without a name start, or with an empty segment',
          'A path needs a letter or `_` after `.` or `@`, and no empty segments.',
          'WHEN .order..total > 5',
          'WHEN .order.total > 5'),
    _code('TX009', 'invalid-quoted-segment', 'error',
          'misplaced, empty or unterminated quoted segment',
          ('A quoted path segment must follow `.`, end the path or be followed by `.`, be non-empty, and'
           ' close on its line.'),
          'WHEN .labels."app > 1',
          'WHEN .labels."app.kubernetes.io/name" == "shop"'),
    _code('TX010', 'unexpected-token', 'error',
          'token where a clause keyword or LOOP modifier is expected',
          ('After a complete clause only a clause keyword (or, inside LOOP, a modifier) or the end of '
           'the file may follow. Two conditions need `&&`, `||` or `,` between them.'),
          'WHEN .tier == "gold" .active == true',
          'WHEN .tier == "gold" && .active == true'),
    _code('TX011', 'repeated-clause', 'error',
          'second WHEN, SELECT, PRIORITY, EXEC or LOOP',
          'WHEN, SELECT, PRIORITY, EXEC and LOOP may each appear once.',
          'WHEN .a == 1\nWHEN .b == 2',
          'WHEN .a == 1 && .b == 2'),
    _code('TX012', 'reserved-word', 'error',
          'FN, LET, IF, ELSE or RETURN used',
          '`FN`, `LET`, `IF`, `ELSE` and `RETURN` are reserved for future use.',
          'IF .a == 1',
          'WHEN .a == 1'),
    _code('TX013', 'expected-target', 'error',
          'assignment does not start with a path',
          'SET, EMIT and LOOP SET assign to a path (`.name` or `@name`).',
          'EMIT total = 1',
          'EMIT .total = 1'),
    _code('TX014', 'expected-equals', 'error',
          '`=` missing in an assignment or WITH pair',
          'An assignment or WITH pair needs `=` between target and value.',
          'SET .order.currency "EUR"',
          'SET .order.currency = "EUR"'),
    _code('TX015', 'expected-value', 'error',
          'value missing or not a value (`null`, `{`, keyword …)',
          ('A value is a string, number, true, false, an array, a path or a call. `null` and object '
           'literals are not values: use `&json("null")` or `&object(...)`.'),
          'EMIT .reason = null',
          'EMIT .reason = &json("null")'),
    _code('TX016', 'invalid-array', 'error',
          'bad separator or non-literal array element',
          'Array literals hold literals only, separated by commas.',
          'EMIT .ids = [.a, .b]',
          'EMIT .ids = &array(.a, .b)'),
    _code('TX017', 'invalid-call', 'error',
          'malformed `&name(...)`',
          'A call is `&name(` with no space, arguments separated by commas, closed by `)`.',
          'EMIT .id = &uuid',
          'EMIT .id = &uuid()'),
    _code('TX018', 'expected-with-key', 'error',
          'WITH item without a valid key',
          ('A WITH item starts with a key such as `timeout` or `secrets.token`; keywords and `@` paths '
           'are not keys.'),
          'WITH "timeout" = "3s"',
          'WITH timeout = "3s"'),
    _code('TX019', 'expected-exec-target', 'error',
          'EXEC without a string',
          'EXEC takes one string literal.',
          'EXEC txco://noop',
          'EXEC "txco://noop"'),
    _code('TX020', 'invalid-priority', 'error',
          'PRIORITY without an integer in range',
          'PRIORITY takes one integer literal in the signed 64-bit range.',
          'PRIORITY high',
          'PRIORITY 10'),
    _code('TX021', 'invalid-select', 'error',
          'empty SELECT, `*` with items, AS without destination',
          'SELECT needs `*` or source paths; `*` stands alone; AS needs a destination.',
          'SELECT *, .id',
          'SELECT *'),
    _code('TX022', 'expected-condition', 'error',
          'condition does not start with a path, `(` or `!`',
          'A condition starts with a path, `(` or `!`.',
          'WHEN "gold" == .tier',
          'WHEN .tier == "gold"'),
    _code('TX023', 'expected-comparison', 'error',
          'comparison operator missing',
          'A path in a condition must be followed by a comparison operator.',
          'WHEN .active',
          'WHEN .active == true'),
    _code('TX024', 'dangling-operator', 'error',
          'nothing after `&&`, `||`, `,` or `!`',
          '`&&`, `||`, `,` and `!` need a condition after them.',
          'WHEN .a == 1 &&',
          'WHEN .a == 1 && .b == 2'),
    _code('TX025', 'invalid-group', 'error',
          'empty or unclosed parentheses',
          'Parentheses must hold a condition and be closed.',
          'WHEN (.a == 1 || .b == 2',
          'WHEN (.a == 1 || .b == 2)'),
    _code('TX026', 'invalid-comparison-value', 'error',
          'right side of a comparison is not a constant',
          ('The right side of `==`, `!=`, `<`, `<=`, `>`, `>=` is a constant: a string, number, boolean,'
           ' null or a call with literal arguments. Comparing two paths is not possible; compute the '
           'comparison earlier and test the result.'),
          'WHEN .used == .limit',
          'WHEN .used_at_limit == true'),
    _code('TX027', 'invalid-match-operand', 'error',
          '`=~`/`!~` operand is not a regex, string or null',
          '`=~` and `!~` take a /regex/, a string (used as the pattern) or null.',
          'WHEN .name =~ 5',
          'WHEN .name =~ /^[0-9]+$/'),
    _code('TX028', 'non-literal-call-argument', 'error',
          'call in WHEN/UNTIL reads a path',
          ('Calls in WHEN and LOOP UNTIL may use literal arguments only; a path argument is not read '
           'there.'),
          'WHEN .len > &len(.items)',
          'EMIT .count = &len(.items)\n# and at a later scope:\nWHEN .count > 3'),
    _code('TX029', 'loop-missing-until', 'error',
          'LOOP without UNTIL',
          'LOOP needs an UNTIL condition that ends it.',
          'EXEC "https://api.example.net/poll"\nLOOP MAX 5',
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .status == "done" MAX 5'),
    _code('TX030', 'invalid-loop-max', 'error',
          'MAX not a positive integer',
          'LOOP MAX takes a positive integer literal.',
          'EXEC "txco://echo"\nLOOP UNTIL .done == true MAX 0',
          'EXEC "txco://echo"\nLOOP UNTIL .done == true MAX 5'),
    _code('TX031', 'invalid-loop-every', 'error',
          'EVERY not a duration or milliseconds, or negative',
          'LOOP EVERY takes a duration such as "250ms" or a whole number of milliseconds, not negative.',
          'EXEC "txco://echo"\nLOOP UNTIL .done == true EVERY "soon"',
          'EXEC "txco://echo"\nLOOP UNTIL .done == true EVERY "250ms"'),
    _code('TX032', 'repeated-loop-modifier', 'error',
          'LOOP modifier given twice',
          'Each LOOP modifier may be given once.',
          'EXEC "txco://echo"\nLOOP UNTIL .done == true MAX 3 MAX 5',
          'EXEC "txco://echo"\nLOOP UNTIL .done == true MAX 5'),
    _code('TX033', 'nested-too-deeply', 'error',
          'parentheses, brackets, calls or `!` nest deeper than the limit',
          ('Parentheses, brackets, function calls and `!` may nest at most 64 levels deep in one rule. '
           'Deeper nesting is refused before parsing, so no tool that walks the rule (parser, checker, '
           'formatter, language server) runs out of stack; split the expression with SET.'),
          'WHEN (((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((.a == 1)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))',
          'WHEN (.a == 1 && (.b == 2 || .c == 3))'),
    _code('TX034', 'file-too-large', 'error',
          'rule text longer than 1 MiB',
          ('A rule file may be at most 1 MiB (1,048,576 bytes of UTF-8). A rule is a few lines; a bigger'
           ' file is almost always data saved under the wrong name, and refusing it keeps a stray '
           'multi-megabyte file from costing gigabytes of memory to parse. The position shown is where '
           'the limit is crossed.'),
          'EMIT .table = ["…a million entries…"]',
          'EMIT .table = &json(.table_text)'),
    _code('TX101', 'unknown-function', 'error',
          'call to a function that does not exist',
          'The function does not exist in the registry (names are case-sensitive).',
          'EMIT .n = &lenght(.items)',
          'EMIT .n = &len(.items)'),
    _code('TX102', 'wrong-arity', 'error',
          'call with an argument count the function never accepts',
          'The call has an argument count the function never accepts.',
          'EMIT .n = &len(.a, .b)',
          'EMIT .n = &len(.a)'),
    _code('TX103', 'unsupported-exec-scheme', 'error',
          'EXEC scheme this runtime does not have',
          ('EXEC schemes are txco://, http(s)://, mcp+http(s)://…#tool, py://, goto:// or a bare '
           '<stack>/<scope>.'),
          'EXEC "ftp://files.example.net/x"',
          'EXEC "https://files.example.net/x"'),
    _code('TX104', 'invalid-exec-target', 'error',
          'malformed EXEC target',
          'The EXEC target is malformed for its kind (empty, no host, bad module name …).',
          'EXEC "py://my-module:run"',
          'EXEC "py://my_module:run"'),
    _code('TX105', 'invalid-goto-target', 'error',
          '`goto://` without a valid scope or stack/scope',
          'A goto target is goto://<scope> or goto://<stack>/<scope>.',
          'EXEC "goto://billing"',
          'EXEC "goto://billing/100"'),
    _code('TX106', 'loop-without-exec', 'error',
          'LOOP with nothing to repeat',
          'A LOOP repeats the EXEC; without EXEC there is nothing to repeat.',
          'LOOP UNTIL .done == true',
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _code('TX107', 'loop-on-noop', 'error',
          'LOOP repeating `txco://noop`',
          'txco://noop returns nothing, so UNTIL could never turn true.',
          'EXEC "txco://noop"\nLOOP UNTIL .done == true',
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _code('TX108', 'loop-on-stage-jump', 'error',
          'LOOP repeating a stage jump',
          'A stage jump cannot be repeated; loop on the op that produces the data.',
          'EXEC "goto://300"\nLOOP UNTIL .done == true',
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _code('TX109', 'loop-with-mode', 'error',
          'LOOP combined with `mode = "async"` or `"continuable"`',
          'async and continuable ops leave the request, but a LOOP repeats inside it.',
          'WITH mode = "async"\nEXEC "https://api.example.net/job"\nLOOP UNTIL .done == true',
          'EXEC "https://api.example.net/job"\nLOOP UNTIL .done == true'),
    _code('TX110', 'join-needs-async', 'error',
          '`join_at_scope` without `mode = "async"` (continuable or sync)',
          'join_at_scope defers an async op; it needs mode = "async".',
          'WITH join_at_scope = 300\nEXEC "https://api.example.net/job"',
          'WITH mode = "async", join_at_scope = 300\nEXEC "https://api.example.net/job"'),
    _code('TX111', 'async-unsupported-target', 'error',
          '`mode = "async"` or `join_at_scope` on a target that cannot run asynchronously',
          ('Only http(s):// targets (a worker calls back), mcp+http(s):// targets (txcl calls the '
           'tool itself, durably), queue:// targets (a worker claims the job) and nats:// targets (a worker '
           'takes it from NATS JetStream) can run asynchronously.'),
          'WITH mode = "async"\nEXEC "txco://echo"',
          'WITH mode = "async"\nEXEC "https://worker.example.net/job"'),
    _code('TX112', 'itemize-needs-async', 'error',
          '`each` without `mode = "async"` and `into`',
          'Itemized awaits (each) need mode = "async" and into = "<path>".',
          'WITH each = .items\nEXEC "https://worker.example.net/item"',
          'WITH mode = "async", each = .items, into = "results"\nEXEC "https://worker.example.net/item"'),
    _code('TX113', 'mcp-target-without-tool', 'error',
          '`mcp+http(s)://` target without a valid `#tool` name',
          ("An MCP target is the server's endpoint, then `#` and the name of the tool to call on it "
           '(letters, digits, `_`, `-`, `.` and `/`). Run `txcl mcp doctor <endpoint>` to list a '
          "server's tools."),
          'EXEC "mcp+https://tools.example.net/mcp"',
          'EXEC "mcp+https://tools.example.net/mcp#summarize"'),
    _code('TX114', 'invalid-secret-reference', 'error',
          'a WITH secrets.* reference that is computed, malformed, or where no request carries it',
          ('A secret is named in the rule\'s text: `secrets.headers.<header>.secret = "NAME"` (with '
           '`.format = "Bearer {}"` and `.optional = true` beside it) or `secrets.body.<path>.secret` for a '
           'sync http(s) op. The name must be a literal string — a secret chosen by a value of the envelope '
           'would let a request pick any credential — and the op must make an http(s) or mcp+ request for '
           'the value to travel in.'),
          'EXEC "https://api.example.com/charge"\n  WITH secrets.headers.authorization.secret = .key_name',
          'EXEC "https://api.example.com/charge"\n  WITH secrets.headers.authorization.secret = "STRIPE_KEY",\n'
          '       secrets.headers.authorization.format = "Bearer {}"'),
    _code('TX115', 'queue-needs-async', 'error',
          'a `queue://` or `nats://` op without `mode = "async"`',
          ('A queue:// op puts a job in a pull queue, a nats:// op publishes it to NATS, and both wait '
           'for a worker to take it and answer, which takes as long as it takes: the op must leave the '
           'request with mode = "async" (itemized with each and into, or deferred with join_at_scope, as '
           'any async op).'),
          'EXEC "queue://resize"',
          'WITH mode = "async"\nEXEC "queue://resize"'),
    _code('TX120', 'no-scope-directory', 'error',
          'rule file not under a numbered scope directory',
          'Every rule file must sit under a numbered scope directory, else it is never loaded.',
          'OPS/shop/discount.txcl',
          'OPS/shop/0200_pricing/discount.txcl',
          layout=True),
    _code('TX121', 'missing-stack-name', 'error',
          'numbered directory directly under `OPS/`',
          'The first numbered directory needs a stack name in front of it.',
          'OPS/0100/check.txcl',
          'OPS/shop/0100/check.txcl',
          layout=True),
    _code('TX122', 'duplicate-operation', 'error',
          'two files flatten to one stack/scope/name',
          'Two files flatten to the same stack, scope and op name.',
          'OPS/shop/0100_a/tax.txcl\nOPS/shop/0100_b/tax.txcl',
          'OPS/shop/0100_a/tax.txcl\nOPS/shop/0100_b/vat.txcl',
          layout=True),
    _code('TX123', 'invalid-stage-name', 'error',
          'stack, name or scope outside the allowed form',
          ('Stack segments and op names use [A-Za-z0-9_-] (stack ≤ 128, name ≤ 64 characters); scopes '
           'are at most 999999999.'),
          'OPS/my shop/0100/check.txcl',
          'OPS/my-shop/0100/check.txcl',
          layout=True),
    _code('TX201', 'leading-zero-number', 'warning',
          '`012` is twelve here but ten (octal) in the reference; write `12` (safe fix)',
          ('A number with a leading zero is decimal here (012 is twelve) but octal in the reference '
           'implementation (ten). Write it without the zero so both agree.'),
          'WHEN .code == 012',
          'WHEN .code == 12',
          fixable=True),
    _code('TX202', 'bare-when', 'warning',
          '`WHEN` with no condition matches everything; write `WHEN *` or a condition',
          ('A WHEN with no condition matches everything, which is easy to mistake for a forgotten '
           'condition. Write `WHEN *` to say so, or add the condition.'),
          'WHEN\nEXEC "txco://echo"',
          'WHEN *\nEXEC "txco://echo"'),
    _code('TX203', 'duplicate-with-key', 'warning',
          'a WITH key (or a key and one of its own prefixes) given twice; the later write wins',
          ('WITH pairs are written in order into one object; a repeated key (or a key and one of its '
           'prefixes) silently replaces the earlier value.'),
          'WITH timeout = "3s", timeout = "5s"',
          'WITH timeout = "5s"'),
    _code('TX204', 'duplicate-assignment-target', 'warning',
          'the same target twice in SET (the first wins) or EMIT (the last wins)',
          ('SET only writes missing paths, so a second SET of the same target never applies; in EMIT the'
           ' later value overwrites the earlier one.'),
          'SET .currency = "EUR", .currency = "USD"',
          'SET .currency = "EUR"'),
    _code('TX205', 'reserved-txc-write', 'warning',
          ('EMIT, SET POST, LOOP SET or a literal `@delete` target writes a reserved `_txc` path; '
           'dropped at run time'),
          ('Most of `_txc` is reserved to the runtime; EMIT, SET after SELECT, LOOP SET and @delete '
           'targets there are dropped. Writable: _txc.web.res, goto, halt, delete, telemetry, lmtp.res, '
           'llm.*, and ttl by EMIT.'),
          'EMIT @stack = "billing"',
          'EMIT @goto = "billing/100"'),
    _code('TX206', 'set-pre-control-field', 'warning',
          ('SET before SELECT writes `@halt`, `@goto`, `@delete` or `@web.res…`; it only decorates the '
          "op's input, use EMIT"),
          ("SET before SELECT only decorates the op's own input, so control fields written there (halt, "
           'goto, delete, web.res) never reach the flow.'),
          'SET @halt = true',
          'EMIT @halt = true'),
    _code('TX207', 'call-always-fails', 'warning',
          ('a call whose arguments are all literals fails when evaluated (`&div(5, 0)`, '
           '`&tz("Mars/Base", "hour", 9)`); in WHEN the comparison is always false'),
          ('A call whose arguments are all literals is evaluated by the checker; this one always fails '
           'at run time (in WHEN the comparison is then always false).'),
          'EMIT .ratio = &div(5, 0)',
          'EMIT .ratio = &div(5, 2)'),
    _code('TX208', 'try-wrong-arity', 'warning',
          'a `try_` call with an argument count its base never accepts; always `null`',
          ('A try_ call never fails, but with an argument count its base never accepts it always returns'
           ' null.'),
          'EMIT .v = &try_json(.a, .b)',
          'EMIT .v = &try_json(.a)'),
    _code('TX209', 'invalid-with-value', 'warning',
          ('a literal value of a consumed WITH key has the wrong type or range (bad duration, unknown '
           'mode, non-integer `join_at_scope`, `window` outside 1–1024, non-literal `redact`/`omit`, '
           '`window` without `each`, an `into`/`status_into` that is empty or starts with `.` or `@`, a '
           '`tolerated_failures` that is not a count or percentage or comes without `on_item_error = '
           '"tolerate"`, an `on_join_deadline` other than "fail" or "continue", a `cancel_url` that is '
           'not an http(s) URL or comes without `mode = "async"`, `retries` outside 0–100 or without '
           '`mode = "async"`, `retry_backoff` without `retries`); the runtime ignores it or uses it '
           'literally'),
          ('A literal value of a WITH key the runtime consumes has the wrong type or range; the runtime '
           'ignores it (or uses it literally).'),
          'WITH timeout = "three seconds"',
          'WITH timeout = "3s"'),
    _code('TX210', 'loop-until-true-when-missing', 'warning',
          ('an UNTIL comparison with a boolean that is already true when its path is missing (`== '
           'false`, `!= true`, or `== true`/`!= false` under an odd number of `!`), so the loop may stop'
           ' after one pass'),
          ('A missing path compares as the empty string, so `== false` and `!= true` are true before the'
           ' op ever sets the field: the loop may stop after one pass.'),
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .pending == false',
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _code('TX211', 'loop-max-above-ceiling', 'warning',
          ('LOOP MAX above the default ceiling 1000; the runtime refuses the loop unless `--op-loop-max`'
           ' is raised'),
          'The runtime refuses loops whose MAX is above --op-loop-max (1000 by default).',
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true MAX 5000',
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true MAX 500'),
    _code('TX212', 'loop-on-mock', 'warning',
          'LOOP repeating `txco://mock`, which answers the same fixture every pass',
          'txco://mock answers the same fixture on every pass, so the loop cannot progress.',
          'EXEC "txco://mock"\nLOOP UNTIL .done == true',
          'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _code('TX213', 'loop-cut-by-sibling-halt', 'warning',
          ('a rule at the same stage halts unconditionally (no WHEN, literal truthy `@halt`), which '
           'stops the loop after its first pass'),
          ('A sibling rule at the same stage halts unconditionally; a loop stops as soon as a sibling '
           'finished with a truthy halt, so it never gets past its first pass.'),
          'OPS/s/0100/poll.txcl: EXEC "https://api.example.net/poll" LOOP UNTIL .done == true\nOPS/s/0100/stop.txcl: EMIT @halt = true',
          'OPS/s/0100/poll.txcl: EXEC "https://api.example.net/poll" LOOP UNTIL .done == true\nOPS/s/0200/stop.txcl: EMIT @halt = true',
          layout=True),
    _code('TX214', 'with-key-near-miss', 'warning',
          ('a WITH key the runtime does not read but that is one or two edits from one it does '
           '(`join_at_scop`): the setting silently does not apply'),
          ('A WITH key that the runtime does not read, one or two edits away from one it does. Keys the '
           'runtime does not consume go to the op as its own settings, so a misspelled `join_at_scope` '
           'turns a deferred op into a plain async one, and nothing fails.'),
          'WITH mode = "async", join_at_scop = 400\nEXEC "https://w.example.net/job"',
          'WITH mode = "async", join_at_scope = 400\nEXEC "https://w.example.net/job"'),
    _code('TX215', 'literal-evaluation-stopped', 'info',
          ('txcl check stopped evaluating the literal calls of a file (for TX207): the ones before built'
           ' more than its per-file budget'),
          ('To find calls that always fail (TX207), `txcl check` evaluates the calls whose arguments are'
           ' all literals. Their work per file is bounded (about four million characters and elements '
           'built); past that it stops evaluating, says where, and the remaining calls of the file are '
           'not checked for TX207.'),
          'EMIT .a0 = &to_json(&split(&repeat("ab", 524288), ""))\nEMIT .a1 = &to_json(&split(&repeat("ab", 524288), ""))\nEMIT .a2 = &to_json(&split(&repeat("ab", 524288), ""))',
          'EMIT .a = &to_json(&split(&repeat("ab", 4), ""))'),
    _code('TX220', 'join-at-or-below-own-scope', 'warning',
          ("`join_at_scope` at or below the op's own scope: it behaves as a plain async op and suspends "
           'at its own scope'),
          ("join_at_scope at or below the op's own scope does not defer anything: the op behaves as a "
           'plain async op and suspends at its own scope.'),
          'OPS/s/0300/job.txcl: WITH mode = "async", join_at_scope = 200 EXEC "https://w.example.net/job"',
          'OPS/s/0300/job.txcl: WITH mode = "async", join_at_scope = 500 EXEC "https://w.example.net/job"',
          layout=True),
    _code('TX221', 'join-scope-not-reached', 'warning',
          ('no scope at or above `join_at_scope` exists in the stack (or the stacks it inherits); the '
           'result is never merged unless the flow jumps'),
          ('No scope at or above join_at_scope exists in the stack (or the stacks it inherits), so the '
           'deferred result is never merged unless the flow jumps.'),
          'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 900 EXEC "https://w.example.net/job"\nOPS/s/0200/next.txcl: EMIT .x = 1',
          'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 200 EXEC "https://w.example.net/job"\nOPS/s/0200/next.txcl: EMIT .x = 1',
          layout=True),
    _code('TX222', 'deferred-output-read-early', 'warning',
          ("a rule at a scope the flow may run between a deferred op's dispatch and its join (the scopes"
           ' after it in order, and those a literal jump in the same stack reaches) reads a path at or '
           'under what the op writes when it joins — its literal `into`, or a target of its EMIT or SET '
           'POST; it sees nothing yet (the reference does not check this)'),
          ("A scope the flow runs between a deferred op's dispatch and its join reads what the op writes"
           ' when it joins (its `into`, or what its EMIT and SET POST write), which holds nothing yet. '
           'The scopes are those after the op in order and any a literal `@goto` or stage-jump EXEC in '
           'the same stack reaches before the join.'),
          'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 300, into = "job" EXEC "https://w.example.net/job"\nOPS/s/0200/use.txcl: WHEN .job.ok == true\nOPS/s/0300/next.txcl: EMIT .x = 1',
          'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 300, into = "job" EXEC "https://w.example.net/job"\nOPS/s/0300/use.txcl: WHEN .job.ok == true',
          layout=True),
    _code('TX223', 'join-scope-has-async-op', 'info',
          ('the join scope also holds its own `mode = "async"` op; supported here (suspends are keyed by'
           ' visit), but the reference stalls on it'),
          ('The join scope also holds its own async op. This works here (suspends are keyed by visit) '
           'but the reference implementation stalls on it.'),
          'OPS/s/0100/a.txcl: WITH mode = "async", join_at_scope = 300 EXEC "https://w.example.net/a"\nOPS/s/0300/b.txcl: WITH mode = "async" EXEC "https://w.example.net/b"',
          'OPS/s/0100/a.txcl: WITH mode = "async", join_at_scope = 300 EXEC "https://w.example.net/a"\nOPS/s/0300/c.txcl: EMIT .x = 1\nOPS/s/0400/b.txcl: WITH mode = "async" EXEC "https://w.example.net/b"',
          layout=True),
    _code('TX224', 'join-option-without-effect', 'warning',
          ('`join_deadline`, `on_join_deadline` or `join_wait` on an op that does not defer its join (no'
           ' `mode = "async"` with a `join_at_scope` above its scope), `on_join_deadline` without '
           '`join_deadline`, or a `join_wait` not shorter than the `join_deadline`'),
          ('A join option (`join_deadline`, `on_join_deadline`, `join_wait`) on an op that does not '
           'defer its join does nothing; so does `on_join_deadline` without `join_deadline`, and a '
           '`join_wait` as long as the deadline never ends before it.'),
          'OPS/s/0100/job.txcl: WITH mode = "async", join_deadline = "5s" EXEC "https://w.example.net/job"',
          'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 300, join_deadline = "5s" EXEC "https://w.example.net/job"',
          layout=True),
    _code('TX230', 'unconditional-self-loop', 'warning',
          ('a rule with no condition and no literal truthy `@halt` jumps to its own stage by a literal '
           '`@goto` (EMIT or SET POST) or a stage-jump EXEC'),
          ("A rule without a condition that jumps to its own stage repeats until the request's budget "
           'runs out.'),
          'OPS/s/0100/again.txcl: EMIT @goto = "s/100"',
          'OPS/s/0100/again.txcl: WHEN .retry == true EMIT @goto = "s/100", .retry = false',
          layout=True),
    _code('TX231', 'unconditional-two-stage-cycle', 'warning',
          'two stages each hold an unconditional rule that jumps to the other; reported once per pair',
          'Two stages that jump to each other unconditionally ping-pong until the budget runs out.',
          'OPS/s/0100/a.txcl: EXEC "goto://200"\nOPS/s/0200/b.txcl: EXEC "goto://100"',
          'OPS/s/0100/a.txcl: EXEC "goto://200"\nOPS/s/0200/b.txcl: WHEN .again == true EXEC "goto://100"',
          layout=True),
    _code('TX232', 'cross-stack-goto', 'warning',
          ('a literal `@goto` or stage-jump EXEC into another stack (guarded rules too): `_txc.stack` is'
           ' not changed, and outstanding deferred joins resolve at the first scope of the new stack'),
          ('A jump into another stack does not change _txc.stack, and outstanding deferred joins resolve'
           ' at the first scope of the new stack.'),
          'OPS/shop/0100/go.txcl: EMIT @goto = "billing/100"\nOPS/billing/0100/bill.txcl: EMIT .billed = true',
          'OPS/shop/0100/go.txcl: EMIT @goto = "shop/300"\nOPS/shop/0300/next.txcl: EMIT .x = 1',
          layout=True),
    _code('TX233', 'goto-unknown-stack', 'error',
          ('a literal `@goto` or stage-jump EXEC into a stack the OPS tree does not have: the request '
           'fails there'),
          ('A literal `@goto` or stage-jump EXEC names a stack the OPS tree does not have. At run time '
           'such a jump fails the request (`txcl_bad_goto`).'),
          'OPS/shop/0100/go.txcl: EMIT @goto = "shp/200"\nOPS/shop/0200/next.txcl: EMIT .x = 1',
          'OPS/shop/0100/go.txcl: EMIT @goto = "shop/200"\nOPS/shop/0200/next.txcl: EMIT .x = 1',
          layout=True),
    _code('TX240', 'stray-file', 'warning',
          'a file in the OPS tree that is neither a rule nor an allowed companion',
          ('A file in the OPS tree that is neither a rule, a fixture (mock-request.json, '
           'mock-response.json), a .md file nor a FILES/ asset. Extra patterns can be allowed with '
           '`allow` in the configuration.'),
          'OPS/shop/0100/check.txcl.bak',
          'OPS/shop/0100/check.txcl',
          layout=True),
    _code('TX241', 'egress-refused-target', 'warning',
          'an EXEC target the egress policy refuses',
          ('The EXEC target is a literal address (or a host on the deny list) that the egress policy '
           'refuses: link-local and cloud metadata addresses always, private and loopback addresses '
           'when `[egress]` in txcl.toml says so. At run time the op fails with `txcl_egress_denied`. '
           'Call a host the policy permits, or add it to `allow` in `[egress]` when the call is meant.'),
          'EXEC "http://169.254.169.254/latest/meta-data/"',
          'EXEC "https://api.example.com/instances"'),
    _code('TX242', 'secret-not-found', 'warning',
          'a secret the configured provider does not have',
          ('A `WITH secrets.….secret = "NAME"` names a secret the provider `txcl serve` uses does not have: '
           'no environment variable `TXCL_SECRET_NAME` (the default provider, looked up in the environment '
           'of `txcl check`), or no file `NAME` in the secrets directory (`secrets-provider = "dir"` in '
           '`[serve]`). At run time the op fails with an error naming the secret.'),
          'EXEC "https://api.stripe.com/v1/charges"\n  WITH secrets.headers.authorization.secret = "STRIPE_KYE"',
          'EXEC "https://api.stripe.com/v1/charges"\n  WITH secrets.headers.authorization.secret = "STRIPE_KEY"'),
    _code('TX243', 'telemetry-intent-dropped', 'warning',
          'an application metric (EMIT @telemetry.metrics) the runtime would drop',
          ('An intent written with literals that the runtime drops when the request completes: its name is '
           'not dot-joined words (`book.queued`), its kind is neither `counter` nor `histogram`, its value is '
           'not a number (or a negative counter), or its attributes are not an object of scalars. A dropped '
           'intent never fails the request; it is only counted in `txcl_telemetry_dropped_total`.'),
          'EMIT @telemetry.metrics = &array(&object("name", "book queued", "kind", "count", "value", 1))',
          'EMIT @telemetry.metrics = &array(&object("name", "book.queued", "kind", "counter", "value", 1))'),
    _code('TX244', 'unknown-event-field', 'warning',
          'a read of @cron.*, @scheduled.* or @lmtp.* that the event never holds',
          ('A `_cron` stack receives a tick whose `@cron.*` fields are minute, hour, dom, dow, month, year, '
           'mod5, mod10, mod15, mod30, bucket, bucket_ms, tick, job, node, tz and period_s; a `_scheduled` '
           'stack receives `@scheduled.*` (payload, idempotency_key, event_id, schedule_at, fired_at, attempt, '
           'origin_stack, origin_rid, node); a delivered mail message is `@lmtp.*` (listener, client, mail, '
           'rcpt, transaction_rcpt, msg, res; `@lmtp.msg.*` is id, date, from, to, cc, subject, text, html, '
           'headers, attachments, raw). A read of any other field is always missing, so a condition on it '
           'never holds.'),
          'WHEN @cron.hours == 9\n  EXEC "https://ops.example.com/morning"',
          'WHEN @cron.hour == 9\n  EXEC "https://ops.example.com/morning"'),
    _code('TX245', 'schedule-missing-key', 'error',
          'EXEC "txco://schedule" without WITH idempotency_key',
          ('Every scheduled event is named by its idempotency key: scheduling the same key again while it is '
           'pending moves it, `cancel = true` cancels it, and once it has fired the key is spent. A call '
           'without one fails every time.'),
          'WITH schedule_at = .at, payload = .job\nEXEC "txco://schedule"',
          'WITH idempotency_key = .reader.id, schedule_at = .at, payload = .job\nEXEC "txco://schedule"'),
    _code('TX246', 'schedule-bad-time', 'error',
          'EXEC "txco://schedule" without a usable schedule_at',
          ('`schedule_at` is the time the event fires (not before), an RFC 3339 time with a zone: '
           '`"2026-06-30T08:00:00Z"` or `"2026-06-30T10:00:00+02:00"`. A call without it (and without '
           '`cancel = true`), or with a literal that is not such a time, fails every time.'),
          'WITH idempotency_key = "reminder", schedule_at = "2026-06-30 08:00"\nEXEC "txco://schedule"',
          'WITH idempotency_key = "reminder", schedule_at = "2026-06-30T08:00:00Z"\nEXEC "txco://schedule"'),
    _code('TX247', 'schedule-without-receiver', 'warning',
          'events are scheduled but no _scheduled stack receives them',
          ('A scheduled event is delivered into the `_scheduled` stack at its time; the stack\'s existence is '
           'the subscription. Without one, the events this rule schedules stay pending '
           '(`txcl schedules` lists them).'),
          'OPS/shop/0100/remind.txcl: WITH idempotency_key = .id, schedule_at = .at EXEC "txco://schedule"',
          ('OPS/shop/0100/remind.txcl: WITH idempotency_key = .id, schedule_at = .at EXEC "txco://schedule"\n'
           'OPS/_scheduled/0100/remind.txcl: EXEC "https://mail.example.com/remind"'),
          layout=True),
    _code('TX248', 'misspelled-inlet-stack', 'warning',
          'a stack named almost like _cron, _scheduled or _mail',
          ('Clock ticks go to `_cron`, scheduled events to `_scheduled`, and mail no other stack takes to '
           '`_mail`. A stack whose name is one letter away from these receives nothing.'),
          'OPS/_schedule/0100/report.txcl: EMIT .seen = @scheduled.payload',
          'OPS/_scheduled/0100/report.txcl: EMIT .seen = @scheduled.payload', layout=True),
    _code('TX250', 'mcp-unknown-tool', 'error',
          'the MCP server of an `mcp+` target does not list its tool (`txcl check --mcp-schemas`)',
          ('Reported by `txcl check --mcp-schemas`, which asks each MCP server named by an `mcp+` target'
           ' for its tools: the server does not list the tool after `#`. `txcl mcp doctor <endpoint>` '
           'prints the tools it has.'),
          'EXEC "mcp+https://tools.example.net/mcp#sumarize"',
          'EXEC "mcp+https://tools.example.net/mcp#summarize"',
          mcp_server=True),
    _code('TX251', 'mcp-missing-argument', 'error',
          ("the SELECT of an `mcp+` op gives none of an argument the tool's input schema requires "
           '(`--mcp-schemas`)'),
          ("Reported by `txcl check --mcp-schemas`: the op's SELECT is the tool's arguments, and it "
          "gives none of an argument the tool's input schema lists as required. Select it under the "
          "argument's name. A rule without SELECT (or with `SELECT *`) sends the whole envelope and is "
           'not checked.'),
          'SELECT .doc.body AS .content\nEXEC "mcp+https://tools.example.net/mcp#summarize"',
          'SELECT .doc.body AS .text\nEXEC "mcp+https://tools.example.net/mcp#summarize"',
          mcp_server=True),
    _code('TX252', 'mcp-schema-unavailable', 'warning',
          'the MCP server of an `mcp+` target could not be asked for its tools (`--mcp-schemas`)',
          ('Reported by `txcl check --mcp-schemas` when an MCP server cannot be asked for its tools (it '
           'is unreachable, or the URL is not an MCP endpoint); its ops are not checked.'),
          'EXEC "mcp+https://tools.example.net/not-mcp#summarize"',
          'EXEC "mcp+https://tools.example.net/mcp#summarize"',
          mcp_server=True),
    _code('TX260', 'schema-invalid', 'error',
          ('a schema file (`OPS/<stack>/schema.json` or `<name>.schema.json`) that cannot be read, is '
           'not JSON or not a valid JSON Schema, has a `$ref` that leads nowhere, or lacks `$defs.input`'),
          ("A schema file of the OPS tree — a stack's `OPS/<stack>/schema.json` or an op's "
           '`<name>.schema.json` beside `<name>.txcl` — cannot be used: it cannot be read, is not JSON, '
           'is not a valid JSON Schema (2020-12), holds a `$ref` that leads nowhere (only references '
           'inside the file and to sibling files of the tree are followed; nothing is fetched), or (a '
          "stack's) lacks `$defs.input`. The finding points at the line and column of the problem."),
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "objet"}}}\nOPS/shop/0100/a.txcl: EMIT .a = 1',
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object"}}}\nOPS/shop/0100/a.txcl: EMIT .a = 1',
          layout=True),
    _code('TX261', 'unknown-path', 'error',
          ('in a typed stack, a read of a path that nothing provides on any walk: no schema declares it '
           'and no rule writes it'),
          ("In a typed stack (one with a schema.json, its own or an ancestor's), a path is read that "
          "nothing provides on any walk: the stack's `$defs.input` does not declare it, no op's "
           '`$defs.output` answers it and no rule writes it. A missing path reads as the zero value, so '
           'such a condition is silently false forever — usually a misspelling. An object schema that '
           'lists `properties` and omits `additionalProperties` counts as closed; `additionalProperties:'
           ' true` (or a schema), `patternProperties`, an object schema that lists nothing, and an op '
           'without a schema accept any path below them.'),
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: WHEN .ordr.total > 100 EMIT .label = "big"',
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: WHEN .order.total > 100 EMIT .label = "big"\nOPS/shop/0100/e.txcl: EMIT .label = "std"',
          layout=True),
    _code('TX262', 'read-before-provided', 'warning',
          ('in a typed stack, a read of a path that is provided only after that point on every walk that'
           ' reaches it (written at a later scope, or by a deferred op not joined yet)'),
          ('In a typed stack, a path is read before anything provides it on every walk that reaches the '
           'read: it is written at a later scope, or answered by a deferred op that has not joined yet. '
           'Rules of one scope see the envelope as the scope began; what they write is there from the '
           'next scope on.'),
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/a.txcl: WHEN .vip == true EMIT .label = "vip"\nOPS/shop/0100/b.txcl: EMIT .label = "std"\nOPS/shop/0200/b.txcl: EMIT .vip = true',
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/b.txcl: EMIT .vip = true, .label = "std"\nOPS/shop/0200/a.txcl: WHEN .vip == true EMIT .label = "vip"',
          layout=True),
    _code('TX263', 'impossible-comparison', 'warning',
          ("in a typed stack, a comparison that can never be true (or never false) for the path's "
          "declared types and values under TXCL's coercions, a regex against an object or array, or "
           'ordering on one'),
          ('In a typed stack, a comparison can never be true (or never false) for the values the path '
          "can hold, under TXCL's coercions (the literal on the right decides): a string against a "
          "number that no number's text can equal, a value outside the path's `enum`, a number against "
           'a boolean, a regex against an object or array, `<` on an object.'),
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: WHEN .order.status == "shiped" EMIT .label = "sent"\nOPS/shop/0100/e.txcl: EMIT .label = "std"',
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: WHEN .order.status == "shipped" EMIT .label = "sent"\nOPS/shop/0100/e.txcl: EMIT .label = "std"',
          layout=True),
    _code('TX264', 'write-type-mismatch', 'error',
          ('in a typed stack, a write whose value can never match the type (or `enum`) declared for that'
          " path by the stack's `$defs.output` (or `$defs.input`)"),
          ('In a typed stack, a write (EMIT, SET POST, a SELECT destination) puts a value at a path '
          "whose declared type — by the stack's `$defs.output`, or `$defs.input` when there is no "
           'output schema — the value can never have, or a literal outside its `enum`.'),
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: EMIT .discount = "ten", .label = "x"',
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: EMIT .discount = 10, .label = "x"',
          layout=True),
    _code('TX265', 'required-output-unwritten', 'warning',
          "a `required` member of a stack's `$defs.output` that some walk can end without writing",
          ("A member the stack's `$defs.output` requires can be missing when a walk ends: some walk "
           'through the stack writes it only under a condition, or not at all. The finding points at the'
           ' `required` entry in schema.json.'),
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: WHEN .order.total > 100 EMIT .label = "big"',
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: WHEN .order.total > 100 EMIT .label = "big"\nOPS/shop/0200/z.txcl: SELECT * SET .label = "std"',
          layout=True),
    _code('TX266', 'op-input-mismatch', 'error',
          ('an op whose SELECT (or, without one, the envelope) cannot satisfy its `$defs.input`: a '
           'required member never given, or given with a type it never has'),
          ("An op's `<name>.schema.json` declares its `$defs.input`, and the rule's SELECT never gives a"
           ' member it requires, or gives one a type it requires differently. Without SELECT (or with '
           '`SELECT *`) the op is sent the whole envelope, which is checked instead.'),
          'OPS/s/schema.json: {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}}\nOPS/s/0100/score.schema.json: {"$defs": {"input": {"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]}}}\nOPS/s/0100/score.txcl: SELECT .id AS .client EXEC "https://score.example.net/"',
          'OPS/s/schema.json: {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}}\nOPS/s/0100/score.schema.json: {"$defs": {"input": {"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]}}}\nOPS/s/0100/score.txcl: SELECT .id AS .customer EXEC "https://score.example.net/"',
          layout=True),
    _code('TX267', 'argument-type-never-accepted', 'warning',
          ('in a typed stack, a function argument whose possible types the function never accepts '
           '(`&len` of a number, `&sha256` of an object): the call always fails'),
          ('In a typed stack, a function gets an argument of a type it never accepts, so the call always'
           ' fails (and its clause with it): `&len` of a number, `&sha256` of an object, `&add` of an '
           'array.'),
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: EMIT .label = &concat("n", &len(.order.total))',
          'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}\nOPS/shop/0100/d.txcl: EMIT .label = &concat("n", &len(.order.status))',
          layout=True),
    _code('TX268', 'select-shadows-answer', 'warning',
          ("a SELECT item writes a path the op's own answer provides (by its schema or `into`): the "
           'selected value (`""` when missing) overwrites the answer'),
          ("A SELECT item writes a path the op's own answer provides (its schema's `$defs.output`, or "
           'its `into`). SELECT\'s values are written over the answer (a missing source gives `""`), so '
          "the answer's value is lost."),
          'OPS/s/schema.json: {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}}\nOPS/s/0100/score.schema.json: {"$defs": {"output": {"type": "object", "properties": {"score": {"type": "number"}}}}}\nOPS/s/0100/score.txcl: SELECT .id, .score EXEC "https://score.example.net/"',
          'OPS/s/schema.json: {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}}\nOPS/s/0100/score.schema.json: {"$defs": {"output": {"type": "object", "properties": {"score": {"type": "number"}}}}}\nOPS/s/0100/score.txcl: SELECT .id EXEC "https://score.example.net/"',
          layout=True),
    _code('TX301', 'clause-order', 'info',
          'clauses are not in canonical order (safe fix: reorder, never moving a SET across SELECT)',
          ('Clauses read best in the canonical order WHEN, SET, SELECT, SET, WITH, PRIORITY, EXEC, LOOP,'
           ' EMIT. The fix reorders them and never moves a SET across SELECT.'),
          'EXEC "txco://echo"\nWHEN .a == 1',
          'WHEN .a == 1\nEXEC "txco://echo"',
          fixable=True),
    _code('TX302', 'split-clause', 'info',
          'a SET, EMIT or WITH list is written as several clauses (safe fix: join them)',
          ('A SET, EMIT or WITH keyword repeated later continues the same list; one clause is clearer. '
           'The fix joins them.'),
          'EMIT .a = 1\nEMIT .b = 2',
          'EMIT .a = 1, .b = 2',
          fixable=True),
    _code('TX303', 'unused-noqa', 'info',
          'a `# noqa` comment suppresses nothing',
          ('A `# noqa` comment that suppresses nothing hides nothing but noise; remove it (or the codes '
           'it no longer needs).'),
          'EMIT .a = 1  # noqa: TX201',
          'EMIT .a = 1'),
    _code('TX400', 'test-file-unreadable', 'error',
          'a rule test file is not valid YAML or JSON (or not UTF-8)',
          ('A rule test file (`*.test.yaml`, `*.test.yml`, `*.test.json`) must be valid YAML or JSON in '
           'UTF-8. The position is where the parser stopped.'),
          'cases:\n  - name: vip\n    input: {order: {tier: vip}',
          'cases:\n  - name: vip\n    input: {order: {tier: vip}}',
          test_file=True),
    _code('TX401', 'test-unknown-key', 'error',
          'a key a rule test file does not know',
          ('A key that rule test files do not have, usually a typo: the message suggests the closest '
          "known key. The file's keys are `stack` and `cases`; a case has `name`, `input` or "
           '`input_file`, `stack`, `clock`, `mocks`, `workers` and `expect`.'),
          'cases:\n  - name: vip\n    inptu: {order: {}}',
          'cases:\n  - name: vip\n    input: {order: {}}',
          test_file=True),
    _code('TX402', 'test-invalid-value', 'error',
          'a value of the wrong type or outside its choices in a rule test file',
          ('A value of the wrong type (a list where a mapping belongs, a number for a name) or outside '
           'its choices (`expect.status` is one of completed, halted, failed, suspended).'),
          'cases:\n  - name: vip\n    expect: {status: done}',
          'cases:\n  - name: vip\n    expect: {status: completed}',
          test_file=True),
    _code('TX403', 'test-unknown-stack', 'error',
          'a rule test names a stack the OPS tree does not have',
          ('The case runs on a stack the OPS tree does not have (or names none while the workspace has '
           'several). Give `stack:` at the top of the file or in the case.'),
          'stack: shpo\ncases:\n  - name: vip',
          'stack: shop\ncases:\n  - name: vip',
          test_file=True),
    _code('TX404', 'test-duplicate-name', 'error',
          'two cases of one test file share a name',
          'Every case of a file has its own name, so reports and `-k` can tell them apart.',
          'cases:\n  - name: vip\n  - name: vip',
          'cases:\n  - name: vip\n  - name: vip with coupon',
          test_file=True),
    _code('TX405', 'test-invalid-duration', 'error',
          'a duration or time in a rule test that does not parse',
          ('Durations (`after`) are written like `"250ms"`, `"5m"`, `"2h"` or milliseconds (`after` also'
           ' takes `never`); `clock` is an RFC 3339 time.'),
          'workers:\n  "https://w.example/start": {after: soon}',
          'workers:\n  "https://w.example/start": {after: 5m}',
          test_file=True),
    _code('TX406', 'test-not-json', 'error',
          'a test input or value that JSON cannot hold',
          ('Inputs, outputs and expected values must be JSON. YAML has more (dates, times); quote them. '
           'An `input` (or the file named by `input_file`) must be a JSON object.'),
          'input: {day: 2026-01-01}',
          'input: {day: "2026-01-01"}',
          test_file=True),
    _code('TX407', 'test-unused-mock', 'warning',
          'a mock or worker for a target no rule calls',
          ('A mock or a simulated worker for a target that no rule of the tree calls: it answers '
           'nothing, so the EXEC string it is meant for is probably written differently.'),
          'mocks:\n  "https://pricing.example.net/discounts": {output: {}}',
          'mocks:\n  "https://pricing.example.net/discount": {output: {}}',
          test_file=True),
    _code('TX408', 'test-unknown-op', 'error',
          'a rule test expects an op (in `ran` or `not_ran`) that the OPS tree does not have',
          ('A case expects an op in `ran` or `not_ran` that the OPS tree does not have (an op is '
           '`<stack>/<scope>/<op name>`): a `not_ran` of a misspelled op passes whatever runs.'),
          'expect:\n  not_ran: [orders/500/chrage]',
          'expect:\n  not_ran: [orders/500/charge]',
          test_file=True),
)

CODES: dict[str, CodeInfo] = {entry.code: entry for entry in _ENTRIES}
FIXABLE: frozenset[str] = frozenset(code for code, entry in CODES.items() if entry.fixable)


def info(code: str) -> CodeInfo:
    """The table entry of `code` (KeyError when unknown)."""
    return CODES[code]


def default_severity(code: str) -> str:
    entry = CODES.get(code)
    return entry.severity if entry else "error"
