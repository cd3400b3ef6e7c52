"""Per-rule load checks TX101–TX112 and EXEC target classification."""

from __future__ import annotations

import pytest

from txcl.errors import TxclSyntaxError
from txcl.syntax.parser import parse_rule
from txcl.syntax.targets import ExecTarget, TargetError, classify_exec_target


def _diags(source: str):
    with pytest.raises(TxclSyntaxError) as info:
        parse_rule(source, "s.txcl")
    return [(d.code, d.message, d.span.as_list(), d.hint) for d in info.value.diagnostics]


def test_tx101_unknown_function_with_suggestion_anywhere():
    diags = _diags('WHEN .a == &nwo()\nEMIT .x = &concat(&lenght("a"))')
    assert diags[0][:3] == ("TX101", "unknown function &nwo", [1, 12, 1, 16])
    assert diags[0][3] == "did you mean &now?"
    assert diags[1][:3] == ("TX101", "unknown function &lenght", [2, 19, 2, 26])


def test_tx101_in_every_value_position():
    source = ('SET .a = &zz1() SELECT .s DEFAULT &zz2() SET .b = &zz3() WITH k = &zz4() '
              'EXEC "https://x.example" LOOP UNTIL .u == &zz5() SET .c = &zz6() '
              "EMIT .d = [1] .e = &zz7()")
    assert [d[1] for d in _diags(source)] == [f"unknown function &zz{i}" for i in range(1, 8)]


def test_tx101_include_is_not_a_function():
    assert _diags('SET .x = &include("f")')[0][1] == "unknown function &include"


def test_tx102_wrong_arity_including_nested():
    diags = _diags("WHEN .a == &add(1) SET .x = &now(&add(1, 2, 3))")
    assert [(d[0], d[1]) for d in diags] == [
        ("TX102", "&add takes 2 arguments, got 1"),
        ("TX102", "&add takes 2 arguments, got 3"),
    ]
    assert diags[0][2] == [1, 12, 1, 19]


def test_tx102_not_for_try_variants():
    rule = parse_rule('SET .x = &try_get(1, 2, 3, 4, 5), .y = &try_json()')
    assert rule.set_pre[1].value.name == "try_json"


@pytest.mark.parametrize("target,code,message", [
    ("foo://x", "TX103", "EXEC scheme 'foo://' is not supported; use txco://, http(s)://, "
     "mcp+http(s)://…#tool, queue://, nats://, py://, goto:// or <stack>/<scope>"),
    ("ai://model", "TX103", "EXEC scheme 'ai://' is not supported; use txco://, http(s)://, "
     "mcp+http(s)://…#tool, queue://, nats://, py://, goto:// or <stack>/<scope>"),
    ("mcp+https://x.example", "TX113", 'EXEC "mcp+https://x.example": an MCP target names its tool '
     'after "#" (mcp+https://x.example#<tool>)'),
    ("mcp+http://x.example/mcp#", "TX113", 'EXEC "mcp+http://x.example/mcp#": an MCP target names its '
     'tool after "#" (mcp+http://x.example/mcp#<tool>)'),
    ("mcp+http://x.example/mcp#a b", "TX104", 'EXEC "mcp+http://x.example/mcp#a b": not an absolute URL '
     "with a host"),
    ("mcp+http://x.example/mcp#a?b", "TX113", 'EXEC "mcp+http://x.example/mcp#a?b": the tool name "a?b" '
     'may hold letters, digits, "_", "-", "." and "/" (at most 128)'),
    ("mcp+https:///mcp#t", "TX104", 'EXEC "mcp+https:///mcp#t": not an absolute URL with a host'),
    ("", "TX104", 'EXEC "": the target is empty'),
    ("hello-world", "TX104", 'EXEC "hello-world": not a target; use txco://<name>, http(s)://…, '
     "py://<module>:<function>, goto://<scope> or <stack>/<scope>"),
    ("txco://", "TX104", 'EXEC "txco://": a txco:// target needs a builtin name'),
    ("txco://a b", "TX104", 'EXEC "txco://a b": a builtin name cannot contain whitespace'),
    ("https://", "TX104", 'EXEC "https://": not an absolute URL with a host'),
    ("http://x.example:99999/", "TX104",
     'EXEC "http://x.example:99999/": not an absolute URL with a host'),
    ("py://mod", "TX104", 'EXEC "py://mod": a Python target is py://<module>:<function> '
     "(dotted module, function name)"),
    ("py://a..b:f", "TX104", 'EXEC "py://a..b:f": a Python target is py://<module>:<function> '
     "(dotted module, function name)"),
    ("goto://", "TX105", 'EXEC "goto://": a goto target is goto://<scope> or '
     "goto://<stack>/<scope>"),
    ("goto://a//100", "TX105", 'EXEC "goto://a//100": a goto target is goto://<scope> or '
     "goto://<stack>/<scope>"),
    ("goto://1234567890", "TX105", 'EXEC "goto://1234567890": a goto target is goto://<scope> '
     "or goto://<stack>/<scope>"),
    ("a b/100", "TX104", 'EXEC "a b/100": not a target; use txco://<name>, http(s)://…, '
     "py://<module>:<function>, goto://<scope> or <stack>/<scope>"),
])
def test_tx103_to_tx105_exec_targets(target, code, message):
    diags = _diags(f'EXEC "{target}"')
    assert diags[0][:2] == (code, message)
    assert diags[0][2] == [1, 6, 1, 8 + len(target)]


@pytest.mark.parametrize("target,kind,fields", [
    ("txco://noop", "builtin", {"builtin": "noop"}),
    ("https://hook.example.com/p?q=1", "http", {"url": "https://hook.example.com/p?q=1"}),
    ("HTTP://x.example", "http", {}),
    ("py://pkg.mod:run_it", "py", {"module": "pkg.mod", "function": "run_it"}),
    ("goto://300", "goto", {"stack": None, "scope": 300}),
    ("goto://billing/eu/0100", "goto", {"stack": "billing/eu", "scope": 100}),
    ("billing/100", "stage", {"stack": "billing", "scope": 100}),
])
def test_classify_valid_targets(target, kind, fields):
    result = classify_exec_target(target)
    assert isinstance(result, ExecTarget)
    assert result.kind == kind and result.target == target
    for name, value in fields.items():
        assert getattr(result, name) == value


def test_classify_trust_and_stage_jumps():
    assert classify_exec_target("txco://echo").trusted
    assert not classify_exec_target("txco://mock").trusted
    assert not classify_exec_target("https://x.example").trusted
    assert classify_exec_target("txco://route/x").is_stage_jump
    assert classify_exec_target("a/1").is_stage_jump
    assert isinstance(classify_exec_target("x" * 129 + "/1"), TargetError)


def test_tx106_loop_without_exec():
    assert _diags("LOOP UNTIL .a == 1") == [
        ("TX106", "LOOP has no EXEC to repeat", [1, 1, 1, 5], None)]


def test_tx107_loop_on_noop():
    assert _diags('EXEC "txco://noop" LOOP UNTIL .a == 1')[0][:2] == (
        "TX107", "LOOP over txco://noop repeats an op that returns nothing; UNTIL could never "
        "turn true")


@pytest.mark.parametrize("target", ["goto://100", "shop/200", "txco://route"])
def test_tx108_loop_on_stage_jump(target):
    assert _diags(f'EXEC "{target}" LOOP UNTIL .a == 1')[0][:2] == (
        "TX108", f'LOOP cannot repeat a stage jump ("{target}"); put the LOOP on the op that '
        "produces the data")


@pytest.mark.parametrize("mode", ["async", "continuable"])
def test_tx109_loop_with_mode(mode):
    diags = _diags(f'EXEC "https://x.example" WITH mode = "{mode}" LOOP UNTIL .a == 1')
    assert diags[0][:2] == ("TX109", f'mode = "{mode}" leaves the request but a LOOP repeats '
                            "inside it; drop one of them")


def test_loop_with_sync_mode_is_fine():
    assert parse_rule('EXEC "https://x.example" WITH mode = "sync" LOOP UNTIL .a == 1').loop


@pytest.mark.parametrize("with_,message", [
    ("join_at_scope = 300", 'join_at_scope (= 300) requires mode = "async" '
     "(mode here: sync, the default)"),
    ('join_at_scope = 300, mode = "sync"',
     'join_at_scope (= 300) requires mode = "async" (mode here: sync)'),
    ('join_at_scope = 300, mode = "continuable"',
     'join_at_scope (= 300) requires mode = "async"; it is not honored with '
     'mode = "continuable"'),
])
def test_tx110_join_needs_async(with_, message):
    assert _diags(f'EXEC "https://x.example" WITH {with_}')[0][:2] == ("TX110", message)


def test_join_with_async_or_runtime_mode_is_fine():
    parse_rule('EXEC "https://x.example" WITH join_at_scope = 300, mode = "async"')
    parse_rule('EXEC "https://x.example" WITH join_at_scope = 300, mode = .m')
    parse_rule('EXEC "https://x.example" WITH join_at_scope = .j')


def test_tx111_async_needs_http():
    assert _diags('EXEC "py://m:f" WITH mode = "async"')[0][:2] == (
        "TX111", 'mode = "async" needs an http(s)://, mcp+http(s)://, queue:// or nats:// target; "py://m:f" cannot run '
        "asynchronously")


@pytest.mark.parametrize("with_, shown", [
    ("", "sync, the default"),
    ('WITH mode = "continuable"', "continuable"),
    ('WITH mode = "sync"', "sync"),
])
def test_tx115_queue_needs_async(with_, shown):
    assert _diags(f'EXEC "queue://resize" {with_}')[0][:2] == (
        "TX115", f'"queue://resize" waits for a worker to take the job: it needs mode = "async" (mode here: {shown})')
    assert _diags(f'EXEC "nats://img.resize" {with_}')[0][0] == "TX115"


def test_queue_targets():
    from txcl.syntax.targets import classify_exec_target

    target = classify_exec_target("queue://img.resize-2")
    assert (target.kind, target.queue, target.transport) == ("queue", "img.resize-2", "queue")
    for bad in ("queue://", "queue://a/b", "queue://a b", "queue://" + "x" * 129):
        assert classify_exec_target(bad).code == "TX104", bad
    parse_rule('EXEC "queue://resize" WITH mode = "async", each = .items, into = "out"')
    parse_rule('EXEC "queue://resize" WITH mode = .m')  # decided at run time
    target = classify_exec_target("nats://img.resize-2")
    assert (target.kind, target.queue, target.transport) == ("nats", "img.resize-2", "nats")
    for bad in ("nats://", "nats://a.*", "nats://a.>", "nats://a..b", "nats://.a", "nats://a b"):
        assert classify_exec_target(bad).code == "TX104", bad


def test_async_mcp_target_is_fine():
    rule = parse_rule('EXEC "mcp+https://tools.example/mcp#summarize" WITH mode = "async", join_at_scope = 300')
    assert rule.exec.target == "mcp+https://tools.example/mcp#summarize"


@pytest.mark.parametrize("with_", ["each = .items", 'each = .items, mode = "async"',
                                   'each = .items, into = "r"'])
def test_tx112_each_needs_async_and_into(with_):
    assert _diags(f'EXEC "https://x.example" WITH {with_}')[0][:2] == (
        "TX112", 'each needs mode = "async" and into = "<path>"')


def test_itemized_await_is_fine():
    rule = parse_rule('EXEC "https://x.example" WITH each = .items, mode = "async", '
                      'into = "results", window = 8')
    assert len(rule.with_) == 4


def test_tx1xx_reported_in_source_order():
    codes = [d[0] for d in _diags('SET .a = &nope()\nEXEC "txco://noop"\nLOOP UNTIL .a == 1')]
    assert codes == ["TX101", "TX107"]


@pytest.mark.parametrize("with_, message", [
    ('secrets.headers.authorization.secret = .which',
     "WITH secrets.headers.authorization.secret must be a literal: a secret reference is never computed "
     "from the envelope"),
    ('secrets.headers.authorization.secret = "K", secrets.headers.authorization.format = "Bearer"',
     'WITH secrets.headers.authorization.format: the format holds exactly one "{}" for the value'),
    ('secrets.headers.authorization.format = "Bearer {}"',
     "WITH secrets.headers.authorization has no .secret naming the secret"),
    ('secrets.headers.a = "K"',
     "WITH secrets.headers.a: write secrets.headers.<header>.secret or secrets.body.<path>.secret "
     "(with .format and .optional beside it)"),
    ('secrets.key.secret = .which',  # a reference an op reads itself: still never computed
     "WITH secrets.key.secret must be a literal: a secret reference is never computed from the envelope"),
    ('secrets.headers.a.b.secret = "K"', "WITH secrets.headers.a.b.secret: secrets.headers.<header> names one header"),
    ('secrets.headers.a.secret = "../etc/passwd"',
     "WITH secrets.headers.a.secret: a secret name is letters, digits, '_', '.' and '-' (got '../etc/passwd')"),
    ('secrets.headers.a.secret = "K", secrets.headers.a.optional = "yes"', "WITH secrets.headers.a.optional is true or false"),
])
def test_tx114_bad_secret_references(with_, message):
    diags = _diags(f'WITH {with_}\nEXEC "https://api.example.com/x"')
    assert [(d[0], d[1]) for d in diags] == [("TX114", message)]


def test_tx114_secrets_need_a_request_to_travel_in():
    assert _diags('WITH secrets.headers.a.secret = "K"\nEXEC "txco://noop"')[0][:2] == (
        "TX114", "secrets are spliced into http(s) and mcp+ requests only; this op makes none")
    assert _diags('WITH mode = "async", secrets.body.a.secret = "K"\nEXEC "https://w.example/job"')[0][:2] == (
        "TX114", "secrets.body is for sync http(s) ops; an async dispatch or an MCP session carries secrets "
                 "in headers only")


def test_secret_keys_txcl_does_not_splice_are_left_to_the_op():
    parse_rule('WITH secrets.token.name = "api", secrets.key.secret = "HMAC"\nEXEC "txco://noop"', "s.txcl")


def test_well_formed_secret_references_load():
    parse_rule('WITH secrets.headers.authorization.secret = "STRIPE_KEY",\n'
               '     secrets.headers.authorization.format = "Bearer {}",\n'
               '     secrets.headers.x-api-key.secret = "VENDOR", secrets.headers.x-api-key.optional = true,\n'
               '     secrets.body.auth.client_secret.secret = "PARTNER"\n'
               'EXEC "https://api.example.com/charge"', "s.txcl")
