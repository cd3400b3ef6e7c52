"""`txcl check` and `txcl rule` on the command line: exit codes, summary, statistics, fixes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from txcl.cli.main import cli


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _run(args: list[str], cwd: Path, monkeypatch):
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(cli, args)


CLEAN = {"OPS/s/0100/a.txcl": "WHEN .a == 1\nEMIT .b = 2\n"}
WARN = {"OPS/s/0100/a.txcl": "EMIT .b = 012\n"}
ERROR = {"OPS/s/0100/a.txcl": "EMIT .b 2\n"}
INFO = {"OPS/s/0100/a.txcl": "EMIT .b = 2\nEMIT .c = 3\n"}


def test_clean_tree_exits_0_with_summary(tmp_path, monkeypatch) -> None:
    res = _run(["check", "--no-cache"], _tree(tmp_path, CLEAN), monkeypatch)
    assert res.exit_code == 0
    assert res.stdout.strip() == "All checks passed (1 file checked)."


def test_warnings_pass_unless_strict(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, WARN)
    res = _run(["check", "--no-cache"], tmp_path, monkeypatch)
    assert res.exit_code == 0
    assert "Found 1 warning in 1 of 1 file (1 fixable with --fix)." in res.stdout
    assert _run(["check", "--no-cache", "--strict"], tmp_path, monkeypatch).exit_code == 1


def test_info_never_fails(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, INFO)
    assert _run(["check", "--no-cache", "--strict"], tmp_path, monkeypatch).exit_code == 0


def test_errors_exit_1_and_exit_zero(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, ERROR)
    res = _run(["check", "--no-cache"], tmp_path, monkeypatch)
    assert res.exit_code == 1
    assert "TX014" in res.stdout
    assert _run(["check", "--no-cache", "--exit-zero"], tmp_path, monkeypatch).exit_code == 0


def test_usage_and_config_errors_exit_2(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, CLEAN)
    res = _run(["check", "nowhere"], tmp_path, monkeypatch)
    assert res.exit_code == 2
    assert "no such file or directory: nowhere" in res.stderr
    assert _run(["check", "--select", "TX9"], tmp_path, monkeypatch).exit_code == 2
    (tmp_path / "txcl.toml").write_text("[check]\nbogus = 1\n", encoding="utf-8")
    res = _run(["check"], tmp_path, monkeypatch)
    assert res.exit_code == 2
    assert "unknown key 'bogus'" in res.stderr
    assert _run(["check", "--output-format", "xml"], tmp_path, monkeypatch).exit_code == 2


def test_machine_formats_keep_stdout_clean(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, WARN)
    res = _run(["check", "--no-cache", "--output-format", "json"], tmp_path, monkeypatch)
    assert json.loads(res.stdout)[0]["code"] == "TX201"
    assert "Found 1 warning" in res.stderr


def test_statistics(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, {"OPS/s/0100/a.txcl": "EMIT .b = 012, .c = 013\nEMIT .d = 1\n"})
    res = _run(["check", "--no-cache", "--statistics"], tmp_path, monkeypatch)
    lines = res.stdout.splitlines()
    assert lines[0] == "2  TX201  [*] leading-zero-number"
    assert lines[1] == "1  TX302  [*] split-clause"


def test_select_and_ignore_options(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, {"OPS/s/0100/a.txcl": "WHEN\nEMIT .b = 012\n"})
    res = _run(["check", "--no-cache", "--output-format", "concise", "--select", "TX202"], tmp_path, monkeypatch)
    assert [l.split()[1] for l in res.stdout.splitlines()[:-1]] == ["TX202"]
    res = _run(["check", "--no-cache", "--output-format", "concise", "--ignore", "TX202"], tmp_path, monkeypatch)
    assert [l.split()[1] for l in res.stdout.splitlines()[:-1]] == ["TX201"]


def test_fix_and_diff(tmp_path, monkeypatch) -> None:
    rule = tmp_path / "OPS/s/0100/a.txcl"
    original = 'EMIT .b = 012\nWHEN .a == 1\nEMIT .c = 1  # keep\n'
    _tree(tmp_path, {"OPS/s/0100/a.txcl": original})
    res = _run(["check", "--no-cache", "--diff"], tmp_path, monkeypatch)
    assert res.exit_code == 1
    assert "-EMIT .b = 012" in res.stdout and "+EMIT .b = 12," in res.stdout
    assert rule.read_text(encoding="utf-8") == original
    res = _run(["check", "--no-cache", "--fix"], tmp_path, monkeypatch)
    assert res.exit_code == 0
    assert rule.read_text(encoding="utf-8") == 'WHEN .a == 1\nEMIT .b = 12,\n     .c = 1  # keep\n'
    assert "All checks passed" in res.stdout
    assert _run(["check", "--no-cache", "--diff"], tmp_path, monkeypatch).exit_code == 0


def test_rule_command(tmp_path, monkeypatch) -> None:
    res = _run(["rule", "TX123"], tmp_path, monkeypatch)
    assert res.exit_code == 0
    assert res.stdout.startswith("TX123 invalid-stage-name (error)")
    assert "Bad:" in res.stdout and "Good:" in res.stdout
    res = _run(["rule", "201"], tmp_path, monkeypatch)
    assert "safe fix" in res.stdout
    assert _run(["rule", "TX999"], tmp_path, monkeypatch).exit_code == 2
    listing = _run(["rule", "--all"], tmp_path, monkeypatch).stdout.splitlines()
    from txcl.codes import CODES
    assert len(listing) == len(CODES)


def test_progress_bar_only_on_a_terminal(tmp_path, monkeypatch) -> None:
    from txcl.cli.cmd_check import _ProgressBar
    shown = []
    monkeypatch.setattr("sys.stderr.write", lambda s: shown.append(s), raising=False)
    bar = _ProgressBar(enabled=False)
    bar(500, 500)
    assert not bar.shown
    bar = _ProgressBar(enabled=True)
    bar(10, 100)  # small trees: no bar
    assert not bar.shown
    bar(500, 500)
    assert bar.shown


def test_cache_gives_the_same_findings(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, WARN)
    first = _run(["check", "--output-format", "concise"], tmp_path, monkeypatch).stdout
    assert (tmp_path / ".txcl-data" / "cache").is_dir()
    second = _run(["check", "--output-format", "concise"], tmp_path, monkeypatch).stdout
    assert first == second and "TX201" in first


def test_parallel_analysis_matches_serial(tmp_path, monkeypatch) -> None:
    from txcl.check import engine
    for i in range(40):
        rule = tmp_path / f"OPS/s/{100 + i % 4:04d}/r{i}.txcl"
        rule.parent.mkdir(parents=True, exist_ok=True)
        rule.write_text(f"EMIT .n = 0{i}\nWHEN .x == {i}\n" if i % 3 else f"EMIT .n {i}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(engine, "PARALLEL_MIN_FILES", 10)
    from txcl.check.cache import clear_memory
    clear_memory()
    serial = engine.run_check(["."], cache_dir=False, jobs=1).diagnostics
    clear_memory()
    parallel = engine.run_check(["."], cache_dir=False, jobs=2).diagnostics
    assert [d.to_json() for d in parallel] == [d.to_json() for d in serial]
    assert {d.code for d in serial} == {"TX014", "TX201", "TX301"}


def test_color_always_reaches_a_pipe(tmp_path, monkeypatch) -> None:
    _tree(tmp_path, WARN)
    res = _run(["check", "--no-cache", "--color", "always"], tmp_path, monkeypatch)
    assert "\x1b[1;33mTX201\x1b[0m" in res.stdout
    res = _run(["check", "--no-cache"], tmp_path, monkeypatch)
    assert "\x1b[" not in res.stdout


def test_the_in_memory_analyses_stay_bounded_by_weight() -> None:
    """A language server re-checks a big buffer on every keystroke: each version's analysis
    is kept, but the memory cache drops the oldest past its weight limit (not only its count)."""
    from txcl.check import cache
    from txcl.check.analyze import analyze

    cache.clear_memory()
    text = "WHEN .a == 1\n" + "".join(f"EMIT .a{i} = .b{i}\n" for i in range(2000))
    memory = cache.AnalysisCache(None)
    for n in range(60):
        version = text.replace(".a1 ", f".a1{n} ", 1).encode()
        memory.put(cache.key_of(version), analyze(version, "big.txcl", None))
    assert cache._weight <= cache._MEMORY_WEIGHT_LIMIT
    assert 0 < len(cache._MEMORY) < 60
    oldest = text.replace(".a1 ", ".a10 ", 1).encode()
    latest = text.replace(".a1 ", ".a159 ", 1).encode()
    assert memory.get(cache.key_of(oldest)) is None and memory.get(cache.key_of(latest)) is not None
    cache.clear_memory()
