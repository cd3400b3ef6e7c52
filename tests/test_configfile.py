"""Configuration mistakes are errors naming the file and the key, with a suggestion — for
`txcl check` and for the runtime alike."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TXCL = str(Path(sys.executable).parent / "txcl")


def _ws(root: Path, name: str, text: str) -> Path:
    (root / "OPS" / "s" / "100").mkdir(parents=True)
    (root / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    (root / name).write_text(text)
    return root


@pytest.mark.parametrize("name, text, message", [
    ("pyproject.toml", '[tool.txcl]\nselect = ["TX201"]\n',
     "[tool.txcl]: 'select' is a lint setting: put it under [tool.txcl.check]"),
    ("pyproject.toml", '[tool.txcl.chek]\nselect = ["TX201"]\n', "unknown table 'chek' (did you mean 'check'?)"),
    ("txcl.toml", 'ignore = ["TX201"]\n', "'ignore' is a lint setting: put it under [check]"),
    ("txcl.toml", '[sreve]\nport = 1\n', "unknown table 'sreve' (did you mean 'serve'?)"),
    ("txcl.toml", '[check]\nignor = ["TX201"]\n', "unknown key 'ignor' (did you mean 'ignore'?)"),
])
@pytest.mark.parametrize("command", ["check", "run"])
def test_every_unknown_table_or_key_is_an_error(tmp_path, name, text, message, command):
    ws = _ws(tmp_path, name, text)
    done = subprocess.run([TXCL, command, str(ws)], capture_output=True, text=True, timeout=60)
    if command == "run" and "[check]" in text:
        assert done.returncode == 0  # the runtime reads [serve] only; its own table is fine
        return
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and str(ws / name) in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_serve_setting_suggests_the_right_one(tmp_path):
    ws = _ws(tmp_path, "txcl.toml", '[serve]\nop_timout = "1s"\n')
    done = subprocess.run([TXCL, "run", str(ws)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown setting 'op_timout' in [serve] (did you mean 'op-timeout'?)" in done.stderr
