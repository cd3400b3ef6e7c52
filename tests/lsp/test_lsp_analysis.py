"""The language server's analysis functions, without a client."""

from __future__ import annotations

from pathlib import Path

from txcl.lsp import analysis, vocabulary
from txcl.functions.registry import REGISTRY


def test_diagnostics_come_from_the_checker_with_config_and_stack(tmp_path: Path) -> None:
    rule = tmp_path / "OPS" / "shop" / "0100" / "r.txcl"
    rule.parent.mkdir(parents=True)
    text = "WHEN .a == 012\nEXEC \"txco://noop\"\n"  # TX201: leading zero (a checker warning)
    codes = [d.code for d in analysis.diagnostics_for(text, str(rule))]
    assert "TX201" in codes
    errors = analysis.diagnostics_for("WHEN .a ==\n", str(rule))
    assert errors and errors[0].severity == "error"
    assert analysis.stack_for_path(rule) == "shop"
    assert analysis.stack_for_path(tmp_path / "x.txcl") is None


def test_hover_texts() -> None:
    text = 'WITH timeout = "3s", custom = 1\nEMIT @ttl = &try_json(b64"e30=")'
    now = analysis.hover(text, text.index("try_json"))
    assert now is not None and "try_json" in now.markdown and REGISTRY["try_json"].doc in now.markdown
    assert "WITH timeout" in analysis.hover(text, text.index("timeout") + 2).markdown
    assert "op itself" in analysis.hover(text, text.index("custom")).markdown
    assert "._txc.ttl" in analysis.hover(text, text.index("@ttl")).markdown
    assert "base64" in analysis.hover(text, text.index("b64")).markdown
    assert analysis.hover(text, text.index("3s")) is None
    with_kw = analysis.hover(text, 0)
    assert with_kw is not None and with_kw.span.as_list() == [1, 1, 1, 5]


def test_every_keyword_and_function_has_documentation() -> None:
    for word in vocabulary.keywords():
        assert vocabulary.keyword_markdown(word), word
    names = [info.name for info in vocabulary.functions()]
    assert names == sorted(REGISTRY)
    for info in vocabulary.functions():
        assert info.doc and info.signature.startswith(info.name + "(")


def test_with_keys_cover_the_runtime_table() -> None:
    keys = {k.name for k in vocabulary.WITH_KEYS}
    assert {"timeout", "mode", "continue_after", "join_at_scope", "each", "window", "on_item_error",
            "max_duration", "into", "method", "url", "status_into", "headers", "body_encoding",
            "body_path", "redact", "omit", "debug", "tolerated_failures", "heartbeat", "join_deadline",
            "on_join_deadline", "join_wait", "cancel_url", "retries", "retry_backoff", "validate"} == keys


def test_outline_from_clause_marks() -> None:
    text = ("WHEN .a == 1\nSET .x = 1\nSELECT .a AS .b, .c\nSET .post = 2\nWITH into = \"r\"\n"
            "EXEC \"https://x.example\"\nLOOP UNTIL .done == true MAX 3\nEMIT .y = 2\n")
    symbols = analysis.outline(text)
    assert [(s.name, s.kind) for s in symbols] == [
        ("WHEN", "when"), ("SET", "set_pre"), ("SELECT", "select"), ("SET", "set_post"),
        ("WITH", "with"), ("EXEC", "exec"), ("LOOP", "loop"), ("EMIT", "emit")]
    assert [c.name for c in symbols[2].children] == [".b", ".c"]
    assert [c.name for c in symbols[3].children] == [".post"]
    assert [c.name for c in symbols[6].children] == ["UNTIL", "MAX"]


def test_outline_of_a_broken_file_uses_the_keywords() -> None:
    symbols = analysis.outline("WHEN .a ==\nSET .x = 1 LOOP UNTIL .a == 1 SET .b = 2\nEMIT")
    assert [s.name for s in symbols] == ["WHEN", "SET", "LOOP", "EMIT"]
    assert symbols[2].span.as_list() == [2, 12, 2, 41]


def test_formatting_is_txcl_fmt() -> None:
    assert analysis.format_document("when .a==1   emit .b=2") == "WHEN .a == 1\nEMIT .b = 2\n"


def test_completion_offers_schemes_and_document_paths() -> None:
    text = 'WHEN .user.name == "x"\nEXEC "'
    assert [c.text for c in analysis.completions(text, len(text))][:2] == ["txco://", "https://"]
    text = 'WHEN .user.name == "x"\nEMIT .copy = .user.'
    assert [c.text for c in analysis.completions(text, len(text))] == [".user.name"]
    # no meta-commands in an editor
    assert all(c.kind != "command" for c in analysis.completions(".r", 2))


def test_completion_after_at_offers_the_reserved_facts_in_a_fresh_document():
    from txcl.lsp.analysis import completions

    texts = [c.text for c in completions("EMIT @", len("EMIT @"))]
    assert {"@halt", "@goto", "@delete", "@ttl", "@web.res"} <= set(texts)
    assert [c.text for c in completions("EMIT @go", len("EMIT @go"))] == ["@goto"]


def test_completion_of_a_with_key_offers_keys_not_constants():
    from txcl.lsp.analysis import completions

    at_key = [c.text for c in completions("WITH t", len("WITH t"))]
    assert "timeout" in at_key and "true" not in at_key
    after_pair = [c.text for c in completions('WITH into = "x, y", ti', len('WITH into = "x, y", ti'))]
    assert after_pair == ["timeout"]
    at_value = [c.text for c in completions("WITH retry = t", len("WITH retry = t"))]
    assert "true" in at_value


def test_tree_findings_follow_the_buffer_and_stay_out_of_loose_files(tmp_path: Path) -> None:
    import shutil

    tree = tmp_path / "ws"
    shutil.copytree(Path(__file__).parents[1] / "check" / "fixtures" / "trees" / "TX222_jumps", tree)
    early = tree / "OPS" / "s" / "0050" / "early.txcl"
    found = analysis.diagnostics_for(early.read_text(), str(early))
    assert [(d.code, d.line, d.column) for d in found if d.code == "TX222"] == [("TX222", 1, 27)]
    assert "reached through EMIT @goto" in next(d.message for d in found if d.code == "TX222")
    # the unsaved buffer, not the file on disk, decides: a noqa silences it (and is used)
    assert analysis.diagnostics_for(early.read_text().rstrip("\n") + "  # noqa: TX222\n", str(early)) == []
    loose = tmp_path / "loose.txcl"
    assert analysis.diagnostics_for("EMIT .x = .score\n", str(loose)) == []


def test_tree_findings_follow_changes_on_disk_between_keystrokes(tmp_path: Path) -> None:
    """The tree is kept between keystrokes (txcl/check/snapshot.py): an edited file is read
    again, a new folder or rule is scanned, a removed one is forgotten."""
    import shutil

    tree = tmp_path / "ws"
    shutil.copytree(Path(__file__).parents[1] / "check" / "fixtures" / "trees" / "TX222_jumps", tree)
    early = tree / "OPS" / "s" / "0050" / "early.txcl"

    def tx222() -> int:
        return sum(d.code == "TX222" for d in analysis.diagnostics_for(early.read_text(), str(early)))

    assert tx222() == 1
    jumper = tree / "OPS" / "s" / "0200" / "check.txcl"
    jumper.write_text("WHEN .score > 5\nEMIT .checked = true\n")  # the jump back to 50 is gone
    assert tx222() == 0
    (tree / "OPS" / "s" / "0250").mkdir()
    (tree / "OPS" / "s" / "0250" / "back.txcl").write_text('EMIT @goto = "s/50"\n')  # a new jump back
    assert tx222() == 1
    shutil.rmtree(tree / "OPS" / "s" / "0250")
    assert tx222() == 0
