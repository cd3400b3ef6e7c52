"""The parse cache on disk: its stored form gives back exactly what parsing gives (every text
of the test corpus, rules and errors, under another file name too), and the cache file is
shared between processes, versioned, bounded, and harmless when damaged, deleted or off."""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from corpus import corpus_texts
from txcl.errors import TxclSyntaxError
from txcl.syntax import ast, codec, diskcache
from txcl.syntax.batch import parsing_many
from txcl.syntax.parser import clear_cache, parse_rule

RULE = '''WHEN .user.id =~ /^u_/ && .amount > 1000 || !(.x == null)
SET .source = "x", .n = &add(.a, 1), .b = b64"aGk=", .f = -0.0, .big = 9007199254740993
SELECT .body AS .payload DEFAULT "none", .q
WITH timeout = 2000, label = "v2"
PRIORITY 5
EXEC "https://hook.example.com/processed"
EMIT .meta.processed_at = &now("rfc3339") # a comment
'''


def _result(text: str, filename: str):
    clear_cache()
    try:
        return parse_rule(text, filename)
    except TxclSyntaxError as exc:
        return list(exc.diagnostics)


def _same(a, b) -> None:
    """Equal, spans, file names and diagnostics' texts included."""
    if isinstance(a, ast.Rule):
        assert isinstance(b, ast.Rule)
        assert a == b and a.filename == b.filename
        assert ast.to_json(a) == ast.to_json(b)  # spans included (not part of ==)
    else:
        assert [(d.code, d.message, d.file, d.span, d.hint, d.severity, d.source) for d in a] == \
               [(d.code, d.message, d.file, d.span, d.hint, d.severity, d.source) for d in b]


@pytest.fixture
def parsing_only(monkeypatch):
    """Every parse really parses (no disk cache, whatever earlier tests turned on)."""
    monkeypatch.setattr(diskcache, "_ACTIVE", None)


def test_the_stored_form_of_every_corpus_text_decodes_to_its_parse(parsing_only):
    seen = rules = errors = 0
    for where, text in corpus_texts():
        stored = codec.encode(_result(text, "a.txcl"), text, "a.txcl")
        _same(codec.decode(stored, text, "a.txcl"), _result(text, "a.txcl"))
        decoded = codec.decode(stored, text, "elsewhere/b.txcl")  # one entry serves any name
        expected = _result(text, "elsewhere/b.txcl")
        _same(decoded, expected)
        seen += 1
        rules += isinstance(expected, ast.Rule)
        errors += not isinstance(expected, ast.Rule)
    assert seen > 500 and rules > 300 and errors > 20


def test_a_decoded_regex_is_compiled_where_it_is_used(parsing_only):
    from txcl.evaluate.when import closure_condition, compile_condition

    rule = codec.decode(codec.encode(_result(RULE, "r.txcl"), RULE, "r.txcl"), RULE, "r.txcl")
    regex = rule.when.condition.items[0].items[0].right
    assert isinstance(regex, ast.Regex) and regex.compiled is None
    for make in (compile_condition, closure_condition):  # generated code, and the reference closures
        check = make(rule.when.condition)
        assert check({"user": {"id": "u_1"}, "amount": 2000, "x": None}) is True
        assert check({"user": {"id": "v_1"}, "amount": 2000, "x": None}) is False


def test_damaged_data_is_refused(parsing_only):
    stored = codec.encode(_result(RULE, "r.txcl"), RULE, "r.txcl")
    for bad in (b"", b"garbage", stored[: len(stored) // 2]):
        with pytest.raises(Exception):
            codec.decode(bad, RULE, "r.txcl")


@pytest.fixture
def cache_file(tmp_path, monkeypatch):
    path = tmp_path / "cache" / "parse.sqlite3"
    monkeypatch.setenv("TXCL_PARSE_CACHE", str(path))
    previous = diskcache.active()
    yield path
    diskcache.disable()
    if previous is not None:
        diskcache.enable(previous.path)
    clear_cache()


def _count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM entries").fetchone()[0]


def test_a_parse_is_read_back_from_the_cache(cache_file):
    cache = diskcache.enable()
    assert cache is not None and cache.path == cache_file
    first = _result(RULE, "one.txcl")
    diskcache.flush()
    assert _count(cache_file) == 1 and cache.misses == 1
    assert cache_file.stat().st_mode & 0o077 == 0  # the user's rules: readable by the user only
    again = _result(RULE, "two.txcl")
    assert cache.hits == 1
    _same(again, codec.decode(codec.encode(first, RULE, "one.txcl"), RULE, "two.txcl"))
    _same(_result("WHEN .a ==\nEMIT .b = 1\n  ", "bad.txcl"), _result("WHEN .a ==\nEMIT .b = 1\n  ", "bad.txcl"))


def test_another_process_reads_what_one_wrote(cache_file, tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    for i in range(5):
        (rules / f"r{i}.txcl").write_text(RULE.replace("1000", str(1000 + i)), encoding="utf-8")
    script = ("import sys, pathlib\n"
              "from txcl.syntax import diskcache\n"
              "from txcl.syntax.parser import parse_source\n"
              "cache = diskcache.enable()\n"
              "for p in sorted(pathlib.Path(sys.argv[1]).glob('*.txcl')):\n"
              "    parse_source(p.read_bytes(), str(p))\n"
              "diskcache.disable()\n"
              "print(cache.hits, cache.misses)\n")
    env = {**os.environ, "TXCL_PARSE_CACHE": str(cache_file)}

    def run() -> str:
        return subprocess.run([sys.executable, "-c", script, str(rules)], env=env, capture_output=True, text=True,
                              check=True).stdout.split()

    assert run() == ["0", "5"]
    assert run() == ["5", "0"]


def test_an_entry_of_another_version_is_not_read(cache_file, monkeypatch):
    diskcache.enable()
    _result(RULE, "r.txcl")
    diskcache.disable()
    monkeypatch.setattr(diskcache, "cache_version", lambda: "0000000000000000")
    cache = diskcache.enable()
    _result(RULE, "r.txcl")
    assert cache.hits == 0 and cache.misses == 1


def test_a_damaged_entry_is_parsed_again_and_replaced(cache_file):
    cache = diskcache.enable()
    _result(RULE, "r.txcl")
    diskcache.flush()
    with sqlite3.connect(cache_file) as conn:
        conn.execute("UPDATE entries SET data = x'00ff'")
    assert isinstance(_result(RULE, "r.txcl"), ast.Rule)
    diskcache.flush()
    with sqlite3.connect(cache_file) as conn:
        assert conn.execute("SELECT length(data) FROM entries").fetchone()[0] > 100
    assert isinstance(_result(RULE, "r.txcl"), ast.Rule) and cache.hits == 1  # the damaged one was a miss


def test_a_file_that_is_not_a_database_turns_the_cache_off(cache_file):
    cache_file.parent.mkdir(parents=True)
    cache_file.write_bytes(b"this is not a database" * 100)
    cache = diskcache.enable()
    assert isinstance(_result(RULE, "r.txcl"), ast.Rule)
    diskcache.flush()
    assert cache.broken
    assert isinstance(_result(RULE, "r.txcl"), ast.Rule)


def test_the_cache_may_be_deleted_while_in_use(cache_file):
    diskcache.enable()
    _result(RULE, "r.txcl")
    diskcache.flush()
    diskcache.disable()
    for suffix in ("", "-wal", "-shm"):
        Path(str(cache_file) + suffix).unlink(missing_ok=True)
    cache = diskcache.enable()
    assert isinstance(_result(RULE, "r.txcl"), ast.Rule) and cache.misses == 1
    diskcache.flush()
    assert _count(cache_file) == 1


def test_off_means_off(monkeypatch):
    monkeypatch.setenv("TXCL_PARSE_CACHE", "off")
    assert diskcache.default_path() is None
    previous = diskcache.active()
    try:
        diskcache.disable()
        assert diskcache.enable() is None and diskcache.active() is None
    finally:
        if previous is not None:
            diskcache.enable(previous.path)


def test_the_cache_keeps_at_most_its_limit(cache_file, monkeypatch):
    monkeypatch.setattr(diskcache, "MAX_ENTRIES", 10)
    diskcache.enable()
    for i in range(30):
        _result(RULE.replace("1000", str(i)), "r.txcl")
    diskcache.flush()
    assert _count(cache_file) == 10


def test_parsing_many_pauses_the_collector_and_restores_it(cache_file):
    assert gc.isenabled()
    with parsing_many():
        assert not gc.isenabled()
        with parsing_many():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner one leaves it as it found it
    assert gc.isenabled()
    gc.disable()
    try:
        with parsing_many():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def _parse_in_child(text: str) -> int:
    from txcl.syntax.batch import parsing_many as many

    with many():  # as txcl check's forked workers do: written when the chunk ends
        _result(text, "child.txcl")
    cache = diskcache.active()
    return cache.misses if cache is not None else -1


def test_a_forked_worker_writes_through_a_connection_of_its_own(cache_file):
    import multiprocessing

    cache = diskcache.enable()
    _result(RULE, "parent.txcl")  # the parent's connection is open
    diskcache.flush()
    other = RULE.replace("1000", "2000")
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(_parse_in_child, (other,)) >= 1
    assert _count(cache_file) == 2
    _result(other, "parent.txcl")
    assert cache.hits == 1  # the parent reads what the child wrote
