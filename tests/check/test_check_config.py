"""Configuration: [tool.txcl.check] / [check], nearest file wins, every key."""

from __future__ import annotations

from pathlib import Path

import pytest

from txcl.check import run_check
from txcl.check.config import CheckConfig, ConfigError, config_from_table, load_config


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


RULES = {
    "OPS/s/0100/a.txcl": "WHEN\nEMIT .n = 012\n",
    "OPS/s/0100/legacy/b.txcl": "EMIT .n = 013\n",
}


def _codes(root: Path, cfg: CheckConfig | None = None) -> list[tuple[str, str]]:
    cfg = cfg if cfg is not None else load_config(root)
    result = run_check([str(root)], cfg, cache_dir=False)
    return [(Path(d.file).name, d.code) for d in result.diagnostics]


def test_defaults_when_no_file(tmp_path) -> None:
    _tree(tmp_path, RULES)
    assert _codes(tmp_path) == [("a.txcl", "TX202"), ("a.txcl", "TX201"), ("b.txcl", "TX201")]


def test_select_and_ignore_prefixes() -> None:
    cfg = CheckConfig(select=("TX2",), ignore=("TX20",))
    assert not cfg.enabled("TX201")
    assert cfg.enabled("TX210")
    assert not cfg.enabled("TX301")
    cfg = CheckConfig(select=("TX201",), ignore=("TX2",))
    assert cfg.enabled("TX201")  # the more specific select wins
    assert not cfg.enabled("TX202")
    assert CheckConfig(ignore=("ALL",)).enabled("TX001") is False


def test_pyproject_table_and_per_file_ignores(tmp_path) -> None:
    _tree(tmp_path, RULES)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.txcl.check]\nignore = ["TX202"]\n'
        '[tool.txcl.check.per-file-ignores]\n"OPS/s/0100/legacy/**" = ["TX201"]\n', encoding="utf-8")
    assert _codes(tmp_path) == [("a.txcl", "TX201")]


def test_txcl_toml_wins_in_same_directory(tmp_path) -> None:
    _tree(tmp_path, RULES)
    (tmp_path / "pyproject.toml").write_text('[tool.txcl.check]\nignore = ["TX202"]\n', encoding="utf-8")
    (tmp_path / "txcl.toml").write_text('[check]\nselect = ["TX202"]\n', encoding="utf-8")
    assert _codes(tmp_path) == [("a.txcl", "TX202")]


def test_nearest_file_wins(tmp_path) -> None:
    _tree(tmp_path / "ws", RULES)
    (tmp_path / "txcl.toml").write_text('[check]\nselect = ["TX202"]\n', encoding="utf-8")
    (tmp_path / "ws" / "txcl.toml").write_text('[check]\nselect = ["TX201"]\n', encoding="utf-8")
    cfg = load_config(tmp_path / "ws" / "OPS")
    assert cfg.select == ("TX201",)
    assert cfg.root == (tmp_path / "ws").resolve()


def test_pyproject_without_txcl_table_is_skipped(tmp_path) -> None:
    (tmp_path / "txcl.toml").write_text('[check]\nignore = ["TX3"]\n', encoding="utf-8")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert load_config(inner).ignore == ("TX3",)


def test_severity_override_and_exclude(tmp_path) -> None:
    _tree(tmp_path, RULES)
    (tmp_path / "txcl.toml").write_text(
        '[check]\nexclude = ["OPS/s/0100/legacy"]\n[check.severity]\nTX201 = "error"\n', encoding="utf-8")
    result = run_check([str(tmp_path)], load_config(tmp_path), cache_dir=False)
    assert [(Path(d.file).name, d.code, d.severity) for d in result.diagnostics] == [
        ("a.txcl", "TX202", "warning"), ("a.txcl", "TX201", "error")]


@pytest.mark.parametrize("table, message", [
    ({"select": ["TX999"]}, "not a rule code"),
    ({"select": "TX2x"}, "not a rule code"),
    ({"ignore": [1]}, "list of strings"),
    ({"severity": {"TX201": "fatal"}}, "must be one of"),
    ({"severity": {"TX2": "error"}}, "full code"),
    ({"per-file-ignores": ["x"]}, "table"),
    ({"colour": True}, "unknown key"),
])
def test_invalid_config_is_reported(table, message) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_table(table, "txcl.toml [check]", None)
    assert message in str(info.value)
    assert "txcl.toml [check]" in str(info.value)


def test_broken_toml_is_a_config_error(tmp_path) -> None:
    (tmp_path / "txcl.toml").write_text("[check\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(tmp_path)


def test_loop_ceiling_comes_from_the_serve_table(tmp_path) -> None:
    _tree(tmp_path, {"OPS/s/0100/a.txcl": 'EXEC "https://api.example.net/p"\nLOOP UNTIL .done == true MAX 1500\n'})
    assert _codes(tmp_path) == [("a.txcl", "TX211")]
    (tmp_path / "pyproject.toml").write_text("[tool.txcl.serve]\nop-loop-max = 2000\n", encoding="utf-8")
    assert load_config(tmp_path).loop_max == 2000
    assert _codes(tmp_path) == []
    (tmp_path / "txcl.toml").write_text("[serve]\nop_loop_max = 1200\n", encoding="utf-8")
    result = run_check([str(tmp_path)], load_config(tmp_path), cache_dir=False)
    assert [d.message for d in result.diagnostics] == [
        "LOOP MAX 1500 is above the configured ceiling (op-loop-max) 1200; "
        "the runtime refuses this loop unless --op-loop-max is raised"]
