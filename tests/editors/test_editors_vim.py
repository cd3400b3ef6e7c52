"""The vim syntax file agrees with the Pygments lexer on every valid .txcl file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


from testtools import require_tool
from editors_support import REPO, SAMPLES, char_categories, valid_txcl_files

VIM_DIR = REPO / "editors" / "vim"
PROBE = Path(__file__).resolve().parent / "vim_probe.vim"

# vim group -> Pygments category
GROUPS = {
    "txclClause": "keyword", "txclSelectWord": "keyword", "txclUntil": "keyword",
    "txclLoopModifier": "keyword", "txclBoolean": "constant", "txclNull": "constant",
    "txclPath": "path", "txclTxcPath": "txc-path", "txclFunction": "function",
    "txclWithKey": "with-key", "txclString": "string", "txclQuote": "string",
    "txclEscape": "escape", "txclRegex": "regex", "txclNumber": "number",
    "txclComment": "comment", "txclRegexGapComment": "comment", "txclTodo": "comment",
    "txclOperator": "operator", "txclMatchOp": "operator", "txclDelimiter": "punctuation",
    "txclError": "error", "txclBadNumber": "error", "txclBadCall": "error",
    "txclBadRegex": "error", "txclReserved": "error",
}


def probe(files: list[Path], tmp_path: Path) -> dict:
    vim = require_tool("vim")
    listing = tmp_path / "files.txt"
    listing.write_text("\n".join(str(f) for f in files) + "\n", encoding="utf-8")
    out = tmp_path / "out.json"
    subprocess.run(
        [vim, "-Es", "-u", "NONE", "-N", "-i", "NONE",
         "--cmd", f"let g:txcl_rtp = '{VIM_DIR}'",
         "--cmd", f"let g:txcl_list = '{listing}'",
         "--cmd", f"let g:txcl_out = '{out}'",
         "-S", str(PROBE)],
        check=True, timeout=60, capture_output=True,
    )
    return json.loads(out.read_text(encoding="utf-8"))


def vim_categories(text: str, lines: list[list[str]]) -> list[str | None]:
    """Per code point category from vim's per-byte groups."""
    cats: list[str | None] = []
    for lineno, line in enumerate(text.split("\n")):
        groups = lines[lineno] if lineno < len(lines) else []
        byte = 0
        for ch in line:
            group = groups[byte] if byte < len(groups) else ""
            cats.append(GROUPS.get(group, group or "none"))
            byte += len(ch.encode("utf-8"))
        cats.append(None)  # the line break
    return cats[: len(text)]


def test_vim_files_exist() -> None:
    for rel in ("syntax/txcl.vim", "ftdetect/txcl.vim", "ftplugin/txcl.vim"):
        assert (VIM_DIR / rel).is_file(), rel


def test_vim_agrees_with_pygments(tmp_path: Path) -> None:
    files = valid_txcl_files()
    assert set(SAMPLES) <= set(files)
    result = probe(files, tmp_path)
    mismatches = []
    for path in files:
        assert result[f"filetype:{path}"] == "txcl"
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
        expected = char_categories(text)
        actual = vim_categories(text, result[str(path)])
        for i, (want, got) in enumerate(zip(expected, actual)):
            if want is None or text[i] in " \t\r\n":
                continue
            if want != got:
                line = text.count("\n", 0, i) + 1
                mismatches.append(f"{path.name}:{line}: {text[i]!r} pygments={want} vim={got}")
    assert mismatches[:40] == []


def test_vim_marks_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txcl"
    bad.write_text('EMIT .x = 12px, .y = {\nWHEN .a == &now\n', encoding="utf-8")
    lines = probe([bad], tmp_path)[str(bad)]
    assert lines[0][10] == "txclBadNumber"
    assert lines[0][21] == "txclError"
    assert lines[1][11] == "txclBadCall"
