"""`txcl fmt`: idempotence over every rule file in the repository, comments kept,
canonical layout, and the --check/--diff exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from txcl.check.analyze import parse
from txcl.check.fix import semantic_json
from txcl.cli.main import cli
from txcl.fmt import format_text
from testtools import rule_files

ROOT = Path(__file__).resolve().parents[2]


def _rule_files() -> list[Path]:
    files = []
    for base in ("examples", "stdlib", "tests", "editors", "bench"):
        files.extend(rule_files(ROOT / base))
    return files


def _parses(text: str) -> bool:
    return parse(text, "f.txcl")[0] is not None


FILES = [p for p in _rule_files() if _parses(p.read_text(encoding="utf-8", errors="replace"))]


def test_there_are_files_to_format() -> None:
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fmt_is_idempotent_and_keeps_meaning_and_comments(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    once = format_text(text, path.name)
    assert format_text(once, path.name) == once
    before, after = parse(text, "a")[0], parse(once, "b")[0]
    assert semantic_json(after) == semantic_json(before)
    assert sorted(c.text.rstrip() for c in after.comments) == sorted(c.text.rstrip() for c in before.comments)


def test_canonical_layout() -> None:
    text = ('emit .x=1\n  exec   "txco://echo"\nWhen .a==1&&.b!=TRUE,.c=~/x\\/y/\n'
            'select .a as .b default "d",.c\nset .p=1 .q=[1,2,]\nloop max 3 until .done==true every "1s"\n'
            'with timeout = "1s"\nPRIORITY -5\n')
    assert format_text(text) == (
        'WHEN .a == 1 && .b != true, .c =~ /x\\/y/\n'
        'SELECT .a AS .b DEFAULT "d", .c\n'
        'SET .p = 1, .q = [1, 2]\n'
        'WITH timeout = "1s"\n'
        'PRIORITY -5\n'
        'EXEC "txco://echo"\n'
        'LOOP UNTIL .done == true EVERY "1s" MAX 3\n'
        'EMIT .x = 1\n')


def test_set_never_crosses_select() -> None:
    text = 'SET .pre = 1\nSELECT *\nSET .post = 2\nSET .post2 = 3\n'
    assert format_text(text) == 'SET .pre = 1\nSELECT *\nSET .post = 2, .post2 = 3\n'


def test_comments_are_kept_in_place() -> None:
    text = ("# Header of the file\n\n# about the target\nEXEC \"txco://echo\"  # trailing\n"
            "EMIT .a = 1,   # first\n  # before b\n  .b = 2\nWHEN .a == 1\n# the end\n")
    assert format_text(text) == (
        "# Header of the file\n\n"
        "WHEN .a == 1\n"
        "# about the target\n"
        "EXEC \"txco://echo\"  # trailing\n"
        "EMIT .a = 1,  # first\n"
        "     # before b\n"
        "     .b = 2\n"
        "# the end\n")


def test_comment_inside_a_condition_is_kept() -> None:
    text = "WHEN .a == 1 && # why\n  .b == 2\n"
    once = format_text(text)
    assert once == "WHEN .a == 1 &&  # why\n     .b == 2\n"
    assert format_text(once) == once


def test_long_clauses_are_broken_one_item_per_line() -> None:
    items = ", ".join(f".field_number_{i} AS .destination_{i}" for i in range(5))
    once = format_text(f"SELECT {items}\n")
    lines = once.splitlines()
    assert len(lines) == 5
    assert lines[1].startswith("       .field_number_1")
    assert format_text(once) == once


def test_empty_and_comment_only_files() -> None:
    assert format_text("") == ""
    assert format_text("  \n\n") == ""
    assert format_text("# just a note\n\n\n# another\n") == "# just a note\n\n# another\n"


def test_crlf_files_stay_crlf() -> None:
    assert format_text("emit .a = 1\r\nwhen .b == 2\r\n") == "WHEN .b == 2\r\nEMIT .a = 1\r\n"


def _invoke(args, cwd, monkeypatch, input=None):
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(cli, args, input=input)


def test_fmt_check_and_diff_exit_codes(tmp_path, monkeypatch) -> None:
    good = tmp_path / "OPS/s/0100/good.txcl"
    good.parent.mkdir(parents=True)
    good.write_text("WHEN .a == 1\nEMIT .b = 2\n", encoding="utf-8")
    res = _invoke(["fmt", "--check"], tmp_path, monkeypatch)
    assert res.exit_code == 0
    bad = tmp_path / "OPS/s/0100/bad.txcl"
    bad.write_text("emit .b=2\nwhen .a==1\n", encoding="utf-8")
    res = _invoke(["fmt", "--check"], tmp_path, monkeypatch)
    assert res.exit_code == 1
    assert "Would reformat: OPS/s/0100/bad.txcl" in res.stdout
    res = _invoke(["fmt", "--diff", "OPS"], tmp_path, monkeypatch)
    assert res.exit_code == 1 and "+WHEN .a == 1" in res.stdout
    assert bad.read_text(encoding="utf-8") == "emit .b=2\nwhen .a==1\n"
    res = _invoke(["fmt"], tmp_path, monkeypatch)
    assert res.exit_code == 0
    assert bad.read_text(encoding="utf-8") == "WHEN .a == 1\nEMIT .b = 2\n"
    assert _invoke(["fmt", "--check"], tmp_path, monkeypatch).exit_code == 0


def test_fmt_syntax_error_exits_2_and_leaves_file(tmp_path, monkeypatch) -> None:
    broken = tmp_path / "r.txcl"
    broken.write_text("EMIT .a 1\n", encoding="utf-8")
    res = _invoke(["fmt", "r.txcl"], tmp_path, monkeypatch)
    assert res.exit_code == 2
    assert "TX014" in res.stderr
    assert broken.read_text(encoding="utf-8") == "EMIT .a 1\n"


def test_fmt_stdin(tmp_path, monkeypatch) -> None:
    res = _invoke(["fmt", "-"], tmp_path, monkeypatch, input="emit .a=1\n")
    assert res.exit_code == 0 and res.stdout == "EMIT .a = 1\n"
    res = _invoke(["fmt", "--check", "-"], tmp_path, monkeypatch, input="emit .a=1\n")
    assert res.exit_code == 1


def test_the_shipped_examples_pass_check_and_fmt():
    """What the examples teach is what the linter and the formatter accept."""
    import subprocess
    import sys

    txcl = str(Path(sys.executable).parent / "txcl")
    examples = str(ROOT / "examples")
    checked = subprocess.run([txcl, "check", examples, "--output-format", "concise"], capture_output=True,
                             text=True, timeout=120)
    assert checked.returncode == 0 and checked.stdout.startswith("All checks passed"), checked.stdout
    formatted = subprocess.run([txcl, "fmt", "--check", examples], capture_output=True, text=True, timeout=120)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr


def test_a_leading_comment_block_stays_leading() -> None:
    text = "# about this rule\n# second line\nWITH timeout = \"5s\"\nSELECT .a\nEXEC \"txco://echo\"\n"
    once = format_text(text)
    assert once == "# about this rule\n# second line\nSELECT .a\nWITH timeout = \"5s\"\nEXEC \"txco://echo\"\n"
    assert format_text(once) == once


def test_a_refusal_names_its_code(tmp_path):
    """The formatter leaves a file it cannot format safely unchanged, and says why with a code
    docs/check.md lists."""
    import subprocess
    import sys

    rule = tmp_path / "r.txcl"
    text = 'EMIT .a = 012, .a  # EXEC "goto://s/100"\n= 013  # noqa\n'
    rule.write_text(text)
    done = subprocess.run([sys.executable, "-m", "txcl", "fmt", str(rule)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "[fmt-moves-noqa]" in done.stderr and "Traceback" not in done.stderr
    assert rule.read_text() == text
