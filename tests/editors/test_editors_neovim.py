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


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is installed by ./run-tests (.ci/services.sh)")
def test_the_documented_snippet_gets_diagnostics_in_debians_neovim(tmp_path):
    ws = tmp_path / "ws"
    rule = ws / "OPS" / "s" / "0100" / "a.txcl"
    rule.parent.mkdir(parents=True)
    rule.write_text("WHEN .a ==\n", encoding="utf-8")
    out = tmp_path / "diagnostics.txt"
    bindir = tmp_path / "bin"  # `txcl` on PATH, as the snippet calls it
    bindir.mkdir()
    (bindir / "txcl").write_text(f"#!/bin/sh\nexec {sys.executable} -m txcl \"$@\"\n")
    (bindir / "txcl").chmod(0o755)
    init = tmp_path / "init.lua"
    init.write_text(
        f"vim.opt.runtimepath:append({json.dumps(str(REPO / 'editors' / 'vim'))})\n"
        "vim.cmd('filetype plugin on')\n" + _snippet() + "\n"
        "vim.api.nvim_create_autocmd('VimEnter', { callback = function()\n"
        "  vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 100)\n"
        "  local lines = {}\n"
        "  for _, d in ipairs(vim.diagnostic.get(0)) do table.insert(lines, tostring(d.code) .. ' ' .. d.message) end\n"
        f"  vim.fn.writefile(lines, {json.dumps(str(out))})\n"
        "  vim.cmd('qa!')\n"
        "end })\n", encoding="utf-8")
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(["nvim", "--headless", "-i", "NONE", "-u", str(init), str(rule)], cwd=ws, env=env,
                   capture_output=True, timeout=120, check=False)
    assert out.exists(), "Neovim wrote no diagnostics"
    assert "TX026" in out.read_text()
