"""The parser's compiled twins (txcl.syntax.compiled): built by the install when a C compiler
is there, used only while their source is unchanged, and giving exactly the results of the
plain Python modules."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from corpus import ROOT, corpus_texts
from txcl.syntax import compiled, lexer, parser

# Prints, for every text read from stdin (a JSON list), one line: the scanner's rows and
# comments, and the parse result as the parse cache on disk stores it (the rule, or every
# diagnostic), so two runs compare line by line.
_DUMP = r"""
import json, sys
from txcl.syntax import codec, compiled, parser
from txcl.syntax.lexer import scan
print(compiled.summary())
for text in json.load(sys.stdin):
    scanned = scan(text, "r.txcl")
    rows = [(r[0], r[1], repr(r[2]), *r[3:9], r[9].code if len(r) > 9 else None) for r in scanned.rows]
    result = parser._parse_and_check(text, "r.txcl")
    print(json.dumps([repr(rows), repr(scanned.comments), codec.encode(result, text, "r.txcl").hex()]))
"""


def _texts() -> list[str]:
    """Every rule of the test corpus, and broken variants of each (cut short, a character
    replaced, lines swapped), so the error paths are compared too."""
    rng = random.Random(12)
    texts: list[str] = []
    for _name, text in corpus_texts():
        texts.append(text)
        if not text:
            continue
        texts.append(text[:rng.randrange(len(text))])
        at = rng.randrange(len(text))
        texts.append(text[:at] + rng.choice('"/.@&(){}#\n\\é-9 ') + text[at + 1:])
        lines = text.splitlines()
        if len(lines) > 1:
            rng.shuffle(lines)
            texts.append("\n".join(lines))
    return texts


def _dump(texts: list[str], pure: bool, cwd: Path) -> list[str]:
    """`_DUMP`'s lines, run in `cwd` (not the checkout, whose `txcl/` would be imported
    instead of the installed package)."""
    env = dict(os.environ, TXCL_PARSE_CACHE="off")
    env.pop("TXCL_PURE_PYTHON", None)
    if pure:
        env["TXCL_PURE_PYTHON"] = "1"
    done = subprocess.run([sys.executable, "-c", _DUMP], input=json.dumps(texts), capture_output=True,
                          text=True, env=env, timeout=240, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_the_installed_parser_runs_compiled_where_a_c_compiler_was_at_hand() -> None:
    """The test run installs the project (./run-tests) on a machine with a C compiler: the
    twins must have been built and be in use."""
    if not (shutil.which("cc") or shutil.which("gcc")):  # the other case is tested below
        assert compiled.summary().startswith("parser in plain Python")
        return
    assert compiled.summary() == "parser compiled", compiled.status
    assert parser._Parser.__module__ == "txcl.syntax._parser_c"
    assert lexer.scan.__module__ == "txcl.syntax._lexer_c"
    assert parser.get_parser().__class__.__module__ == "txcl.syntax._parser_c"
    from txcl import otlp  # the OTLP span encoder, built the same way

    assert otlp._COMPILED is not None and otlp.encode_traces is otlp._COMPILED.encode_traces, compiled.status


def test_compiled_and_plain_python_give_the_same_tokens_rules_and_diagnostics(tmp_path: Path) -> None:
    texts = _texts()
    assert len(texts) > 1000
    fast, pure = _dump(texts, pure=False, cwd=tmp_path), _dump(texts, pure=True, cwd=tmp_path)
    assert fast[0] == "parser compiled" and pure[0].startswith("parser in plain Python: turned off")
    assert len(fast) == len(pure) == len(texts) + 1
    differing = [texts[i - 1] for i in range(1, len(fast)) if fast[i] != pure[i]]
    assert not differing, f"{len(differing)} texts differ, e.g. {differing[0]!r}"
    assert sum('"TX0' in line or "TX0" in line for line in pure) > 100  # the error paths were compared


def test_a_twin_built_from_another_source_is_not_used(tmp_path: Path) -> None:
    source = Path(lexer.__file__)
    assert compiled.twin("txcl.syntax.lexer", str(source)) is not None  # as installed
    edited = tmp_path / "lexer.py"
    edited.write_text(source.read_text(encoding="utf-8") + "\n# an edit\n", encoding="utf-8")
    assert compiled.twin("txcl.syntax.lexer", str(edited)) is None
    assert compiled.status["txcl.syntax.lexer"] == "built from another version of the source"
    assert compiled.twin("txcl.syntax.lexer", str(tmp_path / "gone.py")) is None
    assert compiled.twin("txcl.syntax._lexer_c", str(source)) is None  # a twin has no twin
    compiled.twin("txcl.syntax.lexer", str(source))  # the status as it was


def test_txcl_pure_python_turns_the_twins_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TXCL_PURE_PYTHON", "1")
    assert compiled.twin("txcl.syntax.parser", parser.__file__) is None
    assert compiled.status["txcl.syntax.parser"] == "turned off (TXCL_PURE_PYTHON)"
    monkeypatch.setenv("TXCL_PURE_PYTHON", "0")
    assert compiled.twin("txcl.syntax.parser", parser.__file__) is not None
    done = subprocess.run([sys.executable, "-m", "txcl", "--version"], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, TXCL_PURE_PYTHON="1"), cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip().endswith("(parser in plain Python: turned off (TXCL_PURE_PYTHON))")
    done = subprocess.run([sys.executable, "-m", "txcl", "--version"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "TXCL_PURE_PYTHON"}, cwd=tmp_path)
    assert done.stdout.strip().endswith("(parser compiled)")


def test_without_a_c_compiler_the_package_builds_and_runs_as_plain_python(tmp_path: Path) -> None:
    """A source archive carries everything a build needs, and `pip install` of it on a
    machine without a C compiler makes a wheel without the twins (a warning, no failure),
    whose parser runs as plain Python."""
    source = tmp_path / "src"  # what a build reads, without anything built before
    leftovers = shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__", "build", "*.egg-info")
    for name in ("txcl", "grammar", "stdlib"):
        shutil.copytree(ROOT / name, source / name, ignore=leftovers)
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    sdist = subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "dist"), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert sdist.returncode == 0, sdist.stderr[-3000:]
    (archive,) = (tmp_path / "dist").glob("txcl-*.tar.gz")
    with tarfile.open(archive) as tar:
        members = [name.split("/", 1)[1] for name in tar.getnames() if "/" in name]
    assert {"setup.py", "grammar/txcl.lark", "stdlib/_sys/health/0000/ok.txcl", "txcl/syntax/lexer.py",
            "txcl/_native/otlp_c.pyx"} <= set(members)
    wheels = tmp_path / "wheels"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(archive)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, CC="false"))
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = wheels.glob("txcl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "txcl/syntax/lexer.py" in names and "txcl/_data/grammar/txcl.lark" in names
    assert not [n for n in names if n.endswith(".so")]
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    check = ("from txcl.syntax import compiled, parser\n"
             "print(compiled.summary()); print(parser.parse_rule('WHEN .a == 1\\nEMIT .b = 2').when is not None)\n"
             "from txcl import otlp; print(otlp.encode_traces is otlp.python_encode_traces)")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(target), TXCL_PARSE_CACHE="off"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["parser in plain Python: not built (no C compiler at install)", "True",
                                            "True"]  # (and the OTLP encoder is the Python one)
