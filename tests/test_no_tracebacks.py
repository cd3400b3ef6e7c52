"""No Python traceback reaches a user for a mistake in their input or arguments: every command
(and every subcommand of a group) is run with a few hostile arguments — an unknown flag, a
missing folder, a database under a folder that does not exist, malformed JSON — from a
workspace and from an empty folder, and must answer with a message, not a traceback (and not
the exit 70 of an internal error)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from txcl.cli.main import cli

HOSTILE = [
    ["--no-such-flag"],
    ["/no/such/dir"],
    ["--db", "/proc/nope/x.db"],
    [".", "--db", "/proc/nope/x.db"],
    ["--input", "{not json"],
    [".", "--stack", "no-such-stack"],
]
SERVERS = {"serve", "playground", "lsp", "repl", "dap"}  # they wait for work: closed stdin, a bad flag


def _commands() -> list[list[str]]:
    ctx = click.Context(cli)
    out = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        if isinstance(command, click.Group):
            out += [[name, sub] for sub in command.list_commands(click.Context(command))]
        out.append([name])
    return out


def _run(argv: list[str], cwd: Path) -> tuple[list[str], int | None, str]:
    try:
        done = subprocess.run([sys.executable, "-m", "txcl", *argv], cwd=cwd, capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"})
        return argv, done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:  # a server that started: its output so far
        text = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
        return argv, None, text


def test_no_command_shows_a_traceback_for_hostile_arguments(tmp_path):
    ws = tmp_path / "ws"
    (ws / "OPS/s/0100").mkdir(parents=True)
    (ws / "OPS/s/0100/a.txcl").write_text("EMIT .a = 1\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    runs = []
    for command in _commands():
        hostile = HOSTILE[:1] if command[0] in SERVERS else HOSTILE
        for args in hostile:
            for cwd in (ws, empty):
                runs.append(([*command, *args], cwd))
    assert len(runs) > 100
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda r: _run(*r), runs))
    bad = [(argv, code, text[-400:]) for argv, code, text in results if "Traceback" in text or code == 70]
    assert bad == []
