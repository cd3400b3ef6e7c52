"""Inputs the checker must report rather than trip over: a lone surrogate from an editor, a
file name that is not UTF-8, and rule files a layout error keeps out of the tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from txcl.check import check_source

TXCL = str(Path(sys.executable).parent / "txcl")


def txcl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, *args], capture_output=True, cwd=cwd, timeout=60)


def test_a_lone_surrogate_is_tx002_at_its_position():
    found = check_source('EMIT .b = 1\nSET .a = "x\ud800"\n')
    assert [(d.code, d.line, d.column) for d in found] == [("TX002", 2, 12)]


def test_files_a_layout_error_keeps_out_are_still_parsed(tmp_path):
    scope = tmp_path / "OPS" / "s" / "100"
    scope.mkdir(parents=True)
    (scope / "Bad Name.txcl").write_text("EMIT .a = \n")
    (scope / "fine.txcl").write_text("EMIT .b = 1\n")
    (tmp_path / "OPS" / "loose.txcl").write_text("WHEN .a ==\n")  # TX120: not under a scope
    done = txcl("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    found = sorted((Path(d["file"]).name, d["code"]) for d in json.loads(done.stdout))
    assert found == [("Bad Name.txcl", "TX015"), ("Bad Name.txcl", "TX123"),
                     ("loose.txcl", "TX026"), ("loose.txcl", "TX120")]
    assert b"3 files" in done.stderr or b"of 3 files" in done.stderr, done.stderr


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file systems refuse names that are not UTF-8")
@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_a_file_name_that_is_not_utf8_gives_valid_utf8_output(tmp_path, fmt):
    scope = tmp_path / "OPS" / "s" / "100"
    scope.mkdir(parents=True)
    name = os.fsdecode(b"b\xffad.txcl")
    (scope / name).write_text("EMIT .a = \n")
    done = txcl("check", ".", "--no-cache", "--output-format", fmt, cwd=tmp_path)
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    text = done.stdout.decode("utf-8")  # raises if the output is not UTF-8
    assert "b\ufffdad.txcl" in text
    if fmt == "sarif":
        uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                for r in json.loads(text)["runs"][0]["results"]}
        assert uris == {"OPS/s/100/b%FFad.txcl"}  # the real bytes, percent-encoded
