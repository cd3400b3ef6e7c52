"""The Neovim snippet of docs/editors.md for Neovim 0.7+, run in Debian's Neovim (0.7.2, what
Debian 12 ships) with the repository's vim runtime: opening a rule file with a mistake starts
`txcl lsp` through the FileType autocommand and the mistake's diagnostic arrives."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _snippet() -> str:
    text = (REPO / "docs" / "editors.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```lua\n(.*?)```", text, re.S)
    found = [b for b in blocks if "nvim_create_autocmd" in b]
    assert len(found) == 1, "docs/editors.md has one Neovim 0.7+ snippet"
    return found[0]


def _run_neovim(tmp_path: Path, ws: Path, rule: Path, script: str) -> None:
    """Debian's Neovim, headless, with the repository's vim runtime, the documented snippet and
    `script` (Lua) — `txcl` on PATH as the snippet calls it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "txcl").write_text(f"#!/bin/sh\nexec {sys.executable} -m txcl \"$@\"\n")
    (bindir / "txcl").chmod(0o755)
    init = tmp_path / "init.lua"
    init.write_text(f"vim.opt.runtimepath:append({json.dumps(str(REPO / 'editors' / 'vim'))})\n"
                    "vim.cmd('filetype plugin on')\n" + _snippet() + "\n" + script, encoding="utf-8")
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(["nvim", "--headless", "-i", "NONE", "-u", str(init), str(rule)], cwd=ws, env=env,
                   capture_output=True, timeout=120, check=False)


def _answers_script(ask_lua: str, found_lua: str, out: Path) -> str:
    """Lua for `_run_neovim`: once the server is attached, define `ask` (`ask_lua`), build
    `found` (`found_lua`, a table of answers) and write it to `out` as JSON, then quit."""
    return (ask_lua +
            "vim.api.nvim_create_autocmd('VimEnter', { callback = function()\n"
            "  vim.wait(60000, function() return #vim.lsp.buf_get_clients(0) > 0 end, 100)\n"
            "  vim.wait(2000, function() return false end, 100)\n"
            f"  local found = {found_lua}\n"
            f"  vim.fn.writefile({{vim.fn.json_encode(found)}}, {json.dumps(str(out))})\n"
            "  vim.cmd('qa!')\n"
            "end })\n")


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is installed by ./run-tests (.ci/services.sh)")
def test_the_documented_snippet_gets_diagnostics_in_debians_neovim(tmp_path):
    ws = tmp_path / "ws"
    rule = ws / "OPS" / "s" / "0100" / "a.txcl"
    rule.parent.mkdir(parents=True)
    rule.write_text("WHEN .a ==\n", encoding="utf-8")
    out = tmp_path / "diagnostics.txt"
    _run_neovim(tmp_path, ws, rule,
                "vim.api.nvim_create_autocmd('VimEnter', { callback = function()\n"
                "  vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 100)\n"
                "  local lines = {}\n"
                "  for _, d in ipairs(vim.diagnostic.get(0)) do table.insert(lines, tostring(d.code) .. ' ' .. d.message) end\n"
                f"  vim.fn.writefile(lines, {json.dumps(str(out))})\n"
                "  vim.cmd('qa!')\n"
                "end })\n")
    assert out.exists(), "Neovim wrote no diagnostics"
    assert "TX026" in out.read_text()


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is installed by ./run-tests (.ci/services.sh)")
def test_navigation_in_debians_neovim(tmp_path):
    """Neovim's own LSP client asks `txcl lsp` for a jump's definition, a path's references and
    a rename, as a user's `gd`, `gr` and rename would."""
    ws = tmp_path / "ws"
    files = {"OPS/s/0100/a.txcl": 'EMIT @goto = "300", .y = .order.total\n',
             "OPS/s/0200/b.txcl": "EMIT .order.total = 1\n", "OPS/s/0300/c.txcl": "EMIT .c = .order.total\n"}
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    rule = ws / "OPS/s/0100/a.txcl"
    out = tmp_path / "answers.json"
    _run_neovim(tmp_path, ws, rule, _answers_script(
        "local function ask(method, line, col, extra)\n"
        "  vim.api.nvim_win_set_cursor(0, {line, col})\n"
        "  local params = vim.lsp.util.make_position_params()\n"
        "  for k, v in pairs(extra or {}) do params[k] = v end\n"
        "  local answers = vim.lsp.buf_request_sync(0, method, params, 20000) or {}\n"
        "  for _, a in pairs(answers) do if a.result then return a.result end end\n"
        "  return vim.NIL\n"
        "end\n",
        "{ definition = ask('textDocument/definition', 1, 15),\n"
        "    references = ask('textDocument/references', 1, 27, {context = {includeDeclaration = true}}),\n"
        "    rename = ask('textDocument/rename', 1, 27, {newName = '.order.sum'}) }", out))
    assert out.exists(), "Neovim wrote no answers"
    found = json.loads(out.read_text())
    assert [d["uri"].rsplit("/", 1)[-1] for d in found["definition"]] == ["c.txcl"]
    assert sorted(r["uri"].rsplit("/", 1)[-1] for r in found["references"]) == ["a.txcl", "b.txcl", "c.txcl"]
    renamed = {uri.rsplit("/", 1)[-1]: [e["newText"] for e in edits] for uri, edits in found["rename"]["changes"].items()}
    assert renamed == {"a.txcl": [".order.sum"], "b.txcl": [".order.sum"], "c.txcl": [".order.sum"]}


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is installed by ./run-tests (.ci/services.sh)")
def test_code_lenses_and_semantic_tokens_in_debians_neovim(tmp_path):
    """Neovim's LSP client gets the Run/Test/Debug lenses of a rule file (what
    `vim.lsp.codelens.refresh()` shows) and its semantic tokens."""
    ws = tmp_path / "ws"
    rule = ws / "OPS/s/0100/a.txcl"
    rule.parent.mkdir(parents=True)
    rule.write_text("WHEN .a == 1\nEMIT .b = &concat(.a)\n", encoding="utf-8")
    out = tmp_path / "answers.json"
    _run_neovim(tmp_path, ws, rule, _answers_script(
        "local function ask(method)\n"
        "  local params = { textDocument = vim.lsp.util.make_text_document_params() }\n"
        "  local answers = vim.lsp.buf_request_sync(0, method, params, 20000) or {}\n"
        "  for _, a in pairs(answers) do if a.result then return a.result end end\n"
        "  return vim.NIL\n"
        "end\n",
        "{ lenses = ask('textDocument/codeLens'), tokens = ask('textDocument/semanticTokens/full') }", out))
    assert out.exists(), "Neovim wrote no answers"
    found = json.loads(out.read_text())
    assert [lens["command"]["title"] for lens in found["lenses"]] == ["▶ Run", "Test", "Debug"]
    assert found["lenses"][2]["command"]["arguments"][0]["stopAt"] == ["s/100/a"]
    data = found["tokens"]["data"]
    assert len(data) % 5 == 0 and data[:3] == [0, 0, 4]  # WHEN: line 0, column 0, 4 long
