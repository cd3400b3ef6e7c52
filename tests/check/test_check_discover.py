"""Which files `txcl check` / `txcl fmt` look at and the library API."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from txcl.check import check_paths
from txcl.check.config import CheckConfig
from txcl.check.discover import discover, rule_files
from txcl.cli.main import cli


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_directory_outside_trees_is_searched(tmp_path) -> None:
    _write(tmp_path, {
        "proj/ws/OPS/s/0100/a.txcl": "EMIT .a = 01\n",
        "proj/loose/b.txcl": "EMIT .b = 02\n",
        "proj/.hidden/c.txcl": "EMIT .c = 03\n",
        "proj/notes.txt": "x",
    })
    work = discover([tmp_path / "proj"], CheckConfig())
    assert [p.name for p in work.trees] == ["OPS"]
    assert [p.name for p in work.loose] == ["b.txcl"]
    found = check_paths([tmp_path / "proj"], cache_dir=False)
    assert sorted((Path(d.file).name, d.code) for d in found) == [("a.txcl", "TX201"), ("b.txcl", "TX201")]


def test_workspace_ops_dir_and_inner_dir_all_find_the_tree(tmp_path) -> None:
    _write(tmp_path, {"OPS/s/0100/a.txcl": "EMIT .a = 1\n", "OPS/s/0200/b.txcl": "EMIT .b = 2\n"})
    for path in (tmp_path, tmp_path / "OPS", tmp_path / "OPS" / "s" / "0100"):
        work = discover([path], CheckConfig())
        assert list(work.trees) == [(tmp_path / "OPS").resolve()]
    inner = discover([tmp_path / "OPS" / "s" / "0100"], CheckConfig())
    job = next(iter(inner.trees.values()))
    assert job.wants((tmp_path / "OPS/s/0100/a.txcl").resolve())
    assert not job.wants((tmp_path / "OPS/s/0200/b.txcl").resolve())


def test_fmt_file_list_honours_exclude(tmp_path) -> None:
    _write(tmp_path, {"OPS/s/0100/a.txcl": "x", "OPS/vendor/0100/b.txcl": "y", "OPS/s/0100/c.md": "z"})
    cfg = CheckConfig(exclude=("OPS/vendor/**",), root=tmp_path.resolve())
    files, missing = rule_files([tmp_path], cfg)
    assert [f.name for f in files] == ["a.txcl"] and missing == []


def test_explicit_config_option(tmp_path, monkeypatch) -> None:
    _write(tmp_path, {"OPS/s/0100/a.txcl": "WHEN\nEMIT .a = 01\n",
                      "conf/strict.toml": '[check]\nselect = ["TX202"]\n[check.severity]\nTX202 = "error"\n'})
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["check", "--no-cache", "--config", "conf/strict.toml",
                                   "--output-format", "concise"])
    assert res.exit_code == 1
    assert res.stdout.splitlines()[0] == "OPS/s/0100/a.txcl:1:1: TX202 WHEN with no condition matches everything"
