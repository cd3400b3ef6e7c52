"""Valid-rule behaviour of the parser: keywords, lists, paths, literals, spans, cache."""

from __future__ import annotations

import base64
import time

import pytest

from txcl.errors import TxclSyntaxError
from txcl.syntax import ast
from txcl.syntax.parser import parse_rule, parse_source


def test_keywords_in_every_casing():
    rule = parse_rule('when .a == TRUE sEt .b = False SeLeCt * wItH t = 1 priority 2 '
                      'Exec "txco://x" eMiT .c = tRuE')
    assert rule.when.condition.right == ast.BoolLit(True)
    assert rule.set_pre[0].value == ast.BoolLit(False)
    assert rule.select.star is True
    assert rule.priority.value == 2
    assert rule.emit[0].value == ast.BoolLit(True)
    assert [m.kind for m in rule.clauses] == ["when", "set_pre", "select", "with", "priority",
                                             "exec", "emit"]


def test_null_in_any_casing_on_the_right_of_a_comparison():
    rule = parse_rule("WHEN .a == NuLl")
    assert isinstance(rule.when.condition.right, ast.NullLit)


def test_every_and_max_are_names_outside_loop():
    rule = parse_rule('WITH every = "1h", max = 20, MAX = 1 EXEC "txco://x" '
                      'LOOP UNTIL .done == true every "250ms" Max 5')
    assert [p.key for p in rule.with_] == [("every",), ("max",), ("MAX",)]
    assert rule.loop.every_ns == 250_000_000
    assert rule.loop.max == 5


def test_loop_modifiers_in_any_order_and_set_belongs_to_loop():
    rule = parse_rule('EXEC "https://x.example" LOOP MAX 3 SET .n = 1, .m = 2 EVERY 10 '
                      "UNTIL .ok == true")
    loop = rule.loop
    assert loop.max == 3 and loop.every_ns == 10_000_000
    assert [a.target.text for a in loop.set] == [".n", ".m"]
    assert [m.kind for m in loop.modifiers] == ["max", "set", "every", "until"]
    assert rule.set_pre == () and rule.set_post == ()


def test_set_pre_and_post_by_position():
    rule = parse_rule("SET .a = 1 SELECT .x SET .b = 2 EMIT .e = 1 SET .c = 3")
    assert [a.target.text for a in rule.set_pre] == [".a"]
    assert [a.target.text for a in rule.set_post] == [".b", ".c"]
    assert [m.kind for m in rule.clauses] == ["set_pre", "select", "set_post", "emit",
                                             "set_post"]


def test_set_without_select_is_pre():
    rule = parse_rule('SET .seen = true EXEC "txco://audit" SET .count = 1')
    assert [a.target.text for a in rule.set_pre] == [".seen", ".count"]
    assert rule.set_post == ()


def test_repeated_list_clauses_merge_in_source_order():
    rule = parse_rule("WITH a = 1 EMIT .x = 1 WITH b = 2 EMIT .y = 2 .z = 3")
    assert [p.key_text for p in rule.with_] == ["a", "b"]
    assert [a.target.text for a in rule.emit] == [".x", ".y", ".z"]


def test_optional_commas_in_set_emit_with():
    rule = parse_rule("SET .x = 1 .y = .x, .z = &now() WITH a = 1 b.c = 2")
    assert [a.target.text for a in rule.set_pre] == [".x", ".y", ".z"]
    assert [p.key for p in rule.with_] == [("a",), ("b", "c")]


def test_clause_order_is_free():
    rule = parse_rule('EMIT .x = 1\nEXEC "txco://x"\nWITH t = 1\nSELECT .q\nWHEN .a == 1')
    assert rule.when is not None and rule.select is not None


def test_b64_strings():
    rule = parse_rule('SET .a = b64"ok\\n", .b = b64"", .c = "b64"')
    a, b, c = (x.value for x in rule.set_pre)
    assert a == ast.StringLit("b2sK", True, "ok\n")
    assert a.value == base64.b64encode(b"ok\n").decode()
    assert b.value == "" and b.b64
    assert c == ast.StringLit("b64", False, "b64")


def test_string_escapes():
    rule = parse_rule(r'SET .a = "q\" b\\ n\n r\r t\t d\d+ u\u0041"')
    assert rule.set_pre[0].value.value == 'q" b\\ n\n r\r t\t d\\d+ u\\u0041'


def test_multiline_string_keeps_line_breaks():
    rule = parse_rule('SET .a = "x\ny"\nEMIT .b = 1')
    assert rule.set_pre[0].value.value == "x\ny"
    assert rule.emit[0].span.start.line == 3


def test_numbers():
    rule = parse_rule("SET .a = -5, .b = 012, .c = 1.50, .d = -0.25, "
                      ".e = 9223372036854775807, .f = -9223372036854775808")
    vals = [a.value for a in rule.set_pre]
    assert vals[0] == ast.IntLit(-5, "-5")
    assert vals[1] == ast.IntLit(12, "012")
    assert vals[2] == ast.FloatLit(1.5, "1.50")
    assert vals[3] == ast.FloatLit(-0.25, "-0.25")
    assert vals[4].value == 2**63 - 1 and vals[5].value == -(2**63)


def test_paths_with_quotes_hyphens_digits_and_at():
    rule = parse_rule('SET .labels."app.kubernetes.io/name" = 1, .headers.content-type = 2, '
                      '.items.0 = 3, .a.-1 = 4, @web.req.body = 5, .x."a b".y = 6')
    paths = [a.target for a in rule.set_pre]
    assert paths[0].segments == ("labels", "app.kubernetes.io/name")
    assert paths[0].text == ".labels.app\\.kubernetes\\.io/name"
    assert paths[1].segments == ("headers", "content-type")
    assert paths[2].segments == ("items", "0")
    assert paths[3].segments == ("a", "-1")
    assert paths[4] == ast.Path(("_txc", "web", "req", "body"), True)
    assert paths[4].text == "._txc.web.req.body"
    assert paths[5].segments == ("x", "a b", "y")


def test_path_comment_directly_after():
    rule = parse_rule("SET .a = .b#note\n.c = 1 # tail")
    assert [a.target.text for a in rule.set_pre] == [".a", ".c"]
    assert [c.text for c in rule.comments] == ["note", " tail"]
    assert rule.comments[0].span.as_list() == [1, 12, 1, 17]


def test_with_keys_with_whitespace_before_tail_and_quoted_tail():
    rule = parse_rule('WITH secrets .token.name = "x", headers."X-Api.Key" = "k", a.0.b-c = 1')
    assert rule.with_[0].key == ("secrets", "token", "name")
    assert rule.with_[0].key_span.as_list() == [1, 6, 1, 25]
    assert rule.with_[1].key == ("headers", "X-Api.Key")
    assert rule.with_[2].key == ("a", "0", "b-c")


def test_regex_literals_and_escaped_slashes():
    rule = parse_rule(r"WHEN .u =~ /^https?:\/\/shop\.example\// && .v !~ /a\d#b/")
    first, second = rule.when.condition.items
    assert first.right.pattern == r"^https?://shop\.example/"
    assert first.right.source == "literal"
    assert first.right.compiled.search(b"https://shop.example/x") is not None
    assert second.op is ast.CmpOp.NOT_MATCH and second.right.pattern == r"a\d#b"


def test_regex_from_string_and_null():
    rule = parse_rule('WHEN .a =~ "^x", .b !~ null')
    first, second = rule.when.condition.items
    assert first.right.source == "string" and first.right.pattern == "^x"
    assert first.right.compiled.search(b"xy")
    assert second.right.source == "null" and second.right.pattern == ""
    assert rule.when.condition.separators == (",",)


def test_condition_precedence_and_flattening():
    rule = parse_rule("WHEN !.paid == true && .due > 0 || (.a == 1, (.b == 2 && .c == 3))")
    cond = rule.when.condition
    assert isinstance(cond, ast.Or) and len(cond.items) == 2
    left, right = cond.items
    assert isinstance(left, ast.And) and isinstance(left.items[0], ast.Not)
    assert isinstance(right, ast.And)
    assert len(right.items) == 3 and right.separators == (",", "&&")


def test_when_star_and_bare_when():
    assert parse_rule("WHEN *").when.condition == ast.Star(False)
    assert parse_rule("WHEN\nEXEC \"txco://x\"").when.condition == ast.Star(True)
    assert parse_rule("").when is None


def test_empty_and_comment_only_files_are_valid():
    rule = parse_rule("# nothing here\n\n   # more\n")
    assert rule.clauses == () and len(rule.comments) == 2


def test_calls_in_conditions_and_values():
    rule = parse_rule('WHEN .t > &add(1, &mul(2, 3)) SET .x = &concat(.a, "-", [1, [true]])')
    call = rule.when.condition.right
    assert call.name == "add" and call.args[1].name == "mul"
    value = rule.set_pre[0].value
    assert value.args[0] == ast.Path(("a",))
    assert value.args[2] == ast.ArrayLit((ast.IntLit(1, "1"),
                                          ast.ArrayLit((ast.BoolLit(True),))))
    assert value.name_span.as_list() == [1, 40, 1, 47]  # `&concat` without `(`


def test_keyword_named_functions():
    rule = parse_rule("SET .x = &set(.a, \"b\", 1)")
    assert rule.set_pre[0].value.name == "set"


def test_select_items():
    rule = parse_rule('SELECT .a AS .b DEFAULT "x", .c DEFAULT .d, .e AS .f, .g')
    items = rule.select.items
    assert items[0].target.text == ".b" and items[0].default == ast.StringLit("x", False, "x")
    assert items[1].dest is None and items[1].default == ast.Path(("d",))
    assert items[3].target.text == ".g"


def test_array_trailing_comma():
    rule = parse_rule("SET .a = [1, 2,], .b = []")
    assert len(rule.set_pre[0].value.items) == 2 and rule.set_pre[1].value.items == ()


def test_spans_of_clauses_and_rule():
    text = 'WHEN .a == 1\nEXEC "txco://x"\n'
    rule = parse_rule(text)
    assert rule.clauses[0].span.as_list() == [1, 1, 1, 13]
    assert rule.clauses[1].span.as_list() == [2, 1, 2, 16]
    assert rule.exec.target_span.as_list() == [2, 6, 2, 16]
    assert rule.span.as_list() == [1, 1, 3, 1]
    assert rule.span.end.offset == len(text)


def test_columns_count_code_points():
    rule = parse_rule('SET .a = "héllo→", .b = 1')
    assert rule.set_pre[1].target.span.as_list() == [1, 20, 1, 22]
    assert rule.set_pre[1].target.span.start.offset == 19


def test_filename_is_kept():
    assert parse_rule("", "OPS/a/0100/x.txcl").filename == "OPS/a/0100/x.txcl"


def test_cache_returns_same_object_quickly():
    text = "WHEN .cached == 1 EMIT .z = 2"
    first = parse_rule(text, "c.txcl")
    start = time.perf_counter()
    second = parse_rule(text, "c.txcl")
    assert second is first
    assert time.perf_counter() - start < 0.05  # a dict lookup, not a parse (loose bound)
    assert parse_rule(text, "other.txcl") is not first


def test_cached_failures_raise_again():
    for _ in range(2):
        with pytest.raises(TxclSyntaxError) as info:
            parse_rule("EXEC 5", "f.txcl")
        assert info.value.diagnostics[0].code == "TX019"


def test_parse_source_bytes():
    assert parse_source(b"WHEN .a == 1").when is not None
    with pytest.raises(TxclSyntaxError) as info:
        parse_source(b'SET .x = "\xff"\n', "bad.txcl")
    d = info.value.diagnostics[0]
    assert (d.code, d.message, d.line, d.column) == ("TX002", "file is not valid UTF-8", 1, 11)
    with pytest.raises(TxclSyntaxError) as info:
        parse_source(b"SET .x = 1\n\x00", "nul.txcl")
    assert info.value.diagnostics[0].message == "NUL character in file"
    assert info.value.diagnostics[0].line == 2


def test_parse_rule_accepts_bytes():
    assert parse_rule(b"WHEN .a == 1").when is not None
    with pytest.raises(TxclSyntaxError):
        parse_rule(b"\xff")


def test_public_api_export():
    import txcl

    assert txcl.parse_rule is parse_rule


def test_scanner_rows_and_their_token_objects():
    """The parser reads tokens as rows (tuples); tools read the same tokens as objects."""
    from txcl.syntax.lexer import scan
    from txcl.syntax.tokens import COL, DATA, END, LINE, START, TYPE, VALUE, Tok, row_span

    scanner = scan('WHEN .a == 1\n  EMIT .b = "x" every ?')
    rows = scanner.rows
    assert [row[TYPE] for row in rows] == ["WHEN", "PATH", "EQ", "INT", "EMIT", "PATH", "ASSIGN",
                                           "STRING", "NAME", "ERROR"]
    emit = rows[4]
    assert (emit[VALUE], emit[START], emit[END], emit[LINE], emit[COL]) == ("EMIT", 15, 19, 2, 3)
    assert rows[3][DATA] == ast.IntLit(1, "1")  # literals carry their node
    assert rows[8][DATA] == "EVERY"  # a contextual keyword, decided by the parser
    assert rows[9][-1].code == "TX001"  # an ERROR row carries its diagnostic
    span = row_span(emit)
    assert (span.start.line, span.start.column, span.end.column, span.end.offset) == (2, 3, 7, 19)
    assert span == emit[3:9] and (span.line, span.end_column) == (2, 7)  # a span is six integers
    tokens = scanner.tokens
    assert all(type(tok) is Tok for tok in tokens)
    assert [(t.type, t.value, t.line, t.col, t.start, t.end_line, t.end_col, t.end)
            for t in tokens] == [row[:2] + row[3:9] for row in rows]
    assert tokens[9].error is rows[9][-1] and tokens[3].data is rows[3][DATA]
    assert tokens[4].span == span


def test_a_span_is_six_integers_with_positions_on_demand():
    """Spans are tuples of (line, column, offset, end_line, end_column, end_offset); the rest
    of the code reads them through `start`/`end` and the named fields, and they survive the
    check cache (pickle) and compare by value."""
    import pickle

    from txcl.errors import Position, Span, span_of

    span = Span(Position(2, 3, 15), Position(2, 7, 19))
    assert span == (2, 3, 15, 2, 7, 19) and span == span_of(2, 3, 15, 2, 7, 19)
    assert (span.start, span.end) == (Position(2, 3, 15), Position(2, 7, 19))
    assert (span.line, span.column, span.offset, span.end_line, span.end_column,
            span.end_offset) == (2, 3, 15, 2, 7, 19)
    assert span.as_list() == [2, 3, 2, 7]
    again = pickle.loads(pickle.dumps(span, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(again) is Span and again == span and hash(again) == hash(span)
    assert repr(span) == ("Span(start=Position(line=2, column=3, offset=15), "
                          "end=Position(line=2, column=7, offset=19))")
    assert Span.point(Position(1, 1, 0)) != span


def test_plain_integers_take_the_short_path_and_read_as_before():
    """Digits only, up to 18 of them, skip the number pattern; longer, signed or decimal
    numbers go through it. Either way the literal keeps its text and value."""
    from txcl.syntax.lexer import scan

    texts = ["0", "007", "42", "9" * 18, "9223372036854775807", "-5", "1.5"]
    rows = scan("SET " + ", ".join(f".a{i} = {t}" for i, t in enumerate(texts))).rows
    literals = [row[2] for row in rows if row[0] in ("INT", "FLOAT")]
    assert [(type(n).__name__, n.value, n.text) for n in literals] == [
        ("IntLit", 0, "0"), ("IntLit", 7, "007"), ("IntLit", 42, "42"), ("IntLit", int("9" * 18), "9" * 18),
        ("IntLit", 2**63 - 1, "9223372036854775807"),
        ("IntLit", -5, "-5"), ("FloatLit", 1.5, "1.5")]
    assert literals[1].span.as_list() == [1, 20, 1, 23]
    assert scan("SET .a = " + "9" * 19).rows[-1][0] == "ERROR"  # 19 digits, above 2**63 - 1: out of range


def test_reductions_splice_helper_lists_by_position_and_the_grammar_allows_it():
    """Each rule's children are rebuilt by code generated for it: a helper rule's list spliced
    where the helper stands, None where an optional part matched nothing. That holds only while
    no `?rule` of one helper symbol passes a helper's list on, which the parser checks."""
    from types import SimpleNamespace as NS

    from txcl.syntax.parser import _calling, _children_source, _Flat, _no_rule_passes_a_flat_on, get_parser

    term, helper, node = NS(is_term=True, name="A"), NS(is_term=False, name="_items"), NS(is_term=False, name="x")
    rule = NS(expansion=[term, helper, node], options=NS(empty_indices=[False, False, True, False]))
    reshape = _calling(_children_source(rule))(list)
    assert reshape(["a", _Flat([1, 2]), "n"]) == ["a", 1, 2, None, "n"]
    assert _no_rule_passes_a_flat_on(get_parser().lark.rules)
    passing = NS(origin=NS(name="wrap"), alias=None, expansion=[helper], options=NS(expand1=True))
    assert not _no_rule_passes_a_flat_on([passing])
