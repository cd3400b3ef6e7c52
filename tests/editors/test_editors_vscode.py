"""The VS Code extension: manifest, TextMate grammar (vscode-tmgrammar-test fixtures and
agreement with the Pygments lexer), snippets and the language-client entry point."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from testtools import require_tool
from editors_support import REPO, SAMPLES, char_categories, valid_txcl_files

EXT = REPO / "editors" / "vscode"
MANIFEST = json.loads((EXT / "package.json").read_text(encoding="utf-8"))

# TextMate scope prefix (innermost scope that matters) -> Pygments category
SCOPES = [
    ("comment.", "comment"),
    ("constant.character.escape", "escape"),
    ("storage.type.string.b64", "string"),
    ("string.regexp", "regex"),
    ("string.", "string"),
    ("invalid.", "error"),
    ("constant.numeric", "number"),
    ("constant.language", "constant"),
    ("keyword.operator", "operator"),
    ("keyword.", "keyword"),
    ("variable.language.txc", "txc-path"),
    ("variable.other.path", "path"),
    ("variable.parameter.with-key", "with-key"),
    ("meta.function-call", "function"),
    ("punctuation.", "punctuation"),
]


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """Install the extension's npm packages once (CI runs this on a fresh checkout)."""
    require_tool("node")
    npm = require_tool("npm")
    modules = EXT / "node_modules"
    if not (modules / "vscode-tmgrammar-test").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=EXT, check=True,
                       capture_output=True, timeout=600)
    return modules


def test_manifest_declares_language_grammar_and_snippets() -> None:
    contributes = MANIFEST["contributes"]
    assert contributes["languages"][0]["id"] == "txcl"
    assert ".txcl" in contributes["languages"][0]["extensions"]
    grammar = contributes["grammars"][0]
    assert grammar["scopeName"] == "source.txcl"
    assert MANIFEST["main"] == "./dist/extension.js"  # the esbuild bundle, built by `vsce package`
    for rel in (grammar["path"], contributes["snippets"][0]["path"],
                contributes["languages"][0]["configuration"], "src/extension.js", "LICENSE"):
        assert (EXT / rel).is_file(), rel
    assert "vscode-languageclient" in MANIFEST["dependencies"]
    assert "vscode-tmgrammar-test" in MANIFEST["devDependencies"]
    assert (EXT / "package-lock.json").is_file()
    config = json.loads((EXT / "language-configuration.json").read_text(encoding="utf-8"))
    assert config["comments"]["lineComment"] == "#"


def test_manifest_contributes_the_debugger_and_its_launch_snippets() -> None:
    """Breakpoints in .txcl files, a debugger of type txcl (run by `txcl dap`, see src/extension.js)
    whose launch attributes are the ones `txcl dap` reads, a snippet for each launch kind, and
    "Debug this case" for rule test files."""
    from txcl.debug import launch

    contributes = MANIFEST["contributes"]
    assert {"language": "txcl"} in contributes["breakpoints"]
    debugger = next(d for d in contributes["debuggers"] if d["type"] == "txcl")
    props = debugger["configurationAttributes"]["launch"]["properties"]
    assert {"workspace", "stack", "input", "inputFile", "test", "trace", "mocks", "workers",
            "allowNetwork", "stopOnEntry", "stopAt"} <= set(props)
    for key in props:  # every attribute is one the adapter reads
        assert f'"{key}"' in Path(launch.__file__).read_text() or key in ("stopOnEntry", "stopAt"), key
    kinds = [set(s["body"]) & {"input", "test", "trace"} for s in debugger["configurationSnippets"]]
    assert kinds == [{"input"}, {"test"}, {"trace"}]
    assert all(s["body"]["type"] == "txcl" and s["body"]["request"] == "launch"
               for s in debugger["configurationSnippets"])
    assert any(c["command"] == "txcl.debugCase" for c in contributes["commands"])


def _expand_snippet(body: list[str]) -> str:
    text = "\n".join(body)
    text = re.sub(r"\$\{\d+:([^}]*)\}", r"\1", text)
    return re.sub(r"\$\d+", "", text)


def test_snippets_expand_to_valid_rules() -> None:
    snippets = json.loads((EXT / "snippets" / "txcl.json").read_text(encoding="utf-8"))
    assert len(snippets) >= 8
    bodies = {name: _expand_snippet(s["body"]) for name, s in snippets.items()}
    for name, text in bodies.items():
        assert snippets[name]["prefix"] and snippets[name]["description"], name
        assert "$" not in text, name
    from txcl.syntax.parser import parse_rule

    for name, text in bodies.items():
        parse_rule(text, filename=name)


def test_grammar_fixtures_pass_vscode_tmgrammar_test(node_modules: Path) -> None:
    fixtures = sorted((EXT / "tests").glob("*.txcl"))
    assert len(fixtures) >= 4
    proc = subprocess.run(
        [str(node_modules / ".bin" / "vscode-tmgrammar-test"), "-g", "syntaxes/txcl.tmLanguage.json",
         "tests/*.txcl"],
        cwd=EXT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("run successfuly") == len(fixtures)


def test_grammar_fixture_failure_is_detected(node_modules: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.txcl"
    bad.write_text('# SYNTAX TEST "source.txcl"\nWHEN .a == 1\n#    ^^ string.quoted.double.txcl\n',
                   encoding="utf-8")
    proc = subprocess.run(
        [str(node_modules / ".bin" / "vscode-tmgrammar-test"), "-g", "syntaxes/txcl.tmLanguage.json",
         str(bad)],
        cwd=EXT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0


def _tm_category(scopes: str) -> str:
    for scope in reversed(scopes.split()):
        if scope.startswith("punctuation.definition."):
            continue  # quote and & marks take the category of what they delimit
        for prefix, cat in SCOPES:
            if scope.startswith(prefix):
                return cat
    return "none"


def _utf16_to_codepoint(text: str) -> list[int]:
    """Index: UTF-16 offset -> code point offset."""
    table = []
    for i, ch in enumerate(text):
        table.extend([i] * (2 if ord(ch) > 0xFFFF else 1))
    table.append(len(text))
    return table


def test_grammar_agrees_with_pygments(node_modules: Path) -> None:
    files = valid_txcl_files()
    assert set(SAMPLES) <= set(files)
    proc = subprocess.run(["node", str(EXT / "tests" / "tokenize.js"), *map(str, files)],
                          capture_output=True, text=True, check=True, timeout=120)
    tokens = json.loads(proc.stdout)
    mismatches = []
    for path in files:
        text = path.read_bytes().decode("utf-8")
        expected = char_categories(text)
        actual: list[str | None] = [None] * len(text)
        to_cp = _utf16_to_codepoint(text)
        for start, end, scopes in tokens[str(path)]:
            for i in range(to_cp[start], to_cp[end]):
                actual[i] = _tm_category(scopes)
        for i, want in enumerate(expected):
            if want is None or text[i] in " \t\r\n":
                continue
            if want != actual[i]:
                line = text.count("\n", 0, i) + 1
                mismatches.append(f"{path.name}:{line}: {text[i]!r} pygments={want} textmate={actual[i]}")
    assert mismatches[:40] == []


def test_extension_starts_txcl_lsp(node_modules: Path) -> None:
    proc = subprocess.run(["node", str(EXT / "tests" / "extension_smoke.js")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "extension smoke test ok" in proc.stdout


def test_vsce_packages_the_extension_without_warnings(node_modules: Path, tmp_path: Path) -> None:
    """`vsce package` bundles the client with esbuild and writes a .vsix without a warning
    (vsce asks for confirmation on a warning, which fails with no standard input)."""
    vsix = tmp_path / "txcl.vsix"
    proc = subprocess.run(["npx", "--no-install", "vsce", "package", "--no-dependencies", "--out", str(vsix)],
                          cwd=EXT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "WARNING" not in output and "Do you want to continue" not in output, output
    import zipfile
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("extension/package.json"))
        bundle = archive.read("extension/dist/extension.js").decode("utf-8")
    assert {"extension/dist/extension.js", "extension/LICENSE.txt", "extension/readme.md",
            "extension/syntaxes/txcl.tmLanguage.json", "extension/snippets/txcl.json"} <= names
    assert not any("node_modules/" in n or "/src/" in n or "/tests/" in n for n in names), sorted(names)
    assert manifest["repository"]["url"] and manifest["license"] == "Apache-2.0"
    # the language client is inside the bundle; only the editor's own API stays a require
    required = set(re.findall(r'require\("([^"]+)"\)', bundle))
    assert "vscode" in required and "vscode-languageclient/node" not in required, required
    assert "LanguageClient" in bundle
