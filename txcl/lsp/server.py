"""`txcl lsp`: the TXCL language server on pygls.

Features: diagnostics as you type (open/change/save), hover on functions, keywords, WITH keys
and `@` paths, completion (keywords, functions, WITH keys, EXEC schemes, paths used in the
document, scope targets of jumps), go to definition, references, rename, code actions, code
lenses (txcl/lsp/lenses.py), semantic tokens (txcl/lsp/semantic.py), document and workspace
symbols, folding ranges and formatting through `txcl fmt`.
The work happens in `txcl.lsp.analysis`; this module converts positions (negotiated
encoding, UTF-16 by default) and LSP types.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from txcl import __version__
from txcl.errors import Diagnostic, Position, Span, TxclError, TxclSyntaxError
from txcl.lsp import analysis, positions, semantic

log = logging.getLogger(__name__)

SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}
SYMBOL_KIND = {
    "when": types.SymbolKind.Event,
    "set_pre": types.SymbolKind.Property,
    "set_post": types.SymbolKind.Property,
    "select": types.SymbolKind.Struct,
    "with": types.SymbolKind.Object,
    "priority": types.SymbolKind.Number,
    "exec": types.SymbolKind.Function,
    "loop": types.SymbolKind.Operator,
    "emit": types.SymbolKind.Property,
    "loop_modifier": types.SymbolKind.Key,
    "item": types.SymbolKind.Field,
}
COMPLETION_KIND = {
    "keyword": types.CompletionItemKind.Keyword,
    "function": types.CompletionItemKind.Function,
    "path": types.CompletionItemKind.Variable,
    "with-key": types.CompletionItemKind.Property,
    "scheme": types.CompletionItemKind.Module,
    "stage": types.CompletionItemKind.Reference,
}


class TxclLanguageServer(LanguageServer):
    def encoding(self) -> str:
        """The negotiated position encoding as "utf-8" / "utf-16" / "utf-32"."""
        value = str(getattr(self.workspace, "position_encoding", None) or "utf-16")
        return value if value in (positions.UTF8, positions.UTF32) else positions.UTF16

    def lsp_range(self, index: positions.LineIndex, span: Span) -> types.Range:
        enc = self.encoding()
        sl, sc = index.to_lsp(span.start.line, span.start.column, enc)
        el, ec = index.to_lsp(span.end.line, span.end.column, enc)
        if (el, ec) < (sl, sc):
            el, ec = sl, sc
        return types.Range(types.Position(sl, sc), types.Position(el, ec))

    def offset(self, text: str, position: types.Position) -> int:
        return positions.LineIndex(text).from_lsp(position.line, position.character, self.encoding())


server = TxclLanguageServer("txcl", __version__)


def _path(uri: str) -> str | None:
    try:
        return to_fs_path(uri) if uri.startswith("file:") else None
    except Exception:
        return None


def _guarded(default: Any) -> Any:
    """Log a handler's unexpected exception and answer `default` instead of an error."""

    def wrap(fn: Any) -> Any:
        def handler(ls: TxclLanguageServer, params: Any) -> Any:
            try:
                return fn(ls, params)
            except Exception:
                log.exception("%s failed", fn.__name__)
                return default

        handler.__name__ = fn.__name__
        handler.__doc__ = fn.__doc__
        return handler

    return wrap


def to_lsp_diagnostic(ls: TxclLanguageServer, index: positions.LineIndex, diag: Diagnostic) -> types.Diagnostic:
    message = diag.message if not diag.hint else f"{diag.message}\nhint: {diag.hint}"
    return types.Diagnostic(
        range=ls.lsp_range(index, diag.span),
        message=message,
        severity=SEVERITY.get(diag.severity, types.DiagnosticSeverity.Error),
        code=diag.code,
        source="txcl",
    )


def publish(ls: TxclLanguageServer, uri: str, version: int | None = None) -> None:
    doc = ls.workspace.get_text_document(uri)
    text = doc.source
    try:
        found = analysis.diagnostics_for(text, _path(uri))
    except Exception:  # never let one bad buffer take the server down
        log.exception("diagnostics failed for %s", uri)
        found = []
    index = positions.LineIndex(text)
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
        uri=uri, version=version, diagnostics=[to_lsp_diagnostic(ls, index, d) for d in found]))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TxclLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    publish(ls, params.text_document.uri, params.text_document.version)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TxclLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    publish(ls, params.text_document.uri, params.text_document.version)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: TxclLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: TxclLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(types.TEXT_DOCUMENT_HOVER)
@_guarded(None)
def hover(ls: TxclLanguageServer, params: types.HoverParams) -> types.Hover | None:
    text = ls.workspace.get_text_document(params.text_document.uri).source
    found = analysis.hover(text, ls.offset(text, params.position), _path(params.text_document.uri))
    if found is None:
        return None
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=found.markdown),
        range=ls.lsp_range(positions.LineIndex(text), found.span),
    )


@server.feature(types.TEXT_DOCUMENT_COMPLETION,
                types.CompletionOptions(trigger_characters=["&", ".", "@", '"']))
@_guarded(types.CompletionList(is_incomplete=False, items=[]))
def completion(ls: TxclLanguageServer, params: types.CompletionParams) -> types.CompletionList:
    text = ls.workspace.get_text_document(params.text_document.uri).source
    offset = ls.offset(text, params.position)
    index = positions.LineIndex(text)
    items = []
    for cand in analysis.completions(text, offset, _path(params.text_document.uri)):
        start = analysis.position_at(text, offset + cand.start)
        end = analysis.position_at(text, offset)
        edit_range = ls.lsp_range(index, Span(start, end))
        item = types.CompletionItem(
            label=cand.display if cand.kind != "function" else cand.text + ")",
            kind=COMPLETION_KIND.get(cand.kind, types.CompletionItemKind.Text),
            detail=cand.display if cand.kind == "function" else (cand.meta or None),
            text_edit=types.TextEdit(range=edit_range, new_text=cand.text),
            filter_text=cand.text,
        )
        if cand.kind == "function":
            item.text_edit = types.TextEdit(range=edit_range, new_text=cand.text + "$0)")
            item.insert_text_format = types.InsertTextFormat.Snippet
            info = analysis.vocabulary.function_info(cand.text[1:-1])
            if info is not None:
                item.documentation = types.MarkupContent(
                    kind=types.MarkupKind.Markdown, value=analysis.vocabulary.function_markdown(info))
        elif cand.kind == "keyword":
            doc = analysis.vocabulary.keyword_markdown(cand.display)
            if doc:
                item.documentation = types.MarkupContent(kind=types.MarkupKind.Markdown, value=doc)
            item.label = cand.text
        elif cand.kind == "with-key":
            key = analysis.vocabulary.WITH_KEY_DOCS.get(cand.text)
            if key is not None:
                item.documentation = types.MarkupContent(kind=types.MarkupKind.Markdown, value=key.markdown())
        items.append(item)
    return types.CompletionList(is_incomplete=False, items=items)


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
@_guarded(None)
def definition(ls: TxclLanguageServer, params: types.DefinitionParams) -> list[types.Location] | None:
    """Go to where the thing under the cursor is defined: a jump's scope, a `py://` function,
    a path's schema property and the rules that write it."""
    text = ls.workspace.get_text_document(params.text_document.uri).source
    open_texts = _open_texts(ls)
    found = analysis.definition(text, ls.offset(text, params.position), _path(params.text_document.uri), open_texts)
    return _locations(ls, found, open_texts) or None


def _open_texts(ls: TxclLanguageServer) -> dict[Path, str]:
    """The text of every open document with a file, by resolved path (unsaved edits included)."""
    out = {}
    for uri, doc in ls.workspace.text_documents.items():
        path = _path(uri)
        if path is not None:
            out[Path(path).resolve()] = doc.source
    return out


def _locations(ls: TxclLanguageServer, found: list, texts: dict | None = None) -> list[types.Location]:
    """LSP locations of (file, span) pairs (`texts`: the unsaved text of open documents)."""
    out = []
    for file, span in found:
        text = (texts or {}).get(Path(file).resolve())
        if text is None:
            try:
                text = Path(file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        out.append(types.Location(uri=Path(file).as_uri(), range=ls.lsp_range(positions.LineIndex(text), span)))
    return out


@server.feature(types.TEXT_DOCUMENT_REFERENCES)
@_guarded(None)
def references(ls: TxclLanguageServer, params: types.ReferenceParams) -> list[types.Location] | None:
    """Every rule of the tree that reads or writes the path under the cursor, or every jump to
    the stage of the jump under it."""
    from txcl.lsp.references import references as find

    text = ls.workspace.get_text_document(params.text_document.uri).source
    open_texts = _open_texts(ls)
    found = find(text, ls.offset(text, params.position), _path(params.text_document.uri), open_texts)
    return _locations(ls, found, open_texts) or None


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix,
                                                           types.CodeActionKind.SourceFixAll,
                                                           types.CodeActionKind.Source]))
@_guarded(None)
def code_action(ls: TxclLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    """Quick fixes for the findings under the cursor: the safe fixes, # noqa suppressions, the
    missing join scope's folder; and adding an op's schema in a typed stack."""
    from txcl.lsp.actions import code_actions, op_schema_action

    uri = params.text_document.uri
    text = ls.workspace.get_text_document(uri).source
    findings = [(str(d.code), d.range.start.line) for d in params.context.diagnostics if d.code]
    index = positions.LineIndex(text)
    lines = text.split("\n")

    def span(line: int, start_col: int, end_line: int, end_col: int) -> Span:  # 0-based in, txcl's 1-based out
        return Span(Position(line + 1, start_col + 1, 0), Position(end_line + 1, end_col + 1, 0))

    whole = ls.lsp_range(index, span(0, 0, len(lines) - 1, len(lines[-1])))
    out = []
    actions = code_actions(text, _path(uri) or "<buffer>", findings)
    schema = op_schema_action(text, _path(uri) or "") if _path(uri) else None
    if schema is not None:
        actions.append(schema)
    for action in actions:
        if action.create is not None:
            new_uri = Path(action.create[0]).as_uri()
            start = types.Position(0, 0)
            out.append(types.CodeAction(title=action.title, kind=action.kind, edit=types.WorkspaceEdit(
                document_changes=[types.CreateFile(uri=new_uri, options=types.CreateFileOptions(ignore_if_exists=True)),
                                  types.TextDocumentEdit(
                                      text_document=types.OptionalVersionedTextDocumentIdentifier(uri=new_uri, version=None),
                                      edits=[types.TextEdit(range=types.Range(start, start), new_text=action.create[1])])]),
                diagnostics=[d for d in params.context.diagnostics if str(d.code) == action.code] or None))
            continue
        if action.text is not None:
            edit = types.TextEdit(range=whole, new_text=action.text)
        else:
            line_text = lines[action.line]
            where = ls.lsp_range(index, span(action.line, action.replace_from or 0, action.line, len(line_text)))
            edit = types.TextEdit(range=where, new_text=action.insert or "")
        diagnostics = [d for d in params.context.diagnostics if str(d.code) == action.code] or None
        out.append(types.CodeAction(title=action.title, kind=action.kind, diagnostics=diagnostics,
                                    edit=types.WorkspaceEdit(changes={uri: [edit]})))
    return out or None


def _path_under(text: str, offset: int) -> Any:
    """(token, segments) of the envelope path under `offset`, or None."""
    from pygments.token import Name

    tok = analysis.token_at(text, offset)
    if tok is None or tok.type not in Name.Variable or tok.type in Name.Variable.Magic:
        return None
    return tok, analysis._segments(tok.value)


@server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
@_guarded(None)
def prepare_rename(ls: TxclLanguageServer, params: types.PrepareRenameParams) -> types.Range | None:
    text = ls.workspace.get_text_document(params.text_document.uri).source
    found = _path_under(text, ls.offset(text, params.position))
    if found is None or found[1][:1] == ("_txc",):
        return None
    tok = found[0]
    return ls.lsp_range(positions.LineIndex(text), analysis.span_of(text, tok.start, tok.end))


@server.feature(types.TEXT_DOCUMENT_RENAME)
def rename(ls: TxclLanguageServer, params: types.RenameParams) -> types.WorkspaceEdit | None:
    """Rename the envelope path under the cursor in every rule (and test file) of the tree;
    refused with the reason where that could miss a use or merge two paths."""
    from pygls.exceptions import JsonRpcInvalidRequest

    from txcl.lsp.rename import RenameRefused, rename as plan

    uri = params.text_document.uri
    text = ls.workspace.get_text_document(uri).source
    found = _path_under(text, ls.offset(text, params.position))
    if found is None:
        return None
    open_texts = _open_texts(ls)
    try:
        edits = plan(text, found[1], params.new_name, _path(uri) or "", open_texts)
    except RenameRefused as exc:
        raise JsonRpcInvalidRequest(f"txcl: cannot rename: {exc}") from None
    changes: dict[str, list[types.TextEdit]] = {}
    for file, spans in edits.items():
        body = open_texts.get(file)
        if body is None:
            body = file.read_text(encoding="utf-8")
        index = positions.LineIndex(body)
        changes[file.as_uri()] = [
            types.TextEdit(range=ls.lsp_range(index, Span(analysis.position_at(body, a), analysis.position_at(body, b))),
                           new_text=new)
            for a, b, new in spans]
    return types.WorkspaceEdit(changes=changes)


@server.feature(types.WORKSPACE_SYMBOL)
@_guarded([])
def workspace_symbol(ls: TxclLanguageServer, params: types.WorkspaceSymbolParams) -> list[types.SymbolInformation]:
    """The stacks, scopes and ops of the OPS trees of the open workspace folders."""
    from txcl.lsp.navigation import ops_dirs, workspace_symbols

    roots = [Path(p) for folder in (ls.workspace.folders or {}).values() if (p := _path(folder.uri))]
    if not roots and ls.workspace.root_path:
        roots = [Path(ls.workspace.root_path)]
    kinds = {"stack": types.SymbolKind.Namespace, "scope": types.SymbolKind.Module, "op": types.SymbolKind.Function}
    start = types.Position(0, 0)
    return [types.SymbolInformation(name=name, kind=kinds[kind], container_name=container or None,
                                    location=types.Location(uri=file.as_uri(), range=types.Range(start, start)))
            for ops_dir in ops_dirs(roots) for name, kind, container, file in workspace_symbols(ops_dir, params.query)]


@server.feature(types.TEXT_DOCUMENT_FOLDING_RANGE)
@_guarded(None)
def folding_range(ls: TxclLanguageServer, params: types.FoldingRangeParams) -> list[types.FoldingRange] | None:
    """A fold for each clause spanning several lines."""
    doc = ls.workspace.get_text_document(params.text_document.uri)
    text = doc.source
    index = positions.LineIndex(text)
    out = []
    for sym in analysis.outline(text, _path(doc.uri) or "<buffer>"):
        where = ls.lsp_range(index, sym.span)
        if where.end.line > where.start.line:
            out.append(types.FoldingRange(start_line=where.start.line, end_line=where.end.line,
                                          kind=types.FoldingRangeKind.Region))
    return out or None


def _symbol(ls: TxclLanguageServer, index: positions.LineIndex, sym: analysis.Symbol) -> types.DocumentSymbol:
    return types.DocumentSymbol(
        name=sym.name,
        detail=sym.detail,
        kind=SYMBOL_KIND.get(sym.kind, types.SymbolKind.Field),
        range=ls.lsp_range(index, sym.span),
        selection_range=ls.lsp_range(index, sym.selection),
        children=[_symbol(ls, index, child) for child in sym.children] or None,
    )


@server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@_guarded([])
def document_symbol(ls: TxclLanguageServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    text = doc.source
    index = positions.LineIndex(text)
    return [_symbol(ls, index, sym) for sym in analysis.outline(text, _path(doc.uri) or "<buffer>")]


@server.feature(types.TEXT_DOCUMENT_CODE_LENS)
@_guarded(None)
def code_lens(ls: TxclLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens] | None:
    """Run, Test and Debug above a rule file; Run and Debug above each case of a test file."""
    from txcl.lsp.lenses import case_lenses, rule_lenses
    from txcl.ruletest.spec import SUFFIXES

    doc = ls.workspace.get_text_document(params.text_document.uri)
    path = _path(doc.uri)
    if path is None:
        return None
    found = case_lenses(path, doc.source) if path.endswith(SUFFIXES) else (
        rule_lenses(path) if path.endswith(".txcl") else [])
    out = []
    for lens in found:
        at = types.Position(max(lens.line - 1, 0), 0)
        out.append(types.CodeLens(range=types.Range(at, at), command=types.Command(
            title=lens.title, command=lens.command, arguments=lens.arguments)))
    return out or None


@server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL,
                types.SemanticTokensLegend(token_types=semantic.TOKEN_TYPES, token_modifiers=semantic.TOKEN_MODIFIERS))
@_guarded(None)
def semantic_tokens_full(ls: TxclLanguageServer, params: types.SemanticTokensParams) -> types.SemanticTokens | None:
    """Paths, `@` paths, functions, WITH keys, keywords and literals, as txcl's highlighter sees them."""
    doc = ls.workspace.get_text_document(params.text_document.uri)
    path = _path(doc.uri) or ""
    if not (path.endswith(".txcl") or doc.uri.startswith("untitled:")):
        return None
    return types.SemanticTokens(data=semantic.semantic_tokens(doc.source, ls.encoding()))


@server.feature(types.TEXT_DOCUMENT_FORMATTING)
@_guarded(None)
def formatting(ls: TxclLanguageServer, params: types.DocumentFormattingParams) -> list[types.TextEdit] | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    text = doc.source
    try:
        new = analysis.format_document(text, _path(doc.uri) or "<buffer>")
    except TxclSyntaxError:
        return None  # the diagnostics already say why
    except (TxclError, ImportError) as exc:
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning,
                                                       message=f"txcl fmt: {exc}"))
        return None
    if new == text:
        return []
    end_line, end_char = positions.LineIndex(text).end(ls.encoding())
    return [types.TextEdit(range=types.Range(types.Position(0, 0), types.Position(end_line, end_char)),
                           new_text=new)]


def main(argv: Any = None) -> None:
    """Serve over stdio until the client disconnects."""
    server.start_io()
