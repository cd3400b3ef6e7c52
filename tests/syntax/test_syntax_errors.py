"""Every syntax error code TX001–TX032: code, exact span, message and hint."""

from __future__ import annotations

import pytest

from txcl.errors import TxclSyntaxError
from txcl.syntax.parser import get_parser, parse_rule

VALUE = "expected a value (string, number, true, false, [array], path or &function(...)), found"
CLAUSES = "a clause keyword (WHEN, SET, SELECT, WITH, PRIORITY, EXEC, LOOP, EMIT) should come next"
LOOP_CLAUSES = ("a clause keyword (WHEN, SET, SELECT, WITH, PRIORITY, EXEC, LOOP, EMIT) or a "
                "LOOP modifier (UNTIL, SET, EVERY, MAX) should come next")
OPS = "(==, !=, <, <=, >, >=, =~, !~)"

# (source, code, (line, col, end_line, end_col), message, hint)
CASES = [
    # TX001 invalid-character
    ("SET .x = 'a'", "TX001", (1, 10, 1, 11), "unexpected character '''",
     "strings use double quotes"),
    ("SET .x = 1 | 2", "TX001", (1, 12, 1, 13), "unexpected character '|'", "use ||"),
    ("WHEN .a == 1 ; SET .x = 1", "TX001", (1, 14, 1, 15), "unexpected character ';'", None),
    ("SET .x = - 5", "TX001", (1, 10, 1, 11), "unexpected character '-'", None),
    ("WHEN .a == 1 / 2", "TX001", (1, 14, 1, 15), "unexpected character '/'", None),
    ("SET .x = & f(1)", "TX001", (1, 10, 1, 11), "unexpected character '&'", None),
    ("\ufeffWHEN *", "TX001", (1, 1, 1, 2), "unexpected character 'U+FEFF'", None),
    ("WHEN .a == 1 é", "TX001", (1, 14, 1, 15), "unexpected character 'é'", None),
    ("WHEN .a == 1\n  }", "TX001", (2, 3, 2, 4), "unexpected character '}'", "use &object(...)"),
    # TX002 invalid-encoding (str input)
    ("SET .x = 1\x00", "TX002", (1, 11, 1, 12), "NUL character in file", None),
    ("SET .x = \"\ud800\"", "TX002", (1, 11, 1, 12), "file is not valid UTF-8", None),
    # TX003 unterminated-string: opening quote to the end of the file
    ('SET .x = "abc\nEMIT .y = 1\n', "TX003", (1, 10, 3, 1), "unterminated string literal", None),
    ('SET .x = b64"abc', "TX003", (1, 10, 1, 17), "unterminated string literal", None),
    # TX004 unterminated-regex
    ("WHEN .x =~ /abc\nSET .y = 1", "TX004", (1, 12, 1, 16), "unterminated regex literal", None),
    ("WHEN .x =~ /abc\\/", "TX004", (1, 12, 1, 18), "unterminated regex literal", None),
    # TX005 invalid-regex (literal and string operand)
    ("WHEN .x =~ /(a/", "TX005", (1, 12, 1, 16), "invalid regular expression: missing ): (a",
     None),
    ('WHEN .x !~ "(a"', "TX005", (1, 12, 1, 16), "invalid regular expression: missing ): (a",
     None),
    # TX006 malformed-number
    ("WHEN .a == 7-2", "TX006", (1, 12, 1, 15),
     "malformed number '7-2': write -digits or -digits.digits", "no exponent, hex or arithmetic"),
    ("SET .a = 1.2.3", "TX006", (1, 10, 1, 15),
     "malformed number '1.2.3': write -digits or -digits.digits", "no exponent, hex or arithmetic"),
    ("SET .a = --4", "TX006", (1, 10, 1, 13),
     "malformed number '--4': write -digits or -digits.digits", "no exponent, hex or arithmetic"),
    ("SET .a = 1e5", "TX006", (1, 10, 1, 13),
     "malformed number '1e5': write -digits or -digits.digits", "no exponent, hex or arithmetic"),
    ("SET .a = 0x1F", "TX006", (1, 10, 1, 14),
     "malformed number '0x1F': write -digits or -digits.digits", "no exponent, hex or arithmetic"),
    ("SET .a = 12px", "TX006", (1, 10, 1, 14),
     "malformed number '12px': write -digits or -digits.digits", "no exponent, hex or arithmetic"),
    ("SET .a = 3.", "TX006", (1, 10, 1, 12),
     "malformed number '3.': write -digits or -digits.digits", "no exponent, hex or arithmetic"),
    # TX007 number-out-of-range
    ("WHEN .a == 9223372036854775808", "TX007", (1, 12, 1, 31),
     "number 9223372036854775808 is out of range", None),
    ("SET .a = " + "1" * 400 + ".0", "TX007", (1, 10, 1, 412),
     "number " + "1" * 133 + "…" + "1" * 63 + ".0 is out of range", None),  # a long token is quoted cut
    # TX008 invalid-path
    ("SET .5 = 1", "TX008", (1, 5, 1, 6), "'.' must be followed by a letter or '_' to start a path",
     None),
    ("SET @1 = 1", "TX008", (1, 5, 1, 6), "'@' must be followed by a letter or '_' to start a path",
     None),
    ("SET @.x = 1", "TX008", (1, 5, 1, 6),
     "'@' must be followed by a letter or '_' to start a path", None),
    ("SET .a..b = 1", "TX008", (1, 5, 1, 10), "empty segment in path .a..b", None),
    ("SET .a. = 1", "TX008", (1, 5, 1, 8), "empty segment in path .a.", None),
    # TX009 invalid-quoted-segment
    ('SET .a.b"c" = 1', "TX009", (1, 9, 1, 12), "quoted path segment must follow '.'", None),
    ('SET .a."b"c = 1', "TX009", (1, 11, 1, 12),
     "quoted path segment must end the path or be followed by '.'", None),
    ('SET .a."b = 1\nEMIT .c = 2', "TX009", (1, 8, 1, 14), "unterminated quoted path segment",
     None),
    ('SET .a."" = 1', "TX009", (1, 8, 1, 10), "empty quoted path segment", None),
    # TX010 unexpected-token
    ('WHEN .tier == "gold" .active == true', "TX010", (1, 22, 1, 29),
     f"unexpected path .active; {CLAUSES}", "join conditions with &&, || or ','"),
    ("foo", "TX010", (1, 1, 1, 4), f"unexpected identifier foo; {CLAUSES}", None),
    ("wehn .a == 1", "TX010", (1, 1, 1, 5), f"unexpected identifier wehn; {CLAUSES}",
     "did you mean WHEN?"),
    ("WHEN .a == 1 and .b == 2", "TX010", (1, 14, 1, 17),
     f"unexpected identifier and; {CLAUSES}", "use &&"),
    ("UNTIL .a == 1", "TX010", (1, 1, 1, 6), f"unexpected keyword UNTIL; {CLAUSES}",
     "UNTIL is a LOOP modifier: write LOOP UNTIL <condition>"),
    ("SET .x = 1 AS .y", "TX010", (1, 12, 1, 14), f"unexpected keyword AS; {CLAUSES}",
     "AS is part of a SELECT item: SELECT .source AS .dest DEFAULT value"),
    ("LOOP UNTIL .a == 1 SET .x = 1 .y = 2", "TX010", (1, 31, 1, 33),
     f"unexpected path .y; {LOOP_CLAUSES}", "separate LOOP SET assignments with ','"),
    ("LOOP UNTIL .a == 1 5", "TX010", (1, 20, 1, 21), f"unexpected number 5; {LOOP_CLAUSES}",
     None),
    ("SELECT .a .b", "TX010", (1, 11, 1, 13), f"unexpected path .b; {CLAUSES}",
     "separate SELECT items with ','"),
    ("WHEN * .a == 1", "TX010", (1, 8, 1, 10), f"unexpected path .a; {CLAUSES}",
     "WHEN * stands alone"),
    # TX011 repeated-clause
    ("WHEN .a == 1\nWHEN .b == 2", "TX011", (2, 1, 2, 5),
     "WHEN given more than once (first at line 1)", None),
    ('EXEC "txco://a"\n\nexec "txco://b"', "TX011", (3, 1, 3, 5),
     "EXEC given more than once (first at line 1)", None),
    ("PRIORITY 1 PRIORITY 2", "TX011", (1, 12, 1, 20),
     "PRIORITY given more than once (first at line 1)", None),
    # TX012 reserved-word
    ("let x = 1", "TX012", (1, 1, 1, 4), "'let' is a reserved word", None),
    ("WITH If = 1", "TX012", (1, 6, 1, 8), "'If' is a reserved word", None),
    # TX013 expected-target
    ("SET x = 1", "TX013", (1, 5, 1, 6),
     "expected a path (.name or @name) to assign to, found identifier x", None),
    ("EMIT .a = 1, 5", "TX013", (1, 14, 1, 15),
     "expected a path (.name or @name) to assign to, found number 5", None),
    ("LOOP SET = 1", "TX013", (1, 10, 1, 11),
     "expected a path (.name or @name) to assign to, found '='", None),
    # TX014 expected-equals
    ('SET .order.currency "EUR"', "TX014", (1, 21, 1, 26),
     "expected '=' after .order.currency, found string \"EUR\"", 'write .order.currency = "EUR"'),
    ("WITH timeout 5", "TX014", (1, 14, 1, 15), "expected '=' after timeout, found number 5",
     "write timeout = 5"),
    ("EMIT .a == 1", "TX014", (1, 9, 1, 11), "expected '=' after .a, found '=='", None),
    # TX015 expected-value
    ("SET .x = null", "TX015", (1, 10, 1, 14), f"{VALUE} keyword NULL", 'use &json("null")'),
    ("SET .x = {", "TX015", (1, 10, 1, 11), f"{VALUE} '{{'", "use &object(...)"),
    ('SET .x = B64"x"', "TX015", (1, 10, 1, 13), f"{VALUE} identifier B64",
     'write b64"..." in lower case with no space'),
    ('SET .x = b64 "x"', "TX015", (1, 10, 1, 13), f"{VALUE} identifier b64",
     'write b64"..." in lower case with no space'),
    ("SET .x = now()", "TX015", (1, 10, 1, 13), f"{VALUE} identifier now",
     "calls are written &now(...)"),
    ("SET .x =", "TX015", (1, 9, 1, 9), f"{VALUE} end of input", None),
    ("SET .x = &f(1,)", "TX015", (1, 15, 1, 16), f"{VALUE} ')'", None),
    ("SELECT .a DEFAULT AS", "TX015", (1, 19, 1, 21), f"{VALUE} keyword AS", None),
    ("WITH a = WHEN", "TX015", (1, 10, 1, 14), f"{VALUE} keyword WHEN", None),
    # TX016 invalid-array
    ("SET .x = [1 2]", "TX016", (1, 13, 1, 14), "expected ',' or ']' in array, found number 2",
     None),
    ("SET .x = [1, .a]", "TX016", (1, 14, 1, 16), "array elements must be literals, found path .a",
     "use &array(...)"),
    ("SET .x = [&f()]", "TX016", (1, 11, 1, 14), "array elements must be literals, found '&f('",
     "use &array(...)"),
    ("SET .x = [null]", "TX016", (1, 11, 1, 15),
     "array elements must be literals, found keyword NULL", "use &array(...)"),
    ("SET .x = [1", "TX016", (1, 12, 1, 12), "expected ',' or ']' in array, found end of input",
     None),
    # TX017 invalid-call
    ("SET .x = &f", "TX017", (1, 10, 1, 12), "expected '(' after &f", None),
    ("SET .x = &f (1)", "TX017", (1, 10, 1, 12), "expected '(' after &f", None),
    ("SET .x = &f(1 2)", "TX017", (1, 15, 1, 16),
     "expected ',' or ')' in the arguments of &f, found number 2", None),
    ("SET .x = &f(1", "TX017", (1, 14, 1, 14),
     "expected ',' or ')' in the arguments of &f, found end of input", None),
    # TX018 expected-with-key
    ("WITH @x = 1", "TX018", (1, 6, 1, 8),
     "expected a WITH key (a name such as timeout or secrets.token), found path @x", None),
    ("WITH a @x = 1", "TX018", (1, 8, 1, 10),
     "expected a WITH key (a name such as timeout or secrets.token), found path @x", None),
    ("WITH set = 1", "TX018", (1, 6, 1, 9),
     "expected a WITH key (a name such as timeout or secrets.token), found keyword SET", None),
    ("WITH a = 1, 5", "TX018", (1, 13, 1, 14),
     "expected a WITH key (a name such as timeout or secrets.token), found number 5", None),
    ("WITH a = 1 .b = 2", "TX018", (1, 12, 1, 14),
     "expected a WITH key (a name such as timeout or secrets.token), found path .b", None),
    # TX019 expected-exec-target
    ("EXEC 5", "TX019", (1, 6, 1, 7), "EXEC needs a string target, found number 5", None),
    ("EXEC", "TX019", (1, 5, 1, 5), "EXEC needs a string target, found end of input", None),
    # TX020 invalid-priority
    ('PRIORITY "x"', "TX020", (1, 10, 1, 13), 'PRIORITY needs an integer, found string "x"', None),
    ("PRIORITY 1.5", "TX020", (1, 10, 1, 13), "PRIORITY needs an integer, found number 1.5", None),
    ("PRIORITY 9223372036854775808", "TX020", (1, 10, 1, 29),
     "PRIORITY needs an integer, found number 9223372036854775808", None),
    # TX021 invalid-select
    ("SELECT", "TX021", (1, 7, 1, 7), "SELECT needs * or a source path, found end of input", None),
    ("SELECT *, .a", "TX021", (1, 9, 1, 10), "SELECT * cannot be combined with other items", None),
    ("SELECT .a, *", "TX021", (1, 12, 1, 13), "SELECT * cannot be combined with other items", None),
    ("SELECT .a AS 5", "TX021", (1, 14, 1, 15),
     "expected a destination path after AS, found number 5", None),
    # TX022 expected-condition
    ("WHEN 5", "TX022", (1, 6, 1, 7), "WHEN expected a path or '(', found number 5", None),
    ("LOOP UNTIL", "TX022", (1, 11, 1, 11), "LOOP UNTIL expected a path or '(', found end of input",
     None),
    ("LOOP UNTIL *", "TX022", (1, 12, 1, 13), "LOOP UNTIL expected a path or '(', found '*'", None),
    ("WHEN (5)", "TX022", (1, 7, 1, 8), "WHEN expected a path or '(', found number 5", None),
    # TX023 expected-comparison
    ("WHEN .a 5", "TX023", (1, 9, 1, 10),
     f"WHEN expected a comparison operator {OPS} after .a, found number 5", None),
    ("WHEN .a = 5", "TX023", (1, 9, 1, 10),
     f"WHEN expected a comparison operator {OPS} after .a, found '='", None),
    ("LOOP UNTIL @x", "TX023", (1, 14, 1, 14),
     f"LOOP UNTIL expected a comparison operator {OPS} after @x, found end of input", None),
    # TX024 dangling-operator
    ("WHEN .a == 1 &&", "TX024", (1, 14, 1, 16), "WHEN expected a condition after '&&'", None),
    ("WHEN .a == 1 || SET .x = 1", "TX024", (1, 14, 1, 16), "WHEN expected a condition after '||'",
     None),
    ("WHEN .a == 1, 5", "TX024", (1, 13, 1, 14), "WHEN expected a condition after ','", None),
    ("WHEN !", "TX024", (1, 6, 1, 7), "WHEN expected a condition after '!'", None),
    # TX025 invalid-group
    ("WHEN ()", "TX025", (1, 6, 1, 8), "WHEN expected a condition inside '()'", None),
    ("WHEN (.a == 1 SET .x = 1", "TX025", (1, 15, 1, 18),
     "WHEN expected ')' to close the group opened at 1:6", None),
    ("LOOP UNTIL ((.a == 1)", "TX025", (1, 22, 1, 22),
     "LOOP UNTIL expected ')' to close the group opened at 1:12", None),
    # TX026 invalid-comparison-value
    ("WHEN .used == .limit", "TX026", (1, 15, 1, 21),
     "WHEN expected a string, number, true, false, null or &function(...) after '==', found "
     "path .limit", "a condition compares a path with a constant"),
    ("WHEN .a < [1]", "TX026", (1, 11, 1, 12),
     "WHEN expected a string, number, true, false, null or &function(...) after '<', found '['",
     None),
    ("WHEN .a == /x/", "TX001", (1, 12, 1, 13), "unexpected character '/'", None),
    # TX027 invalid-match-operand
    ("WHEN .a =~ 5", "TX027", (1, 12, 1, 13),
     "WHEN '=~' and '!~' take a /regex/, a string or null, found number 5", None),
    ("LOOP UNTIL .a !~ .b", "TX027", (1, 18, 1, 20),
     "LOOP UNTIL '=~' and '!~' take a /regex/, a string or null, found path .b", None),
    # TX028 non-literal-call-argument
    ("WHEN .a == &f(.x)", "TX028", (1, 15, 1, 17),
     "WHEN function arguments must be literals, but &f reads .x",
     "compute it with EMIT in an earlier scope and test the stored result here"),
    ("LOOP UNTIL .a >= &f(1, &g(@n))", "TX028", (1, 27, 1, 29),
     "LOOP UNTIL function arguments must be literals, but &g reads @n",
     "compute it with EMIT in an earlier scope and test the stored result here"),
    # TX029 loop-missing-until
    ("LOOP", "TX029", (1, 1, 1, 5), "LOOP requires an UNTIL condition", None),
    ("loop SET .x = 1 MAX 3", "TX029", (1, 1, 1, 5), "LOOP requires an UNTIL condition", None),
    # TX030 invalid-loop-max
    ("LOOP UNTIL .a == 1 MAX 0", "TX030", (1, 24, 1, 25),
     "LOOP MAX needs a positive integer, found number 0", None),
    ("LOOP UNTIL .a == 1 MAX -3", "TX030", (1, 24, 1, 26),
     "LOOP MAX needs a positive integer, found number -3", None),
    ('LOOP UNTIL .a == 1 MAX "3"', "TX030", (1, 24, 1, 27),
     'LOOP MAX needs a positive integer, found string "3"', None),
    # TX031 invalid-loop-every
    ("LOOP UNTIL .a == 1 EVERY -5", "TX031", (1, 26, 1, 28), "LOOP EVERY cannot be negative",
     None),
    ('LOOP UNTIL .a == 1 EVERY "-1s"', "TX031", (1, 26, 1, 31), "LOOP EVERY cannot be negative",
     None),
    ('LOOP UNTIL .a == 1 EVERY "soon"', "TX031", (1, 26, 1, 32),
     'LOOP EVERY needs a duration such as "250ms" or a whole number of milliseconds, found '
     'string "soon"', None),
    ("LOOP UNTIL .a == 1 EVERY 1.5", "TX031", (1, 26, 1, 29),
     'LOOP EVERY needs a duration such as "250ms" or a whole number of milliseconds, found '
     "number 1.5", None),
    # TX032 repeated-loop-modifier
    ("LOOP MAX 3 UNTIL .a == 1 MAX 4", "TX032", (1, 26, 1, 29), "LOOP MAX given more than once",
     None),
    ("LOOP UNTIL .a == 1 UNTIL .b == 2", "TX032", (1, 20, 1, 25),
     "LOOP UNTIL given more than once", None),
]


def _diags(source: str):
    with pytest.raises(TxclSyntaxError) as info:
        parse_rule(source, "t.txcl")
    return info.value.diagnostics


@pytest.mark.parametrize("source,code,span,message,hint", CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_syntax_error(source, code, span, message, hint):
    before = get_parser().mismatches
    diags = _diags(source)
    assert len(diags) == 1, [d.headline() for d in diags]
    d = diags[0]
    assert d.code == code
    assert (d.line, d.column, d.end_line, d.end_column) == span
    assert d.message == message
    assert d.hint == hint
    assert d.file == "t.txcl"
    assert d.severity == "error"
    assert get_parser().mismatches == before  # the explainer agreed with the LALR table


def test_every_syntax_code_is_covered():
    covered = {c[1] for c in CASES}
    assert covered == {f"TX{n:03d}" for n in range(1, 33)}


def test_rendered_form():
    with pytest.raises(TxclSyntaxError) as info:
        parse_rule("WHEN .a == 1\nSET .order.currency \"EUR\"\n", "OPS/shop/0200/discount.txcl")
    assert str(info.value) == (
        "OPS/shop/0200/discount.txcl:2:21: TX014 expected '=' after .order.currency, found "
        "string \"EUR\"\n"
        "  |\n"
        "2 | SET .order.currency \"EUR\"\n"
        "  |                     ^^^^^\n"
        "  = hint: write .order.currency = \"EUR\""
    )


def test_rendered_reserved_word():
    with pytest.raises(TxclSyntaxError) as info:
        parse_rule("WHEN .a == 1\n  let x = 2", "r.txcl")
    assert str(info.value) == (
        "r.txcl:2:3: TX012 'let' is a reserved word\n"
        "  |\n"
        "2 |   let x = 2\n"
        "  |   ^^^"
    )


def test_end_of_input_caret_after_last_character():
    with pytest.raises(TxclSyntaxError) as info:
        parse_rule("SET .x =\n\n", "e.txcl")
    d = info.value.diagnostics[0]
    assert (d.line, d.column) == (1, 9)
    assert str(info.value).splitlines()[-1] == "  |         ^"


def test_crlf_positions():
    diags = _diags("WHEN .a == 1\r\nSET .x 2\r\n")
    assert (diags[0].code, diags[0].line, diags[0].column) == ("TX014", 2, 8)


def test_multiline_string_positions_continue():
    diags = _diags('SET .x = "a\nb\nc" .y 3')
    assert (diags[0].code, diags[0].line, diags[0].column) == ("TX014", 3, 7)
