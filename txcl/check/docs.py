"""Per-rule documentation: why each code exists, with a bad and a good example.

One entry per code of `txcl.codes`; `txcl rule TXnnn`, SARIF help texts and docs/check.md
read it. For tree-level codes the examples are file layouts (one `path: text` per line).
"""

from __future__ import annotations

import attrs

from txcl.codes import CODES


@attrs.frozen
class RuleDoc:
    code: str
    explanation: str
    bad: str
    good: str
    layout: bool = False  # examples are OPS tree layouts, not one rule text
    test_file: bool = False  # examples are parts of rule test files (YAML), not rules
    mcp_server: bool = False  # the finding needs a live MCP server (txcl check --mcp-schemas)

    def markdown(self) -> str:
        return (f"{self.explanation}\n\nBad:\n\n```\n{self.bad}\n```\n\nGood:\n\n```\n{self.good}\n```\n")

    def text(self) -> str:
        info = CODES[self.code]
        indent = lambda s: "\n".join("    " + line for line in s.splitlines())
        fixable = " (safe fix: txcl check --fix)" if self.code in ("TX201", "TX301", "TX302") else ""
        return (f"{self.code} {info.name} ({info.severity}){fixable}\n\n{self.explanation}\n\n"
                f"Bad:\n{indent(self.bad)}\n\nGood:\n{indent(self.good)}\n")


def _d(code: str, explanation: str, bad: str, good: str, layout: bool = False, test_file: bool = False,
       mcp_server: bool = False) -> RuleDoc:
    return RuleDoc(code, " ".join(explanation.split()), bad.strip("\n"), good.strip("\n"), layout, test_file,
                   mcp_server)


_ENTRIES = (
    _d("TX001", """A character that cannot start a token at this place. Only ASCII is allowed outside
        strings, comments, regex bodies and quoted path segments; `{ } ; : + ? $ % ^ ~` and others
        have no meaning in TXCL.""",
       'WHEN .total > 10;', 'WHEN .total > 10'),
    _d("TX002", """The file must be valid UTF-8 and must not contain NUL characters.""",
       'EMIT .name = "caf\\xe9"   (saved as Latin-1)', 'EMIT .name = "café"   (saved as UTF-8)'),
    _d("TX003", """A string literal is not closed before the end of the file.""",
       'EMIT .greeting = "hello', 'EMIT .greeting = "hello"'),
    _d("TX004", """A regex literal must be closed with `/` on the line where it starts.""",
       'WHEN .path =~ /^\\/api', 'WHEN .path =~ /^\\/api/'),
    _d("TX005", """The pattern is not valid RE2 syntax (RE2 has no backreferences or lookaround).""",
       'WHEN .name =~ /(a)\\1/', 'WHEN .name =~ /(aa)/'),
    _d("TX006", """Text that starts like a number but is not one: numbers are `-digits` or
        `-digits.digits`, with no exponent, hexadecimal or arithmetic.""",
       'WHEN .size > 1e5', 'WHEN .size > 100000'),
    _d("TX007", """Integer literals must fit in a signed 64-bit integer; floats must be finite.""",
       'WHEN .n > 99999999999999999999', 'WHEN .n > 9223372036854775807'),
    _d("TX008", """A path needs a letter or `_` after `.` or `@`, and no empty segments.""",
       'WHEN .order..total > 5', 'WHEN .order.total > 5'),
    _d("TX009", """A quoted path segment must follow `.`, end the path or be followed by `.`, be
        non-empty, and close on its line.""",
       'WHEN .labels."app > 1', 'WHEN .labels."app.kubernetes.io/name" == "shop"'),
    _d("TX010", """After a complete clause only a clause keyword (or, inside LOOP, a modifier) or
        the end of the file may follow. Two conditions need `&&`, `||` or `,` between them.""",
       'WHEN .tier == "gold" .active == true', 'WHEN .tier == "gold" && .active == true'),
    _d("TX011", """WHEN, SELECT, PRIORITY, EXEC and LOOP may each appear once.""",
       'WHEN .a == 1\nWHEN .b == 2', 'WHEN .a == 1 && .b == 2'),
    _d("TX012", """`FN`, `LET`, `IF`, `ELSE` and `RETURN` are reserved for future use.""",
       'IF .a == 1', 'WHEN .a == 1'),
    _d("TX013", """SET, EMIT and LOOP SET assign to a path (`.name` or `@name`).""",
       'EMIT total = 1', 'EMIT .total = 1'),
    _d("TX014", """An assignment or WITH pair needs `=` between target and value.""",
       'SET .order.currency "EUR"', 'SET .order.currency = "EUR"'),
    _d("TX015", """A value is a string, number, true, false, an array, a path or a call. `null` and
        object literals are not values: use `&json("null")` or `&object(...)`.""",
       'EMIT .reason = null', 'EMIT .reason = &json("null")'),
    _d("TX016", """Array literals hold literals only, separated by commas.""",
       'EMIT .ids = [.a, .b]', 'EMIT .ids = &array(.a, .b)'),
    _d("TX017", """A call is `&name(` with no space, arguments separated by commas, closed by `)`.""",
       'EMIT .id = &uuid', 'EMIT .id = &uuid()'),
    _d("TX018", """A WITH item starts with a key such as `timeout` or `secrets.token`; keywords and
        `@` paths are not keys.""",
       'WITH "timeout" = "3s"', 'WITH timeout = "3s"'),
    _d("TX019", """EXEC takes one string literal.""",
       'EXEC txco://noop', 'EXEC "txco://noop"'),
    _d("TX020", """PRIORITY takes one integer literal in the signed 64-bit range.""",
       'PRIORITY high', 'PRIORITY 10'),
    _d("TX021", """SELECT needs `*` or source paths; `*` stands alone; AS needs a destination.""",
       'SELECT *, .id', 'SELECT *'),
    _d("TX022", """A condition starts with a path, `(` or `!`.""",
       'WHEN "gold" == .tier', 'WHEN .tier == "gold"'),
    _d("TX023", """A path in a condition must be followed by a comparison operator.""",
       'WHEN .active', 'WHEN .active == true'),
    _d("TX024", """`&&`, `||`, `,` and `!` need a condition after them.""",
       'WHEN .a == 1 &&', 'WHEN .a == 1 && .b == 2'),
    _d("TX025", """Parentheses must hold a condition and be closed.""",
       'WHEN (.a == 1 || .b == 2', 'WHEN (.a == 1 || .b == 2)'),
    _d("TX026", """The right side of `==`, `!=`, `<`, `<=`, `>`, `>=` is a constant: a string,
        number, boolean, null or a call with literal arguments. Comparing two paths is not
        possible; compute the comparison earlier and test the result.""",
       'WHEN .used == .limit', 'WHEN .used_at_limit == true'),
    _d("TX027", """`=~` and `!~` take a /regex/, a string (used as the pattern) or null.""",
       'WHEN .name =~ 5', 'WHEN .name =~ /^[0-9]+$/'),
    _d("TX028", """Calls in WHEN and LOOP UNTIL may use literal arguments only; a path argument is
        not read there.""",
       'WHEN .len > &len(.items)', 'EMIT .count = &len(.items)\n# and at a later scope:\nWHEN .count > 3'),
    _d("TX029", """LOOP needs an UNTIL condition that ends it.""",
       'EXEC "https://api.example.net/poll"\nLOOP MAX 5',
       'EXEC "https://api.example.net/poll"\nLOOP UNTIL .status == "done" MAX 5'),
    _d("TX030", """LOOP MAX takes a positive integer literal.""",
       'EXEC "txco://echo"\nLOOP UNTIL .done == true MAX 0', 'EXEC "txco://echo"\nLOOP UNTIL .done == true MAX 5'),
    _d("TX031", """LOOP EVERY takes a duration such as "250ms" or a whole number of milliseconds,
        not negative.""",
       'EXEC "txco://echo"\nLOOP UNTIL .done == true EVERY "soon"',
       'EXEC "txco://echo"\nLOOP UNTIL .done == true EVERY "250ms"'),
    _d("TX032", """Each LOOP modifier may be given once.""",
       'EXEC "txco://echo"\nLOOP UNTIL .done == true MAX 3 MAX 5',
       'EXEC "txco://echo"\nLOOP UNTIL .done == true MAX 5'),
    _d("TX033", """Parentheses, brackets, function calls and `!` may nest at most 64 levels deep in
one rule. Deeper nesting is refused before parsing, so no tool that walks the rule (parser,
checker, formatter, language server) runs out of stack; split the expression with SET.""",
       'WHEN ' + '(' * 65 + '.a == 1' + ')' * 65,
       'WHEN (.a == 1 && (.b == 2 || .c == 3))'),
    _d("TX034", """A rule file may be at most 1 MiB (1,048,576 bytes of UTF-8). A rule is a few lines;
a bigger file is almost always data saved under the wrong name, and refusing it keeps a stray
multi-megabyte file from costing gigabytes of memory to parse. The position shown is where the
limit is crossed.""",
       'EMIT .table = ["…a million entries…"]', 'EMIT .table = &json(.table_text)'),
    _d("TX101", """The function does not exist in the registry (names are case-sensitive).""",
       'EMIT .n = &lenght(.items)', 'EMIT .n = &len(.items)'),
    _d("TX102", """The call has an argument count the function never accepts.""",
       'EMIT .n = &len(.a, .b)', 'EMIT .n = &len(.a)'),
    _d("TX103", """EXEC schemes are txco://, http(s)://, mcp+http(s)://…#tool, py://, goto:// or a bare
<stack>/<scope>.""",
       'EXEC "ftp://files.example.net/x"', 'EXEC "https://files.example.net/x"'),
    _d("TX104", """The EXEC target is malformed for its kind (empty, no host, bad module name …).""",
       'EXEC "py://my-module:run"', 'EXEC "py://my_module:run"'),
    _d("TX105", """A goto target is goto://<scope> or goto://<stack>/<scope>.""",
       'EXEC "goto://billing"', 'EXEC "goto://billing/100"'),
    _d("TX106", """A LOOP repeats the EXEC; without EXEC there is nothing to repeat.""",
       'LOOP UNTIL .done == true', 'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _d("TX107", """txco://noop returns nothing, so UNTIL could never turn true.""",
       'EXEC "txco://noop"\nLOOP UNTIL .done == true', 'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _d("TX108", """A stage jump cannot be repeated; loop on the op that produces the data.""",
       'EXEC "goto://300"\nLOOP UNTIL .done == true', 'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _d("TX109", """async and continuable ops leave the request, but a LOOP repeats inside it.""",
       'WITH mode = "async"\nEXEC "https://api.example.net/job"\nLOOP UNTIL .done == true',
       'EXEC "https://api.example.net/job"\nLOOP UNTIL .done == true'),
    _d("TX110", """join_at_scope defers an async op; it needs mode = "async".""",
       'WITH join_at_scope = 300\nEXEC "https://api.example.net/job"',
       'WITH mode = "async", join_at_scope = 300\nEXEC "https://api.example.net/job"'),
    _d("TX111", """Only http(s):// targets (a worker calls back) and mcp+http(s):// targets (txcl calls the
tool itself, durably) can run asynchronously.""",
       'WITH mode = "async"\nEXEC "txco://echo"', 'WITH mode = "async"\nEXEC "https://worker.example.net/job"'),
    _d("TX112", """Itemized awaits (each) need mode = "async" and into = "<path>".""",
       'WITH each = .items\nEXEC "https://worker.example.net/item"',
       'WITH mode = "async", each = .items, into = "results"\nEXEC "https://worker.example.net/item"'),
    _d("TX113", """An MCP target is the server's endpoint, then `#` and the name of the tool to call on it
(letters, digits, `_`, `-`, `.` and `/`). Run `txcl mcp doctor <endpoint>` to list a server's tools.""",
       'EXEC "mcp+https://tools.example.net/mcp"', 'EXEC "mcp+https://tools.example.net/mcp#summarize"'),
    _d("TX120", """Every rule file must sit under a numbered scope directory, else it is never loaded.""",
       'OPS/shop/discount.txcl', 'OPS/shop/0200_pricing/discount.txcl', layout=True),
    _d("TX121", """The first numbered directory needs a stack name in front of it.""",
       'OPS/0100/check.txcl', 'OPS/shop/0100/check.txcl', layout=True),
    _d("TX122", """Two files flatten to the same stack, scope and op name.""",
       'OPS/shop/0100_a/tax.txcl\nOPS/shop/0100_b/tax.txcl', 'OPS/shop/0100_a/tax.txcl\nOPS/shop/0100_b/vat.txcl',
       layout=True),
    _d("TX123", """Stack segments and op names use [A-Za-z0-9_-] (stack ≤ 128, name ≤ 64
        characters); scopes are at most 999999999.""",
       'OPS/my shop/0100/check.txcl', 'OPS/my-shop/0100/check.txcl', layout=True),
    _d("TX201", """A number with a leading zero is decimal here (012 is twelve) but octal in the
        reference implementation (ten). Write it without the zero so both agree.""",
       'WHEN .code == 012', 'WHEN .code == 12'),
    _d("TX202", """A WHEN with no condition matches everything, which is easy to mistake for a
        forgotten condition. Write `WHEN *` to say so, or add the condition.""",
       'WHEN\nEXEC "txco://echo"', 'WHEN *\nEXEC "txco://echo"'),
    _d("TX203", """WITH pairs are written in order into one object; a repeated key (or a key and one
        of its prefixes) silently replaces the earlier value.""",
       'WITH timeout = "3s", timeout = "5s"', 'WITH timeout = "5s"'),
    _d("TX204", """SET only writes missing paths, so a second SET of the same target never applies;
        in EMIT the later value overwrites the earlier one.""",
       'SET .currency = "EUR", .currency = "USD"', 'SET .currency = "EUR"'),
    _d("TX205", """Most of `_txc` is reserved to the runtime; EMIT, SET after SELECT, LOOP SET and
        @delete targets there are dropped. Writable: _txc.web.res, goto, halt, delete, telemetry,
        lmtp.res, llm.*, and ttl by EMIT.""",
       'EMIT @stack = "billing"', 'EMIT @goto = "billing/100"'),
    _d("TX206", """SET before SELECT only decorates the op's own input, so control fields written
        there (halt, goto, delete, web.res) never reach the flow.""",
       'SET @halt = true', 'EMIT @halt = true'),
    _d("TX207", """A call whose arguments are all literals is evaluated by the checker; this one
        always fails at run time (in WHEN the comparison is then always false).""",
       'EMIT .ratio = &div(5, 0)', 'EMIT .ratio = &div(5, 2)'),
    _d("TX208", """A try_ call never fails, but with an argument count its base never accepts it
        always returns null.""",
       'EMIT .v = &try_json(.a, .b)', 'EMIT .v = &try_json(.a)'),
    _d("TX209", """A literal value of a WITH key the runtime consumes has the wrong type or range;
        the runtime ignores it (or uses it literally).""",
       'WITH timeout = "three seconds"', 'WITH timeout = "3s"'),
    _d("TX210", """A missing path compares as the empty string, so `== false` and `!= true` are true
        before the op ever sets the field: the loop may stop after one pass.""",
       'EXEC "https://api.example.net/poll"\nLOOP UNTIL .pending == false',
       'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _d("TX211", """The runtime refuses loops whose MAX is above --op-loop-max (1000 by default).""",
       'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true MAX 5000',
       'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true MAX 500'),
    _d("TX212", """txco://mock answers the same fixture on every pass, so the loop cannot progress.""",
       'EXEC "txco://mock"\nLOOP UNTIL .done == true', 'EXEC "https://api.example.net/poll"\nLOOP UNTIL .done == true'),
    _d("TX213", """A sibling rule at the same stage halts unconditionally; a loop stops as soon as a
        sibling finished with a truthy halt, so it never gets past its first pass.""",
       'OPS/s/0100/poll.txcl: EXEC "https://api.example.net/poll" LOOP UNTIL .done == true\n'
       'OPS/s/0100/stop.txcl: EMIT @halt = true',
       'OPS/s/0100/poll.txcl: EXEC "https://api.example.net/poll" LOOP UNTIL .done == true\n'
       'OPS/s/0200/stop.txcl: EMIT @halt = true', layout=True),
    _d("TX214", """A WITH key that the runtime does not read, one or two edits away from one it
        does. Keys the runtime does not consume go to the op as its own settings, so a misspelled
        `join_at_scope` turns a deferred op into a plain async one, and nothing fails.""",
       'WITH mode = "async", join_at_scop = 400\nEXEC "https://w.example.net/job"',
       'WITH mode = "async", join_at_scope = 400\nEXEC "https://w.example.net/job"'),
    _d("TX215", """To find calls that always fail (TX207), `txcl check` evaluates the calls whose
        arguments are all literals. Their work per file is bounded (about four million characters
        and elements built); past that it stops evaluating, says where, and the remaining calls of
        the file are not checked for TX207.""",
       '\n'.join(['EMIT .a%d = &to_json(&split(&repeat("ab", 524288), ""))' % i for i in range(3)]),
       'EMIT .a = &to_json(&split(&repeat("ab", 4), ""))'),
    _d("TX220", """join_at_scope at or below the op's own scope does not defer anything: the op
        behaves as a plain async op and suspends at its own scope.""",
       'OPS/s/0300/job.txcl: WITH mode = "async", join_at_scope = 200 EXEC "https://w.example.net/job"',
       'OPS/s/0300/job.txcl: WITH mode = "async", join_at_scope = 500 EXEC "https://w.example.net/job"',
       layout=True),
    _d("TX221", """No scope at or above join_at_scope exists in the stack (or the stacks it
        inherits), so the deferred result is never merged unless the flow jumps.""",
       'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 900 EXEC "https://w.example.net/job"\n'
       'OPS/s/0200/next.txcl: EMIT .x = 1',
       'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 200 EXEC "https://w.example.net/job"\n'
       'OPS/s/0200/next.txcl: EMIT .x = 1', layout=True),
    _d("TX222", """A scope the flow runs between a deferred op's dispatch and its join reads what
        the op writes when it joins (its `into`, or what its EMIT and SET POST write), which holds
        nothing yet. The scopes are those after the op in order and any a literal `@goto` or
        stage-jump EXEC in the same stack reaches before the join.""",
       'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 300, into = "job" EXEC "https://w.example.net/job"\n'
       'OPS/s/0200/use.txcl: WHEN .job.ok == true\nOPS/s/0300/next.txcl: EMIT .x = 1',
       'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 300, into = "job" EXEC "https://w.example.net/job"\n'
       'OPS/s/0300/use.txcl: WHEN .job.ok == true', layout=True),
    _d("TX223", """The join scope also holds its own async op. This works here (suspends are keyed
        by visit) but the reference implementation stalls on it.""",
       'OPS/s/0100/a.txcl: WITH mode = "async", join_at_scope = 300 EXEC "https://w.example.net/a"\n'
       'OPS/s/0300/b.txcl: WITH mode = "async" EXEC "https://w.example.net/b"',
       'OPS/s/0100/a.txcl: WITH mode = "async", join_at_scope = 300 EXEC "https://w.example.net/a"\n'
       'OPS/s/0300/c.txcl: EMIT .x = 1\nOPS/s/0400/b.txcl: WITH mode = "async" EXEC "https://w.example.net/b"',
       layout=True),
    _d("TX224", """A join option (`join_deadline`, `on_join_deadline`, `join_wait`) on an op that does
        not defer its join does nothing; so does `on_join_deadline` without `join_deadline`, and a
        `join_wait` as long as the deadline never ends before it.""",
       'OPS/s/0100/job.txcl: WITH mode = "async", join_deadline = "5s" EXEC "https://w.example.net/job"',
       'OPS/s/0100/job.txcl: WITH mode = "async", join_at_scope = 300, join_deadline = "5s" '
       'EXEC "https://w.example.net/job"', layout=True),
    _d("TX230", """A rule without a condition that jumps to its own stage repeats until the
        request's budget runs out.""",
       'OPS/s/0100/again.txcl: EMIT @goto = "s/100"',
       'OPS/s/0100/again.txcl: WHEN .retry == true EMIT @goto = "s/100", .retry = false', layout=True),
    _d("TX231", """Two stages that jump to each other unconditionally ping-pong until the budget
        runs out.""",
       'OPS/s/0100/a.txcl: EXEC "goto://200"\nOPS/s/0200/b.txcl: EXEC "goto://100"',
       'OPS/s/0100/a.txcl: EXEC "goto://200"\nOPS/s/0200/b.txcl: WHEN .again == true EXEC "goto://100"',
       layout=True),
    _d("TX232", """A jump into another stack does not change _txc.stack, and outstanding deferred
        joins resolve at the first scope of the new stack.""",
       'OPS/shop/0100/go.txcl: EMIT @goto = "billing/100"\nOPS/billing/0100/bill.txcl: EMIT .billed = true',
       'OPS/shop/0100/go.txcl: EMIT @goto = "shop/300"\nOPS/shop/0300/next.txcl: EMIT .x = 1', layout=True),
    _d("TX233", """A literal `@goto` or stage-jump EXEC names a stack the OPS tree does not have. At
        run time such a jump fails the request (`txcl_bad_goto`).""",
       'OPS/shop/0100/go.txcl: EMIT @goto = "shp/200"\nOPS/shop/0200/next.txcl: EMIT .x = 1',
       'OPS/shop/0100/go.txcl: EMIT @goto = "shop/200"\nOPS/shop/0200/next.txcl: EMIT .x = 1', layout=True),
    _d("TX240", """A file in the OPS tree that is neither a rule, a fixture (mock-request.json,
        mock-response.json), a .md file nor a FILES/ asset. Extra patterns can be allowed with
        `allow` in the configuration.""",
       'OPS/shop/0100/check.txcl.bak', 'OPS/shop/0100/check.txcl', layout=True),
    _d("TX260", """A schema file of the OPS tree — a stack's `OPS/<stack>/schema.json` or an op's
        `<name>.schema.json` beside `<name>.txcl` — cannot be used: it cannot be read, is not JSON,
        is not a valid JSON Schema (2020-12), holds a `$ref` that leads nowhere (only references
        inside the file and to sibling files of the tree are followed; nothing is fetched), or (a
        stack's) lacks `$defs.input`. The finding points at the line and column of the problem.""",
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "objet"}}}\nOPS/shop/0100/a.txcl: EMIT .a = 1',
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object"}}}\nOPS/shop/0100/a.txcl: EMIT .a = 1',
       layout=True),
    _d("TX261", """In a typed stack (one with a schema.json, its own or an ancestor's), a path is
        read that nothing provides on any walk: the stack's `$defs.input` does not declare it,
        no op's `$defs.output` answers it and no rule writes it. A missing path reads as the zero
        value, so such a condition is silently false forever — usually a misspelling. An object
        schema that lists `properties` and omits `additionalProperties` counts as closed;
        `additionalProperties: true` (or a schema), `patternProperties`, an object schema that
        lists nothing, and an op without a schema accept any path below them.""",
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: WHEN .ordr.total > 100 EMIT .label = "big"',
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: WHEN .order.total > 100 EMIT .label = "big"\nOPS/shop/0100/e.txcl: EMIT .label = "std"',
       layout=True),
    _d("TX262", """In a typed stack, a path is read before anything provides it on every walk that
        reaches the read: it is written at a later scope, or answered by a deferred op that has
        not joined yet. Rules of one scope see the envelope as the scope began; what they write
        is there from the next scope on.""",
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/a.txcl: WHEN .vip == true EMIT .label = "vip"\nOPS/shop/0100/b.txcl: EMIT .label = "std"\nOPS/shop/0200/b.txcl: EMIT .vip = true',
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/b.txcl: EMIT .vip = true, .label = "std"\nOPS/shop/0200/a.txcl: WHEN .vip == true EMIT .label = "vip"',
       layout=True),
    _d("TX263", """In a typed stack, a comparison can never be true (or never false) for the values
        the path can hold, under TXCL's coercions (the literal on the right decides): a string
        against a number that no number's text can equal, a value outside the path's `enum`, a
        number against a boolean, a regex against an object or array, `<` on an object.""",
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: WHEN .order.status == "shiped" EMIT .label = "sent"\nOPS/shop/0100/e.txcl: EMIT .label = "std"',
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: WHEN .order.status == "shipped" EMIT .label = "sent"\nOPS/shop/0100/e.txcl: EMIT .label = "std"',
       layout=True),
    _d("TX264", """In a typed stack, a write (EMIT, SET POST, a SELECT destination) puts a value at a
        path whose declared type — by the stack's `$defs.output`, or `$defs.input` when there is
        no output schema — the value can never have, or a literal outside its `enum`.""",
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: EMIT .discount = "ten", .label = "x"',
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: EMIT .discount = 10, .label = "x"',
       layout=True),
    _d("TX265", """A member the stack's `$defs.output` requires can be missing when a walk ends:
        some walk through the stack writes it only under a condition, or not at all. The
        finding points at the `required` entry in schema.json.""",
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: WHEN .order.total > 100 EMIT .label = "big"',
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: WHEN .order.total > 100 EMIT .label = "big"\nOPS/shop/0200/z.txcl: SELECT * SET .label = "std"',
       layout=True),
    _d("TX266", """An op's `<name>.schema.json` declares its `$defs.input`, and the rule's SELECT
        never gives a member it requires, or gives one a type it requires differently. Without
        SELECT (or with `SELECT *`) the op is sent the whole envelope, which is checked instead.""",
       'OPS/s/schema.json: {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}}\n'
       'OPS/s/0100/score.schema.json: {"$defs": {"input": {"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]}}}\n'
       'OPS/s/0100/score.txcl: SELECT .id AS .client EXEC "https://score.example.net/"',
       'OPS/s/schema.json: {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}}\n'
       'OPS/s/0100/score.schema.json: {"$defs": {"input": {"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]}}}\n'
       'OPS/s/0100/score.txcl: SELECT .id AS .customer EXEC "https://score.example.net/"',
       layout=True),
    _d("TX267", """In a typed stack, a function gets an argument of a type it never accepts, so the
        call always fails (and its clause with it): `&len` of a number, `&sha256` of an object,
        `&add` of an array.""",
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: EMIT .label = &concat("n", &len(.order.total))',
       'OPS/shop/schema.json: {"$defs": {"input": {"type": "object", "properties": {"order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["total", "status"]}}, "required": ["order"]}, "output": {"type": "object", "properties": {"discount": {"type": "integer"}, "label": {"type": "string"}}, "required": ["label"]}}}' + '\nOPS/shop/0100/d.txcl: EMIT .label = &concat("n", &len(.order.status))',
       layout=True),
    _d("TX268", """A SELECT item writes a path the op's own answer provides (its schema's
        `$defs.output`, or its `into`). SELECT's values are written over the answer (a missing
        source gives `""`), so the answer's value is lost.""",
       'OPS/s/schema.json: {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}}\n'
       'OPS/s/0100/score.schema.json: {"$defs": {"output": {"type": "object", "properties": {"score": {"type": "number"}}}}}\n'
       'OPS/s/0100/score.txcl: SELECT .id, .score EXEC "https://score.example.net/"',
       'OPS/s/schema.json: {"$defs": {"input": {"type": "object", "properties": {"id": {"type": "string"}}}}}\n'
       'OPS/s/0100/score.schema.json: {"$defs": {"output": {"type": "object", "properties": {"score": {"type": "number"}}}}}\n'
       'OPS/s/0100/score.txcl: SELECT .id EXEC "https://score.example.net/"',
       layout=True),
    _d("TX250", """Reported by `txcl check --mcp-schemas`, which asks each MCP server named by an
        `mcp+` target for its tools: the server does not list the tool after `#`. `txcl mcp doctor
        <endpoint>` prints the tools it has.""",
       'EXEC "mcp+https://tools.example.net/mcp#sumarize"', 'EXEC "mcp+https://tools.example.net/mcp#summarize"',
       mcp_server=True),
    _d("TX251", """Reported by `txcl check --mcp-schemas`: the op's SELECT is the tool's arguments, and
        it gives none of an argument the tool's input schema lists as required. Select it under the
        argument's name. A rule without SELECT (or with `SELECT *`) sends the whole envelope and is
        not checked.""",
       'SELECT .doc.body AS .content\nEXEC "mcp+https://tools.example.net/mcp#summarize"',
       'SELECT .doc.body AS .text\nEXEC "mcp+https://tools.example.net/mcp#summarize"', mcp_server=True),
    _d("TX252", """Reported by `txcl check --mcp-schemas` when an MCP server cannot be asked for its
        tools (it is unreachable, or the URL is not an MCP endpoint); its ops are not checked.""",
       'EXEC "mcp+https://tools.example.net/not-mcp#summarize"',
       'EXEC "mcp+https://tools.example.net/mcp#summarize"', mcp_server=True),
    _d("TX301", """Clauses read best in the canonical order WHEN, SET, SELECT, SET, WITH, PRIORITY,
        EXEC, LOOP, EMIT. The fix reorders them and never moves a SET across SELECT.""",
       'EXEC "txco://echo"\nWHEN .a == 1', 'WHEN .a == 1\nEXEC "txco://echo"'),
    _d("TX302", """A SET, EMIT or WITH keyword repeated later continues the same list; one clause
        is clearer. The fix joins them.""",
       'EMIT .a = 1\nEMIT .b = 2', 'EMIT .a = 1, .b = 2'),
    _d("TX303", """A `# noqa` comment that suppresses nothing hides nothing but noise; remove it
        (or the codes it no longer needs).""",
       'EMIT .a = 1  # noqa: TX201', 'EMIT .a = 1'),
    _d("TX400", """A rule test file (`*.test.yaml`, `*.test.yml`, `*.test.json`) must be valid YAML or
        JSON in UTF-8. The position is where the parser stopped.""",
       'cases:\n  - name: vip\n    input: {order: {tier: vip}', 'cases:\n  - name: vip\n    input: {order: {tier: vip}}',
       test_file=True),
    _d("TX401", """A key that rule test files do not have, usually a typo: the message suggests the
        closest known key. The file's keys are `stack` and `cases`; a case has `name`, `input` or
        `input_file`, `stack`, `clock`, `mocks`, `workers` and `expect`.""",
       'cases:\n  - name: vip\n    inptu: {order: {}}', 'cases:\n  - name: vip\n    input: {order: {}}',
       test_file=True),
    _d("TX402", """A value of the wrong type (a list where a mapping belongs, a number for a name) or
        outside its choices (`expect.status` is one of completed, halted, failed, suspended).""",
       'cases:\n  - name: vip\n    expect: {status: done}', 'cases:\n  - name: vip\n    expect: {status: completed}',
       test_file=True),
    _d("TX403", """The case runs on a stack the OPS tree does not have (or names none while the
        workspace has several). Give `stack:` at the top of the file or in the case.""",
       'stack: shpo\ncases:\n  - name: vip', 'stack: shop\ncases:\n  - name: vip', test_file=True),
    _d("TX404", """Every case of a file has its own name, so reports and `-k` can tell them apart.""",
       'cases:\n  - name: vip\n  - name: vip', 'cases:\n  - name: vip\n  - name: vip with coupon',
       test_file=True),
    _d("TX405", """Durations (`after`) are written like `"250ms"`, `"5m"`, `"2h"` or milliseconds
        (`after` also takes `never`); `clock` is an RFC 3339 time.""",
       'workers:\n  "https://w.example/start": {after: soon}',
       'workers:\n  "https://w.example/start": {after: 5m}', test_file=True),
    _d("TX406", """Inputs, outputs and expected values must be JSON. YAML has more (dates, times);
        quote them. An `input` (or the file named by `input_file`) must be a JSON object.""",
       'input: {day: 2026-01-01}', 'input: {day: "2026-01-01"}', test_file=True),
    _d("TX407", """A mock or a simulated worker for a target that no rule of the tree calls: it
        answers nothing, so the EXEC string it is meant for is probably written differently.""",
       'mocks:\n  "https://pricing.example.net/discounts": {output: {}}',
       'mocks:\n  "https://pricing.example.net/discount": {output: {}}', test_file=True),
    _d("TX408", """A case expects an op in `ran` or `not_ran` that the OPS tree does not have (an op
        is `<stack>/<scope>/<op name>`): a `not_ran` of a misspelled op passes whatever runs.""",
       'expect:\n  not_ran: [orders/500/chrage]', 'expect:\n  not_ran: [orders/500/charge]', test_file=True),
)

DOCS: dict[str, RuleDoc] = {entry.code: entry for entry in _ENTRIES}


def doc(code: str) -> RuleDoc | None:
    return DOCS.get(code.upper())
