"""The Pygments lexer: lossless, error-free on valid files, and stable token streams."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Error, Keyword, Name, Number, Operator, String, Whitespace

from testtools import require_tool, rule_files

from txcl.highlight import TxclLexer

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SAMPLES = sorted((HERE / "samples").glob("*.txcl"))
GOLDEN = HERE / "golden"
# Lexical problems the lexer marks as error tokens; a file whose parse reports none of
# these must lex without error tokens.
LEXICAL_CODES = {"TX001", "TX002", "TX004", "TX006", "TX008", "TX009", "TX017"}


def repo_txcl_files() -> list[Path]:
    """Every .txcl file in the checkout (examples, test fixtures, stdlib, samples)."""
    skip = {"node_modules", ".git", "build", "dist", ".venv", "venv"}
    found = []
    for path in rule_files(REPO):
        if path.is_file() and not skip.intersection(path.relative_to(REPO).parts):
            found.append(path)
    return sorted(found)


def read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def lex(text: str) -> list[tuple[object, str]]:
    return [(tok, val) for _, tok, val in TxclLexer().get_tokens_unprocessed(text)]


def significant(text: str) -> list[tuple[str, str]]:
    return [(str(tok), val) for tok, val in lex(text) if tok is not Whitespace]


def lexically_valid(path: Path, text: str) -> bool:
    """Whether the parser reports none of the lexical problems the lexer marks as errors."""
    from txcl.errors import TxclSyntaxError
    from txcl.syntax.parser import parse_rule

    try:
        parse_rule(text, filename=str(path))
    except TxclSyntaxError as exc:
        return not any(d.code in LEXICAL_CODES for d in exc.diagnostics)
    return True


ALL_FILES = repo_txcl_files()
# Encoding fixtures (not UTF-8) cannot be lexed as text; lexically invalid fixtures are
# expected to produce error tokens.
TEXT_FILES = [p for p in ALL_FILES if read_text(p) is not None]
VALID_FILES = [p for p in TEXT_FILES if lexically_valid(p, read_text(p))]


def test_repo_has_samples() -> None:
    assert len(SAMPLES) >= 10
    assert set(SAMPLES) <= set(ALL_FILES)


def test_file_lists_are_not_empty() -> None:
    assert len(TEXT_FILES) >= 20 and len(VALID_FILES) >= 10
    assert set(SAMPLES) <= set(VALID_FILES)


@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_tokens_concatenate_back_to_input(path: Path) -> None:
    text = read_text(path)
    assert "".join(val for _, val in lex(text)) == text
    # get_tokens() normalises line breaks; the text must still survive apart from that.
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    assert "".join(val for _, val in TxclLexer().get_tokens(text)) == normalised


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_error_tokens_on_valid_files(path: Path) -> None:
    text = read_text(path)
    errors = [val for tok, val in lex(text) if tok in Error]
    assert errors == []


def test_samples_are_valid_rules() -> None:
    from txcl.syntax.parser import parse_rule

    for path in SAMPLES:
        parse_rule(path.read_text(encoding="utf-8"), filename=str(path))


def _golden_text(text: str) -> str:
    return "".join(f"{tok}\t{val!r}\n" for tok, val in significant(text))


@pytest.mark.parametrize("name", ["pricing", "casing", "loop", "paths", "strings", "regex"])
def test_golden_token_streams(name: str) -> None:
    sample = HERE / "samples" / f"{name}.txcl"
    golden = GOLDEN / f"{name}.tokens"
    actual = _golden_text(sample.read_text(encoding="utf-8"))
    if os.environ.get("TXCL_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")


# --- individual constructs -------------------------------------------------------------

@pytest.mark.parametrize("word", ["when", "WHEN", "When", "wHeN", "emit", "Loop", "default", "As"])
def test_keywords_in_any_casing(word: str) -> None:
    assert significant(word) == [("Token.Keyword", word)]


def test_every_and_max_are_names_outside_loop_and_keywords_inside() -> None:
    toks = significant('WITH every = "1h", max = 20 EXEC "txco://x" LOOP UNTIL .a == 1 EVERY 5 MAX 3')
    assert ("Token.Name.Attribute", "every") in toks
    assert ("Token.Name.Attribute", "max") in toks
    assert ("Token.Keyword", "EVERY") in toks
    assert ("Token.Keyword", "MAX") in toks


def test_loop_state_ends_at_next_clause_keyword() -> None:
    toks = significant('LOOP UNTIL .a == 1 MAX 2 WITH max = 1')
    assert toks[-3:] == [("Token.Name.Attribute", "max"), ("Token.Operator", "="),
                         ("Token.Literal.Number.Integer", "1")]
    assert ("Token.Keyword", "WITH") in toks


def test_paths() -> None:
    assert significant('.labels."app.kubernetes.io/name".x') == [
        ("Token.Name.Variable", '.labels."app.kubernetes.io/name".x')]
    assert significant("@web.req.body") == [("Token.Name.Variable.Magic", "@web.req.body")]
    assert significant(".a.-1.0") == [("Token.Name.Variable", ".a.-1.0")]
    # a keyword inside a path is part of the path
    assert significant(".when.set") == [("Token.Name.Variable", ".when.set")]


def test_functions_may_share_keyword_names() -> None:
    toks = lex("&set(.a, \"b\", 1)")
    assert toks[0] == (Name.Function, "&set")
    assert lex("&now")[0][0] in Error  # TX017: no "("
    assert [t for t, _ in lex("&&")] == [Operator]


def test_strings_escapes_and_b64() -> None:
    toks = lex('b64"a\\n\\d"')
    assert toks == [(String.Affix, "b64"), (String.Double, '"'), (String.Double, "a"),
                    (String.Escape, "\\n"), (String.Double, "\\"), (String.Double, "d"),
                    (String.Double, '"')]
    # upper-case B64 is an identifier followed by a string
    assert lex('B64"x"')[0] == (Name.Attribute, "B64")
    assert ("Token.Literal.String.Double", "# no comment") in significant('"# no comment"')


def test_regex_only_after_match_operators() -> None:
    toks = lex(".a =~ # c\n /x\\/y/")
    assert toks[-1] == (String.Regex, "/x\\/y/")
    assert (Error, "/") in lex(".a == /x/")  # a slash elsewhere is TX001
    assert lex(".a =~ /open")[-1] == (Error, "/open")  # unterminated (TX004)


@pytest.mark.parametrize("text,token", [
    ("7", Number.Integer), ("-12", Number.Integer), ("3.25", Number.Float), ("-0.5", Number.Float),
    ("7-2", Error), ("1.2.3", Error), ("1e5", Error), ("0x1F", Error), ("12px", Error), ("3.", Error),
])
def test_numbers(text: str, token: object) -> None:
    assert lex(text) == [(token, text)]


@pytest.mark.parametrize("word", ["true", "FALSE", "Null"])
def test_constants(word: str) -> None:
    assert lex(word) == [(Keyword.Constant, word)]


@pytest.mark.parametrize("text", ["{", ";", "- 5", "é", "'x'", "if", "RETURN", "Let"])
def test_invalid_characters_are_errors(text: str) -> None:
    assert any(tok in Error for tok, _ in lex(text))


def test_registered_with_pygments() -> None:
    assert isinstance(get_lexer_by_name("txcl"), TxclLexer)
    assert isinstance(get_lexer_for_filename("x.txcl"), TxclLexer)


def test_pygmentize_command(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "pygmentize"
    if not exe.exists():
        exe = Path(require_tool("pygmentize"))
    rule = HERE / "samples" / "pricing.txcl"
    out = subprocess.run([str(exe), "-l", "txcl", "-f", "html", str(rule)],
                         capture_output=True, text=True, check=True).stdout
    assert '<span class="k">WHEN</span>' in out
    assert '<span class="nf">&amp;now</span>' in out
    assert 'class="err"' not in out
