"""Nothing txcl reads back from disk can run code or be forged, and a rule's text never
becomes code.

- The caches (the check cache, the parse cache, the MCP schema cache) are plain JSON sealed
  with the user's own key: a crafted pickle where the old check cache lived runs nothing,
  through `txcl check` and through the language server driven by Neovim; a cache that is
  well-formed but sealed by someone else is ignored (and the same file under the right key is
  read, so the seal is what decides).
- No module of txcl imports pickle, marshal or shelve, or calls eval or an unsafe YAML loader;
  `exec` appears only where txcl compiles source it wrote itself.
- The rule compiler (conditions and values turned into Python source) is fed hostile paths,
  strings and regexes: every generated function names only the compiler's own variables, and
  the hostile text comes out as data.
"""

from __future__ import annotations

import ast as pyast
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import txcl
from txcl import safecache
from txcl.check import cache as check_cache
from txcl.safecache import seal, unseal
from txcl.syntax import codec, diskcache
from txcl.syntax.parser import clear_cache, parse_rule

PACKAGE = Path(txcl.__file__).parent


class _Marker:
    """Unpickling this writes a file: proof that a pickle ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (Path(self.path), "ran"))


def _tree(root: Path) -> Path:
    scope = root / "OPS" / "shop" / "0100_a"
    scope.mkdir(parents=True)
    (scope / "a.txcl").write_text("WHEN .a == 1\nEMIT .b = 2\n", encoding="utf-8")
    return root


def _txcl(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "txcl", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_a_pickle_shipped_as_the_check_cache_runs_nothing(tmp_path):
    ws = _tree(tmp_path / "ws")
    marker = tmp_path / "marker"
    evil = pickle.dumps({"fingerprint": "x", "entries": _Marker(str(marker))})
    cache_dir = ws / ".txcl-data" / "cache"
    cache_dir.mkdir(parents=True)
    for name in ("check-v1.pickle", check_cache.CACHE_NAME):  # the old name and the new
        (cache_dir / name).write_bytes(evil)
    done = _txcl("check", cwd=ws)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists()
    assert "Traceback" not in done.stderr
    # the foreign file was replaced by this user's sealed cache
    stored = safecache.decode_plain(unseal((cache_dir / check_cache.CACHE_NAME).read_bytes(), b"txcl check cache"))
    assert stored["fingerprint"] and len(stored["entries"]) == 1


def _forged_check_cache(ws: Path, xdg: Path, monkeypatch) -> None:
    """A cache of the right shape and fingerprint, sealed with the key under `xdg`, that gives
    a.txcl a finding it does not have."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    safecache.reset_key()
    try:
        data = (ws / "OPS/shop/0100_a/a.txcl").read_bytes()
        forged = ((("TX202", "FORGED FINDING", (1, 1, 0, 1, 2, 1), None, "warning"),), None)
        payload = {"fingerprint": check_cache.fingerprint(), "entries": {check_cache.key_of(data).hex(): forged}}
        path = ws / ".txcl-data" / "cache" / check_cache.CACHE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(seal(safecache.encode_plain(payload), b"txcl check cache"))
    finally:
        monkeypatch.delenv("XDG_CACHE_HOME")
        safecache.reset_key()


def test_a_check_cache_sealed_by_someone_else_is_ignored(tmp_path, monkeypatch):
    ws = _tree(tmp_path / "ws")
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    _forged_check_cache(ws, theirs, monkeypatch)
    done = _txcl("check", "--output-format", "json", cwd=ws, env={"XDG_CACHE_HOME": str(mine)})
    assert json.loads(done.stdout) == [] and done.returncode == 0
    # the same forged file sealed with *my* key is read: it is the seal that refused it above
    _forged_check_cache(ws, mine, monkeypatch)
    done = _txcl("check", "--output-format", "json", cwd=ws, env={"XDG_CACHE_HOME": str(mine)})
    assert [d["message"] for d in json.loads(done.stdout)] == ["FORGED FINDING"]


def test_check_cache_entries_of_another_shape_are_dropped():
    good = (("TX202", "m", (1, 1, 0, 1, 2, 1), None, "warning"),)
    entries = {"a": (good, None), "b": (good, {"x": 1}), "c": ((("TX202",),), None), "d": [good, None],
               "e": ((("TX202", "m", (1, 1, 0, 1, 2), None, "warning"),), None), "f": (good, "facts")}
    assert set(check_cache._valid_entries(entries)) == {"a", "b"}
    assert check_cache._valid_entries(["not", "a", "dict"]) == {}


def test_plain_data_keeps_tuples_and_refuses_what_is_not_data():
    value = {"a": (1, ["(", ("[",)], None), "b": [(), []], "c": 1.5}
    assert safecache.decode_plain(safecache.encode_plain(value)) == value
    assert type(safecache.decode_plain(safecache.encode_plain(value))["a"]) is tuple
    for bad in (b"[1, 2]", b"not json", b'{"a": ["?", 1]}', b"[" * 5000 + b"]" * 5000):
        with pytest.raises(safecache.CacheDataError):
            safecache.decode_plain(bad)
    with pytest.raises(safecache.CacheDataError):
        safecache.encode_plain({1: "a non-string key"})
    with pytest.raises(safecache.CacheDataError):
        safecache.encode_plain({"x": object()})


def test_a_seal_binds_the_payload_its_purpose_and_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "one"))
    safecache.reset_key()
    try:
        sealed = seal(b"payload", b"purpose")
        assert unseal(sealed, b"purpose") == b"payload"
        key_file = safecache.key_path()
        assert key_file.stat().st_mode & 0o077 == 0 and len(key_file.read_bytes()) == 32
        for data, purpose in ((sealed, b"other purpose"), (sealed[:-1] + b"X", b"purpose"), (b"payload", b"purpose")):
            with pytest.raises(safecache.CacheDataError):
                unseal(data, purpose)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "two"))
        safecache.reset_key()
        with pytest.raises(safecache.CacheDataError):
            unseal(sealed, b"purpose")
        # a key file others can read is no secret: not used (a key of the process instead)
        key_two = safecache.key_path()
        safecache.user_key()
        key_two.chmod(0o644)
        safecache.reset_key()
        assert safecache.user_key() != key_two.read_bytes()
    finally:
        monkeypatch.delenv("XDG_CACHE_HOME")
        safecache.reset_key()


RULE = 'WHEN .user.id =~ /^u_/ && .amount > 1000\nEMIT .meta.at = &now("rfc3339"), .n = 1.5\n'


def test_the_parse_cache_stores_json_and_reads_only_its_users_entries(tmp_path, monkeypatch):
    stored = codec.encode(parse_rule(RULE, "r.txcl"), RULE, "r.txcl")
    assert isinstance(json.loads(stored), list)  # JSON, not marshal
    monkeypatch.setenv("TXCL_PARSE_CACHE", str(tmp_path / "parse.sqlite3"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "theirs"))
    safecache.reset_key()
    previous = diskcache.active()
    try:
        diskcache.enable()
        clear_cache()
        parse_rule(RULE, "r.txcl")
        diskcache.disable()
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "mine"))
        safecache.reset_key()
        cache = diskcache.enable()
        clear_cache()
        parse_rule(RULE, "r.txcl")
        assert cache.hits == 0 and cache.misses == 1  # their entry is not read: parsed again
        diskcache.disable()
        cache = diskcache.enable()
        clear_cache()
        parse_rule(RULE, "r.txcl")
        assert cache.hits == 1  # and replaced by mine
    finally:
        diskcache.disable()
        monkeypatch.delenv("XDG_CACHE_HOME")
        safecache.reset_key()
        if previous is not None:
            diskcache.enable(previous.path)
        clear_cache()


def test_an_infinite_float_is_not_cached_as_null():
    import attrs

    text = "EMIT .x = 1.5\n"
    rule = parse_rule(text, "r.txcl")
    value = attrs.evolve(rule.emit[0].value, value=float("inf"))  # JSON would write it as null
    rule = attrs.evolve(rule, emit=(attrs.evolve(rule.emit[0], value=value),))
    with pytest.raises(ValueError):
        codec.encode(rule, text, "r.txcl")


# ---------------------------------------------------------------- the audit

# the only modules that may call exec/eval/compile on source: each builds it from its own text,
# never from a rule's or a file's — codegen and codec embed names and strings as repr()'d
# constants, the parser's reductions are made of `c[<int>]` and `None` from the grammar's shapes
EXEC_ALLOWED = {"txcl/evaluate/codegen.py", "txcl/syntax/codec.py", "txcl/syntax/parser.py"}
# the only dynamic imports: txcl's own lazily loaded names, its compiled parser twin, the serve
# extensions it names itself, and py:// targets, which a rule names on purpose — imported by
# `run`, `serve` and `test`, never by `check`, `fmt` or the language server
IMPORT_ALLOWED = {"txcl/__init__.py", "txcl/syntax/compiled.py", "txcl/serve/extensions.py",
                  "txcl/ops/pytargets.py",  # py:// targets: the module a rule names, by design
                  "txcl/cli/cmd_worker.py",  # txcl worker serve MODULE:ATTR: the module its command line names
                  # a command or output format of txcl's own, from a fixed list of names
                  "txcl/cli/main.py", "txcl/check/formats/__init__.py",
                  # the check rules: the modules of txcl's own rules package, as installed
                  "txcl/check/rules/__init__.py"}


def _calls(tree: pyast.AST) -> list[str]:
    found = []
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Call):
            found.append(pyast.unparse(node.func))
    return found


def test_no_module_unpickles_unmarshals_or_evaluates():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        tree = pyast.parse(path.read_text(encoding="utf-8"))
        for node in pyast.walk(tree):
            names = []
            if isinstance(node, pyast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, pyast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                if name.split(".")[0] in ("pickle", "marshal", "shelve", "dill", "cloudpickle", "yaml"):
                    offenders.append(f"{rel}: imports {name}")
        for call in _calls(tree):
            if call == "__import__" or call.endswith("pickle.loads") or call.endswith("marshal.loads"):
                offenders.append(f"{rel}: calls {call}")
            if call in ("exec", "eval", "compile") and rel not in EXEC_ALLOWED:
                offenders.append(f"{rel}: calls {call}")
            if call.endswith("import_module") and rel not in IMPORT_ALLOWED:
                offenders.append(f"{rel}: calls {call}")
            if re.fullmatch(r".*YAML", call) and rel != "txcl/ruletest/spec.py":
                offenders.append(f"{rel}: makes a YAML loader")
    assert offenders == []


def test_yaml_is_only_read_by_safe_loaders():
    text = (PACKAGE / "ruletest" / "spec.py").read_text(encoding="utf-8")
    assert set(re.findall(r"YAML\(typ=\"(\w+)\"", text)) <= {"rt", "safe"}


def test_check_and_the_language_server_never_import_a_py_target(tmp_path):
    ws = tmp_path / "ws"
    scope = ws / "OPS" / "s" / "0100"
    scope.mkdir(parents=True)
    marker = tmp_path / "imported"
    (ws / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef f(x): return x\n")
    (scope / "a.txcl").write_text('EXEC "py://evilmod:f"\n', encoding="utf-8")
    assert _txcl("check", cwd=ws).returncode == 0
    assert not marker.exists()
    assert _txcl("run", "--stack", "s", cwd=ws).returncode == 0
    assert marker.exists()  # the same tree run does import it: the test can see an import


# ---------------------------------------------------------------- the rule compiler

HOSTILE = [
    '"); __import__("os").system("id") #',
    "'); __import__('os').system('id') #",
    "\\\\", "\\n\\r\\t", "\n", '\\"', "{__import__}", "\\u0041\\x41\\N{BULLET}", "__builtins__",
    "\u2028\u2029\x00".replace("\x00", ""), "lambda: 1", "${x}",
]


def _hostile_rules() -> list[str]:
    rules = []
    for text in HOSTILE:
        literal = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        segment = re.sub(r'["\n]', "_", text) or "_"
        rules += [
            f'WHEN .a == "{literal}"\nEMIT .out = "{literal}"',
            f'WHEN .a."{segment}" != "{literal}"\nEMIT .out = .a."{segment}"',
            f'WHEN .a =~ /{re.escape(text).replace("/", "").replace(chr(10), "n")}/\nEMIT .out = &concat("{literal}", .a."{segment}")',
            f'SET .a."{segment}" = "{literal}"\nEMIT .out = &to_json(.a)',
            f'WHEN .a."{segment}".b.c == 1 || .a > "{literal}"\nEMIT .out = &len("{literal}"), .o2 = &get(.a, "{literal}")',
        ]
    return rules


_GENERATED_NAME = re.compile(r"^(?:d|f|M|[a-z]+[0-9]+|_[a-z]+|_G|_EvalError|type|isinstance|len|dict|list|"
                             r"str|int|float|None|True|False|value|when|emit|o|view|TxclEvalError|e|Exception)$")


def test_no_rule_text_becomes_code(monkeypatch):
    from txcl.evaluate import codegen

    sources: list[str] = []
    real_build = codegen._Source.build

    def build(self, name, params, body):
        function = real_build(self, name, params, body)
        sources.append(function.source)
        return function

    monkeypatch.setattr(codegen._Source, "build", build)
    rules = _hostile_rules()
    parsed = 0
    for text in rules:
        clear_cache()
        try:
            rule = parse_rule(text, "h.txcl")
        except txcl.TxclError:
            continue
        parsed += 1
        txcl.apply_rule(rule, {"a": {"x": "y"}})
    assert parsed >= len(rules) * 0.9 and len(sources) >= parsed
    for source in sources:
        tree = pyast.parse(source)
        for node in pyast.walk(tree):
            if isinstance(node, pyast.Name):
                assert _GENERATED_NAME.match(node.id), (node.id, source)
            if isinstance(node, pyast.Attribute):
                assert node.attr in ("get", "startswith", "endswith", "encode", "isascii", "search"), source
            assert not isinstance(node, (pyast.Import, pyast.ImportFrom, pyast.Lambda, pyast.JoinedStr))


def test_hostile_text_comes_out_as_data():
    for text in HOSTILE:
        literal = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        clear_cache()
        rule = parse_rule(f'WHEN .a == "{literal}"\nEMIT .out = "{literal}"', "h.txcl")
        matched = txcl.apply_rule(rule, {"a": text})
        assert matched.matched and matched.envelope["out"] == text
        assert not txcl.apply_rule(rule, {"a": text + "x"}).matched


def _nvim() -> str | None:
    return shutil.which("nvim")


NVIM_SCRIPT = """
local ws, file, out = arg_ws, arg_file, arg_out
local id = vim.lsp.start_client({cmd = {PYTHON, '-m', 'txcl', 'lsp'}, root_dir = ws, name = 'txcl'})
vim.cmd('edit ' .. file)
vim.lsp.buf_attach_client(0, id)
vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 100)
local lines = {}
for _, d in ipairs(vim.diagnostic.get(0)) do table.insert(lines, tostring(d.code) .. ' ' .. d.message) end
vim.fn.writefile(lines, out)
vim.lsp.stop_client(id)
vim.cmd('qa!')
"""


@pytest.mark.skipif(_nvim() is None, reason="Neovim is installed by ./run-tests (.ci/services.sh)")
def test_neovim_opening_a_rule_runs_no_shipped_cache(tmp_path):
    ws = tmp_path / "ws"
    scope = ws / "OPS" / "shop" / "0100_a"
    scope.mkdir(parents=True)
    rule = scope / "a.txcl"
    rule.write_text("WHEN .a == 1\nEMIT .b = 2\nEMIT .c = 3\n", encoding="utf-8")  # TX: EMIT twice
    marker = tmp_path / "marker"
    evil = pickle.dumps({"fingerprint": "x", "entries": _Marker(str(marker))})
    cache_dir = ws / ".txcl-data" / "cache"
    cache_dir.mkdir(parents=True)
    for name in ("check-v1.pickle", check_cache.CACHE_NAME):
        (cache_dir / name).write_bytes(evil)
    out = tmp_path / "diagnostics.txt"
    script = tmp_path / "probe.lua"
    script.write_text(
        f"local arg_ws, arg_file, arg_out = {json.dumps(str(ws))}, {json.dumps(str(rule))}, {json.dumps(str(out))}\n"
        f"local PYTHON = {json.dumps(sys.executable)}\n" + NVIM_SCRIPT, encoding="utf-8")
    subprocess.run([_nvim(), "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {script}"],
                   cwd=ws, capture_output=True, timeout=120, check=False,
                   env={**os.environ, "HOME": str(tmp_path)})
    assert out.exists(), "Neovim wrote no diagnostics"
    assert out.read_text().strip(), "the language server published no diagnostic"
    assert not marker.exists()
