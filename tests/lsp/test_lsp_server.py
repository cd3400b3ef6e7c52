"""End to end: `txcl lsp` in a subprocess driven by pytest-lsp."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER = [sys.executable, "-m", "txcl", "lsp"]
FN_DOC_MARK = "takes 0 or 1 argument"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), scope="module", loop_scope="module")
async def client(lsp_client: LanguageClient):
    lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
        root_uri=Path.cwd().as_uri(),
    ))
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="txcl", version=version, text=text)))


async def _diagnostics(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return list(client.diagnostics[uri])


@pytest.mark.asyncio(loop_scope="module")
async def test_initialize_advertises_features(client: LanguageClient) -> None:
    caps = client.init_result.capabilities  # type: ignore[attr-defined]
    assert caps.hover_provider
    assert caps.completion_provider is not None
    assert "&" in caps.completion_provider.trigger_characters
    assert caps.document_symbol_provider
    assert caps.document_formatting_provider
    assert caps.position_encoding in (types.PositionEncodingKind.Utf16, "utf-16")


@pytest.mark.asyncio(loop_scope="module")
async def test_diagnostic_range_counts_utf16_units(client: LanguageClient) -> None:
    # Two non-BMP characters (2 UTF-16 units each) sit before the error on line 2.
    uri = "file:///tmp/lsp-test/OPS/shop/0100/emoji.txcl"
    text = 'WHEN .a == 1\nSET .s = "😀😀" .x  "EUR"\n'
    _open(client, uri, text)
    diags = await _diagnostics(client, uri)
    assert len(diags) == 1
    d = diags[0]
    assert d.code == "TX014"
    assert d.severity == types.DiagnosticSeverity.Error
    assert d.source == "txcl"
    # "EUR" (with quotes) starts at code point 18 of the line (0-based) = UTF-16 unit 20.
    assert d.range == types.Range(types.Position(1, 20), types.Position(1, 25))


@pytest.mark.asyncio(loop_scope="module")
async def test_diagnostics_follow_changes(client: LanguageClient) -> None:
    uri = "file:///tmp/lsp-test/change.txcl"
    _open(client, uri, "WHEN .a ==\n")
    diags = await _diagnostics(client, uri)
    assert diags and diags[0].severity == types.DiagnosticSeverity.Error
    # end-of-input error: clamped into the document
    assert diags[0].range.start.line in (0, 1)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="WHEN .a == 1\n")]))
    diags = await _diagnostics(client, uri)
    assert not [d for d in diags if d.severity == types.DiagnosticSeverity.Error]


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_on_function_and_keyword(client: LanguageClient) -> None:
    uri = "file:///tmp/lsp-test/hover.txcl"
    text = 'SET .s = "😀"\nEMIT .t = &now("rfc3339")\n'
    _open(client, uri, text)
    await _diagnostics(client, uri)
    result = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(1, 12)))
    assert result is not None
    assert "&now([fmt])" in result.contents.value
    assert FN_DOC_MARK in result.contents.value
    assert result.range == types.Range(types.Position(1, 10), types.Position(1, 14))
    result = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 1)))
    assert result is not None and "SET" in result.contents.value and "SET PRE" in result.contents.value
    # after the emoji on line 0: a position inside the string has no hover
    result = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 11)))
    assert result is None


@pytest.mark.asyncio(loop_scope="module")
async def test_completion(client: LanguageClient) -> None:
    uri = "file:///tmp/lsp-test/complete.txcl"
    text = 'WHEN .order.total > 1\nWITH tim\nEMIT .x = &no\nEXEC "ht'
    _open(client, uri, text)
    await _diagnostics(client, uri)

    async def labels(line: int, character: int) -> dict[str, types.CompletionItem]:
        result = await client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, character)))
        items = result.items if isinstance(result, types.CompletionList) else result
        return {item.label: item for item in items}

    found = await labels(1, 8)
    assert "timeout" in found
    assert found["timeout"].kind == types.CompletionItemKind.Property
    found = await labels(2, 13)
    assert "&now()" in found
    item = found["&now()"]
    assert item.kind == types.CompletionItemKind.Function
    assert item.detail == "&now([fmt])"
    assert item.text_edit.new_text == "&now($0)"
    assert item.text_edit.range == types.Range(types.Position(2, 10), types.Position(2, 13))
    found = await labels(3, 8)
    assert {"https://", "http://"} <= set(found)
    found = await labels(1, 2)
    assert "WITH" in found or "with" in {k.lower() for k in found}
    # paths used elsewhere in the document complete one level at a time
    uri2 = "file:///tmp/lsp-test/paths.txcl"
    _open(client, uri2, 'WHEN .order.total > 1 && @web.req.path == "/"\nSET .y = .order.')
    await _diagnostics(client, uri2)
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri2), position=types.Position(1, 16)))
    assert [item.label for item in result.items] == [".order.total"]
    assert result.items[0].kind == types.CompletionItemKind.Variable


@pytest.mark.asyncio(loop_scope="module")
async def test_document_symbols_and_formatting(client: LanguageClient) -> None:
    uri = "file:///tmp/lsp-test/outline.txcl"
    text = 'when .a==1   emit .b=2 , .c = "😀"\nexec "txco://noop"\n'
    _open(client, uri, text)
    await _diagnostics(client, uri)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert [s.name for s in symbols] == ["WHEN", "EMIT", "EXEC"]
    emit = symbols[1]
    assert [c.name for c in emit.children] == [".b", ".c"]
    assert emit.range.start == types.Position(0, 13)
    assert emit.range.end == types.Position(0, 34)  # 33 code points; the emoji counts 2 units
    edits = await client.text_document_formatting_async(types.DocumentFormattingParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        options=types.FormattingOptions(tab_size=2, insert_spaces=True)))
    assert edits and len(edits) == 1
    assert edits[0].range.start == types.Position(0, 0)
    assert edits[0].new_text.startswith("WHEN .a == 1\n")
    assert "EMIT .b = 2" in edits[0].new_text


@pytest.mark.asyncio(loop_scope="module")
async def test_a_lone_cr_moves_ranges_to_the_clients_next_line(client: LanguageClient) -> None:
    """txcl reads a lone CR as whitespace; the client breaks the line there, so the range
    of an error after it is on the client's second line."""
    uri = "file:///tmp/lsp-test/OPS/shop/0100/cr.txcl"
    _open(client, uri, 'WHEN .a == 1\rSET .s = "a" .x  "EUR"\n')
    diags = await _diagnostics(client, uri)
    assert [d.code for d in diags] == ["TX014"]
    assert diags[0].range == types.Range(types.Position(1, 17), types.Position(1, 22))


@pytest.mark.asyncio(loop_scope="module")
async def test_a_lone_surrogate_is_reported_not_dropped(client: LanguageClient) -> None:
    uri = "file:///tmp/lsp-test/OPS/shop/0100/surrogate.txcl"
    _open(client, uri, 'SET .a = "\ud800"\n')
    diags = await _diagnostics(client, uri)
    assert [d.code for d in diags] == ["TX002"]
    assert diags[0].range.start == types.Position(0, 10)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_deferred_ops_output_read_before_its_join_is_shown(client: LanguageClient, tmp_path: Path) -> None:
    """Tree-wide findings reach the editor: TX222 on a scope that reads what a deferred op
    writes before its join; editing the buffer (unsaved) to read something else clears it."""
    import shutil

    tree = tmp_path / "ws"
    shutil.copytree(Path(__file__).parents[1] / "check" / "fixtures" / "trees" / "TX222_jumps", tree)
    path = tree / "OPS" / "s" / "0200" / "check.txcl"
    uri = path.as_uri()
    _open(client, uri, path.read_text())
    diags = [d for d in await _diagnostics(client, uri) if d.code == "TX222"]
    assert len(diags) == 1
    assert diags[0].range.start == types.Position(0, 5)
    assert "job (scope 100) writes .score only when it joins at scope 400" in diags[0].message
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text='WHEN .other > 5\nEMIT @goto = "s/50"\n')]))
    assert [d for d in await _diagnostics(client, uri) if d.code == "TX222"] == []


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


async def _open_tree(client: LanguageClient, root: Path, files: dict[str, str], first: str) -> str:
    """Write the tree, open `first` in the editor as saved and wait for its diagnostics; its URI."""
    _write(root, files)
    uri = (root / first).as_uri()
    _open(client, uri, files[first])
    await _diagnostics(client, uri)
    return uri


def _typed_tree(tmp_path: Path) -> Path:
    import shutil

    tree = tmp_path / "typed"
    shutil.copytree(Path(__file__).parents[1] / "check" / "fixtures" / "trees" / "typed", tree)
    return tree


@pytest.mark.asyncio(loop_scope="module")
async def test_typed_paths_complete_hover_and_lead_to_their_definition(client: LanguageClient, tmp_path: Path) -> None:
    """In a typed stack, completion offers every path the envelope can hold at the rule's
    scope (with its type and description), hover says where a path comes from, and
    go-to-definition opens the schema property and the rules that write it."""
    tree = _typed_tree(tmp_path)
    path = tree / "OPS" / "shop" / "0200_b" / "e.txcl"
    uri = path.as_uri()
    text = "WHEN .order.\nEMIT .x = 1\n"
    _open(client, uri, text)
    await _diagnostics(client, uri)
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 12)))
    items = {i.label: i for i in (result.items if isinstance(result, types.CompletionList) else result)}
    assert ".order.total" in items and ".order.status" in items  # from the schema, not the document
    assert "number" in (items[".order.total"].detail or "") and "total in cents" in items[".order.total"].detail
    hover_text = "WHEN .order.total > 1\nEMIT .x = .discount\n"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=hover_text)]))
    await _diagnostics(client, uri)
    hovered = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 8)))
    assert "number" in hovered.contents.value and "schema.json" in hovered.contents.value
    hovered = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(1, 12)))
    assert "maybe missing" in hovered.contents.value and "d.txcl" in hovered.contents.value
    places = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 8)))
    assert [p.uri.rsplit("/", 1)[-1] for p in places] == ["schema.json"]
    assert places[0].range.start.line == 8  # "total" in OPS/shop/schema.json
    places = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(1, 12)))
    assert {p.uri.rsplit("/", 1)[-1] for p in places} == {"schema.json", "d.txcl"}


@pytest.mark.asyncio(loop_scope="module")
async def test_a_schema_file_gets_live_diagnostics(client: LanguageClient, tmp_path: Path) -> None:
    tree = _typed_tree(tmp_path)
    path = tree / "OPS" / "shop" / "schema.json"
    uri = path.as_uri()
    _open(client, uri, path.read_text().replace('"type": "number"', '"type": "numbr"'))
    diags = await _diagnostics(client, uri)
    assert [d.code for d in diags if d.code == "TX260"] == ["TX260"]
    assert "did you mean" in diags[0].message or any("numbr" in d.message for d in diags)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_jump_leads_to_the_rules_of_its_scope(client: LanguageClient, tmp_path: Path) -> None:
    """Go-to-definition on `EMIT @goto = "300"`, `EXEC "goto://250"` or `EXEC "billing/100"`
    opens the rule files of the scope the walk enters (the next one at or after the number),
    even while another rule of the tree does not load."""
    files = {"OPS/shop/0100_a/go.txcl": 'EMIT @goto = "300"\n', "OPS/shop/0300_c/c.txcl": "EMIT .c = 1\n",
             "OPS/shop/0300_c/d.txcl": "EMIT .d = 1\n", "OPS/billing/0100/b.txcl": "EMIT .b = 1\n",
             "OPS/shop/0400/broken.txcl": "WHEN WHEN\n"}
    _write(tmp_path, files)
    uri = (tmp_path / "OPS/shop/0100_a/go.txcl").as_uri()
    cases = [('EMIT @goto = "300"\n', 15, ["c.txcl", "d.txcl"]), ('EXEC "goto://250"\n', 8, ["c.txcl", "d.txcl"]),
             ('EXEC "billing/100"\n', 8, ["b.txcl"]), ('EMIT @goto = "900"\n', 15, None)]
    for version, (text, column, wanted) in enumerate(cases, start=1):
        if version == 1:
            _open(client, uri, text)
        else:
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        await _diagnostics(client, uri)
        places = await client.text_document_definition_async(types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, column)))
        got = [p.uri.rsplit("/", 1)[-1] for p in places] if places else None
        assert got == wanted, (text, got)


@pytest.mark.asyncio(loop_scope="module")
async def test_references_find_every_reader_and_writer_and_every_jump(client: LanguageClient, tmp_path: Path) -> None:
    """Find references on a path lists the rules of the tree that read or write it (the unsaved
    text of the open document included, a broken file skipped); on a jump, every jump to the
    same stage."""
    files = {"OPS/shop/0100/a.txcl": "EMIT .order.total = 10\n",
             "OPS/shop/0200/b.txcl": 'WHEN .order.total > 5\nEMIT @goto = "400", .seen = true\n',
             "OPS/shop/0300/c.txcl": 'SELECT .order.total AS .t\nEXEC "goto://400"\n',
             "OPS/shop/0350/broken.txcl": "WHEN WHEN .order.total\n",
             "OPS/shop/0400/d.txcl": "EMIT .other = .order.totals\n"}
    _write(tmp_path, files)
    uri = (tmp_path / "OPS/shop/0100/a.txcl").as_uri()
    _open(client, uri, "EMIT .order.total = 10, .x = .order.total\n")  # unsaved: a second use
    await _diagnostics(client, uri)
    places = await client.text_document_references_async(types.ReferenceParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 8),
        context=types.ReferenceContext(include_declaration=True)))
    got = sorted((p.uri.rsplit("/", 1)[-1], p.range.start.line, p.range.start.character) for p in places)
    assert got == [("a.txcl", 0, 5), ("a.txcl", 0, 29), ("b.txcl", 0, 5), ("c.txcl", 0, 7)]
    other = (tmp_path / "OPS/shop/0200/b.txcl").as_uri()
    _open(client, other, files["OPS/shop/0200/b.txcl"])
    await _diagnostics(client, other)
    jumps = await client.text_document_references_async(types.ReferenceParams(
        text_document=types.TextDocumentIdentifier(uri=other), position=types.Position(1, 15),
        context=types.ReferenceContext(include_declaration=True)))
    assert sorted(p.uri.rsplit("/", 1)[-1] for p in jumps) == ["b.txcl", "c.txcl"]


@pytest.mark.asyncio(loop_scope="module")
async def test_code_actions_fix_and_suppress(client: LanguageClient, tmp_path: Path) -> None:
    """A fixable finding offers its safe fix and "fix all"; any finding offers a # noqa
    suppression for its line (added to an existing # noqa list)."""
    uri = (tmp_path / "fix.txcl").as_uri()
    text = "EMIT .a = 012\nWHEN .x == 1  # noqa: TX999\n"
    _open(client, uri, text)
    diagnostics = await _diagnostics(client, uri)
    assert {d.code for d in diagnostics} >= {"TX201", "TX301"}
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(0, 0), end=types.Position(2, 0)),
        context=types.CodeActionContext(diagnostics=[d for d in diagnostics if d.code in ("TX201", "TX301")])))
    by_title = {a.title: a for a in actions}
    fix = by_title["Fix TX201 (leading-zero-number)"].edit.changes[uri][0]
    assert fix.new_text == "EMIT .a = 12\nWHEN .x == 1  # noqa: TX999\n"
    fix_all = by_title["Fix all safe fixes (txcl check --fix)"]
    assert fix_all.kind == types.CodeActionKind.SourceFixAll
    assert fix_all.edit.changes[uri][0].new_text.startswith("WHEN .x == 1") and "EMIT .a = 12" in \
        fix_all.edit.changes[uri][0].new_text
    suppress = by_title["Suppress TX201 on this line (# noqa: TX201)"].edit.changes[uri][0]
    assert (suppress.range.start.line, suppress.range.start.character, suppress.new_text) == (0, 13, "  # noqa: TX201")
    joined = by_title["Suppress TX301 on this line (# noqa: TX301)"].edit.changes[uri][0]
    assert (joined.range.start.character, joined.new_text) == (14, "# noqa: TX999, TX301")


@pytest.mark.asyncio(loop_scope="module")
async def test_jump_targets_complete_inside_goto_strings(client: LanguageClient, tmp_path: Path) -> None:
    _write(tmp_path, dict.fromkeys(("OPS/shop/0100_a/go.txcl", "OPS/shop/0300_c/c.txcl", "OPS/billing/0100/b.txcl"), "EMIT .a = 1\n"))
    uri = (tmp_path / "OPS/shop/0100_a/go.txcl").as_uri()
    _open(client, uri, 'EMIT @goto = "3')
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 15)))
    items = result.items if isinstance(result, types.CompletionList) else result
    assert [(i.label, i.detail) for i in items] == [("300", "scope 300 of this stack")]
    assert items[0].text_edit.range.start.character == 14  # replaces what was typed inside the string
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text='EXEC "goto://')]))
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 13)))
    items = result.items if isinstance(result, types.CompletionList) else result
    assert {i.label for i in items} == {"100", "300", "shop/100", "shop/300", "billing/100"}


@pytest.mark.asyncio(loop_scope="module")
async def test_workspace_symbols_and_folding(client: LanguageClient, tmp_path: Path) -> None:
    _write(tmp_path, dict.fromkeys(("OPS/shop/0100_a/check.txcl", "OPS/shop/0300_c/charge.txcl", "OPS/billing/0100/invoice.txcl"), "EMIT .a = 1\n"))
    uri = (tmp_path / "OPS/shop/0100_a/check.txcl").as_uri()
    text = "WHEN .a == 1\n  && .b == 2\nEMIT .x = 1,\n  .y = 2\n"
    _open(client, uri, text)
    await _diagnostics(client, uri)
    # the test client's workspace root is not this folder: ask through a folder it knows
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(added=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="t")],
                                                removed=[])))
    found = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="shop/"))
    names = {(s.name, s.kind) for s in found}
    assert ("shop/100", types.SymbolKind.Module) in names and ("shop/300/charge", types.SymbolKind.Function) in names
    assert not any(n.startswith("billing") for n, _ in names)
    charge = next(s for s in found if s.name == "shop/300/charge")
    assert charge.location.uri.endswith("OPS/shop/0300_c/charge.txcl") and charge.container_name == "shop/300"
    folds = await client.text_document_folding_range_async(types.FoldingRangeParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert [(f.start_line, f.end_line) for f in folds] == [(0, 1), (2, 3)]


@pytest.mark.asyncio(loop_scope="module")
async def test_rename_a_path_across_the_tree_or_refuse_with_the_reason(client: LanguageClient,
                                                                        tmp_path: Path) -> None:
    files = {"OPS/shop/0100/a.txcl": "EMIT .order.total = 10\n",
             "OPS/shop/0200/b.txcl": "WHEN .order.total > 5\nEMIT .seen = .order.total\n",
             "OPS/shop/0300/c.txcl": "SELECT .order.total AS .t\nEXEC \"https://w.example/x\"\n",
             "shop.test.yaml": "cases:\n  - name: x\n    input: {}\n    expect:\n      absent: [.order.total]\n"}
    uri = await _open_tree(client, tmp_path, files, "OPS/shop/0100/a.txcl")
    where = types.TextDocumentIdentifier(uri=uri)
    ready = await client.text_document_prepare_rename_async(types.PrepareRenameParams(
        text_document=where, position=types.Position(0, 8)))
    assert (ready.start.character, ready.end.character) == (5, 17)
    edit = await client.text_document_rename_async(types.RenameParams(
        text_document=where, position=types.Position(0, 8), new_name=".order.sum"))
    changed = {u.rsplit("/", 1)[-1]: [(e.range.start.line, e.range.start.character, e.new_text) for e in edits]
               for u, edits in edit.changes.items()}
    assert changed == {"a.txcl": [(0, 5, ".order.sum")], "b.txcl": [(0, 5, ".order.sum"), (1, 13, ".order.sum")],
                       "c.txcl": [(0, 7, ".order.sum")], "shop.test.yaml": [(4, 15, ".order.sum")]}
    refusals = [(".seen", "already used"), ("order.sum", "is not an envelope path"), ("@x", "is not an envelope path"),
                ("._txc.x", "reserved")]
    for new_name, reason in refusals:
        with pytest.raises(Exception, match=reason):
            await client.text_document_rename_async(types.RenameParams(
                text_document=where, position=types.Position(0, 8), new_name=new_name))
    (tmp_path / "OPS/shop/0400/d.txcl").parent.mkdir(parents=True)
    (tmp_path / "OPS/shop/0400/d.txcl").write_text('EMIT @delete = "order.total"\n')
    with pytest.raises(Exception, match="in a string, which only the run time resolves"):
        await client.text_document_rename_async(types.RenameParams(
            text_document=where, position=types.Position(0, 8), new_name=".order.sum"))
    (tmp_path / "OPS/shop/0400/d.txcl").write_text("WHEN WHEN\n")
    with pytest.raises(Exception, match="d.txcl does not parse"):
        await client.text_document_rename_async(types.RenameParams(
            text_document=where, position=types.Position(0, 8), new_name=".order.sum"))


@pytest.mark.asyncio(loop_scope="module")
async def test_definition_of_a_py_target_and_of_an_untyped_path(client: LanguageClient, tmp_path: Path) -> None:
    files = {"OPS/shop/0100/a.txcl": 'EXEC "py://ops.pricing:total"\n',
             "OPS/shop/0200/b.txcl": "EMIT .order.total = 10\n",
             "OPS/shop/0300/c.txcl": "EMIT .seen = .order.total\n",
             "ops/pricing.py": "import os\n\n\nasync def total(op_input, ctx):\n    return {}\n"}
    uri = await _open_tree(client, tmp_path, files, "OPS/shop/0100/a.txcl")
    places = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 12)))
    assert [(p.uri.rsplit("/", 1)[-1], p.range.start.line) for p in places] == [("pricing.py", 3)]
    reader = (tmp_path / "OPS/shop/0300/c.txcl").as_uri()
    _open(client, reader, files["OPS/shop/0300/c.txcl"])
    await _diagnostics(client, reader)
    places = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri=reader), position=types.Position(0, 17)))
    assert [(p.uri.rsplit("/", 1)[-1], p.range.start.line, p.range.start.character) for p in places] == [
        ("b.txcl", 0, 5)]  # the rule that writes it


@pytest.mark.asyncio(loop_scope="module")
async def test_code_lenses_run_test_and_debug(client: LanguageClient, tmp_path: Path) -> None:
    _write(tmp_path, {"OPS/shop/0100_a/check.txcl": "EMIT .a = 1\n",
                      "OPS/shop/0100_a/mock-request.json": '{"a": 0}\n',
                      "shop.test.yaml": "stack: shop\ncases:\n  - name: one\n    input: {}\n"
                                        "  - name: two\n    input: {b: 1}\n"})
    rule = tmp_path / "OPS/shop/0100_a/check.txcl"
    _open(client, rule.as_uri(), rule.read_text())
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=rule.as_uri())))
    assert [lens.command.title for lens in lenses] == ["▶ Run", "Test", "Debug"]
    run, _, debug = (lens.command for lens in lenses)
    assert run.command == "txcl.runInTerminal" and run.arguments[1][:3] == ["run", "--stack", "shop"]
    assert "--mock-request" in run.arguments[1]  # the rule's fixture is its input
    launch = debug.arguments[0]
    assert debug.command == "txcl.debug" and launch["type"] == "txcl" and launch["stopAt"] == ["shop/100/check"]
    assert launch["inputFile"].endswith("mock-request.json")
    tests = tmp_path / "shop.test.yaml"
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=tests.as_uri(), language_id="yaml", version=1, text=tests.read_text())))
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=tests.as_uri())))
    assert [(lens.range.start.line, lens.command.title) for lens in lenses] == [
        (2, "▶ Run"), (2, "Debug"), (4, "▶ Run"), (4, "Debug")]
    assert lenses[3].command.arguments[0]["test"] == f"{tests}::two"


@pytest.mark.asyncio(loop_scope="module")
async def test_semantic_tokens(client: LanguageClient, tmp_path: Path) -> None:
    legend = client.init_result.capabilities.semantic_tokens_provider.legend  # type: ignore[attr-defined]
    uri = (tmp_path / "OPS/shop/0100/tok.txcl").as_uri()
    text = 'WHEN .a == "é😀"\nEMIT @goto = &concat("s/", "1")\n'
    _open(client, uri, text)
    found = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    data, line, char, out = found.data, 0, 0, []
    for i in range(0, len(data), 5):
        line += data[i]
        char = data[i + 1] if data[i] else char + data[i + 1]
        out.append((line, char, data[i + 2], legend.token_types[data[i + 3]]))
    assert out == [(0, 0, 4, "keyword"), (0, 5, 2, "variable"), (0, 8, 2, "operator"),
                   (0, 11, 5, "string"),  # "é😀" with its quotes: 5 UTF-16 units
                   (1, 0, 4, "keyword"), (1, 5, 5, "macro"), (1, 11, 1, "operator"),
                   (1, 13, 7, "function"), (1, 21, 4, "string"), (1, 27, 3, "string")]


@pytest.mark.asyncio(loop_scope="module")
async def test_code_actions_create_the_join_scope_and_an_op_schema(client: LanguageClient, tmp_path: Path) -> None:
    """TX221 (the join scope does not exist) offers to create its folder with a rule that does
    nothing; an op of a typed stack without a schema offers a skeleton schema — and after
    applying them (as an editor would) the finding is gone and the schema file is valid."""
    files = {"OPS/shop/schema.json": '{"$defs": {"input": {"type": "object"}}}\n',
             "OPS/shop/0100/ask.txcl": 'SELECT .order.id, .customer AS .who\nWITH mode = "async", '
                                       'join_at_scope = 300, into = "reply"\nEXEC "https://w.example/ask"\n'}
    uri = await _open_tree(client, tmp_path, files, "OPS/shop/0100/ask.txcl")
    diagnostics = list(client.diagnostics[uri])
    assert "TX221" in {d.code for d in diagnostics}
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(1, 0), end=types.Position(1, 0)),
        context=types.CodeActionContext(diagnostics=[d for d in diagnostics if d.code == "TX221"])))
    by_title = {a.title: a for a in actions}
    create = by_title["Create the missing scope folder 0300 (with a rule that does nothing)"]
    made, text = create.edit.document_changes
    assert made.uri.endswith("OPS/shop/0300/join.txcl") and "WHEN *" in text.edits[0].new_text
    schema = by_title["Add the op schema ask.schema.json"]
    assert schema.kind == types.CodeActionKind.Source
    made_schema, schema_text = schema.edit.document_changes
    assert made_schema.uri.endswith("OPS/shop/0100/ask.schema.json")
    import json

    body = json.loads(schema_text.edits[0].new_text)
    assert body["$defs"]["input"]["properties"] == {"order": {}, "who": {}}
    assert body["$defs"]["output"]["properties"] == {"reply": {}}
    # apply both as the editor would; the tree checks clean of TX221 and of schema problems
    (tmp_path / "OPS/shop/0300").mkdir()
    (tmp_path / "OPS/shop/0300/join.txcl").write_text(text.edits[0].new_text)
    (tmp_path / "OPS/shop/0100/ask.schema.json").write_text(schema_text.edits[0].new_text)
    import subprocess

    done = subprocess.run([sys.executable, "-m", "txcl", "check", str(tmp_path), "--output-format", "concise"],
                          capture_output=True, text=True, timeout=120)
    assert "TX221" not in done.stdout and "TX260" not in done.stdout, done.stdout
