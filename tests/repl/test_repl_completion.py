"""REPL completion as plain function calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from txcl.functions.registry import REGISTRY
from txcl.repl.completion import complete

ENV = {
    "user": {"id": 1, "name": "ada", "tags": ["a", "b"]},
    "labels": {"app.kubernetes.io/name": "web"},
    "_txc": {"web": {"req": {"path": "/", "method": "GET"}}},
}


def texts(before: str, **kw) -> list[str]:
    return [c.text for c in complete(before, kw.pop("envelope", ENV), **kw)]


def test_functions_complete_with_signatures() -> None:
    found = complete("EMIT .t = &no", ENV)
    assert [c.text for c in found] == ["&now("]
    assert found[0].display == "&" + REGISTRY["now"].signature
    assert found[0].meta == REGISTRY["now"].doc
    assert found[0].start == -3
    assert set(texts("&")) == {f"&{n}(" for n in REGISTRY}
    assert texts("&try_") == sorted(f"&{n}(" for n in REGISTRY if n.startswith("try_"))


def test_paths_from_the_envelope_one_level_at_a_time() -> None:
    assert texts("WHEN .us") == [".user"]
    assert texts("WHEN .user.") == [".user.id", ".user.name", ".user.tags"]
    assert texts("SET .x = .user.tags.") == [".user.tags.0", ".user.tags.1"]
    assert texts("EMIT .a = .labels.") == ['.labels."app.kubernetes.io/name"']
    assert texts("WHEN @web.req.m") == ["@web.req.method"]
    assert texts("WHEN .nothing.") == []


def test_keywords_follow_the_typed_case() -> None:
    assert texts("wh") == ["when"]
    assert texts("WH") == ["WHEN"]
    assert "SELECT" in texts("WHEN .a == 1 SE") and "SET" in texts("WHEN .a == 1 SE")
    # EVERY / MAX / UNTIL are offered only inside LOOP
    assert texts("WITH ev") == []
    assert texts('EXEC "txco://x" LOOP UNTIL .a == 1 ev') == ["every"]


def test_with_keys_after_with() -> None:
    found = complete("WITH tim", ENV)
    assert [c.text for c in found] == ["timeout"]
    assert "duration" in found[0].meta
    assert "into" in texts("WITH timeout = 5, in")
    assert "into" not in texts("EMIT .a = 1 in")


def test_exec_schemes_inside_the_exec_string() -> None:
    assert texts('EXEC "') == ["txco://", "https://", "http://", "mcp+https://", "mcp+http://", "py://", "goto://"]
    assert texts('EXEC "mc') == ["mcp+https://", "mcp+http://"]
    assert texts('EXEC "h') == ["https://", "http://"]
    assert texts('EXEC "https://x/') == []
    assert texts('SET .a = "h') == []  # other strings: nothing


def test_meta_commands_and_their_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert texts(".r") == [".run", ".reset"]
    assert texts(".run ", stacks=["main", "shop", "shop/eu"]) == ["main", "shop", "shop/eu"]
    assert texts(".run sh", stacks=["main", "shop", "shop/eu"]) == ["shop", "shop/eu"]
    assert texts(".set .user.n") == [".user.name"]
    assert texts(".set .x &ad") == ["&add("]
    (tmp_path / "env.json").write_text("{}")
    (tmp_path / "rules").mkdir()
    monkeypatch.chdir(tmp_path)
    assert texts(".load e") == ["env.json"]
    assert texts(".load ") == ["env.json", "rules/"]
    # inside a rule, a leading "." is a path, never a command
    assert texts("WHEN .r") == []


def test_comments_and_strings_do_not_confuse_the_context() -> None:
    assert texts('WHEN .a == "WITH" # WITH\nSET .b = 1 in') == []
    assert texts('SET .a = "x" WITH ti') == ["timeout"]


def test_word_scanner_is_linear_on_unclosed_quotes():
    """The pattern that finds the word before the cursor runs on RE2 (linear time): on
    Python's backtracking engine these lines took 19 s and 40 s."""
    import re2

    from txcl.lsp import completion

    assert isinstance(completion._WORD, re2._Regexp)
    hostile = "." + '"a' * 21 + "\n "
    assert completion._WORD.search(hostile) is None
    line = 'WHEN .h."x" == "a"' + ' || .b == "c"' * 13 + "\nEMIT ."
    assert completion._WORD.search(line).group() == "."
    assert completion._WORD.search('SET .a."b').group() == '.a."b'


def test_paths_complete_from_the_stack_schema_as_well(tmp_path):
    """With a typed tree loaded, path completion offers what `$defs.input` declares, before any
    of it is in the working envelope; the envelope's own paths stay."""
    import json

    from txcl.repl.session import ReplSession

    (tmp_path / "OPS/shop/0100").mkdir(parents=True)
    (tmp_path / "OPS/shop/0100/a.txcl").write_text("EMIT .a = 1\n")
    (tmp_path / "OPS/shop/schema.json").write_text(json.dumps({"$defs": {"input": {"type": "object", "properties": {
        "order": {"type": "object", "properties": {"total": {"type": "number"}, "status": {"type": "string"}}}}}}}))
    session = ReplSession({"note": "x"}, tmp_path)
    envelope = session.completion_envelope()
    assert [c.text for c in complete(".order.", envelope)] == [".order.status", ".order.total"]
    assert ".note" in [c.text for c in complete(".", envelope)]
    plain = ReplSession({"note": "x"})
    assert complete(".order.", plain.completion_envelope()) == []


def test_a_lone_surrogate_in_the_text_does_not_break_completion():
    found = complete('EMIT .a = "\ud800"\nEMIT .b = .', {"b": 1})
    assert [c.text for c in found] == [".b"]
