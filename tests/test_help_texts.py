"""Every command's --help stands on its own: each option says what it does (no pointer to a
document outside the repository), every runtime setting has a meaning and a default, and the
list of commands is not cut short."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from txcl.cli.main import LazyGroup, cli


def _commands() -> list[str]:
    import click

    return LazyGroup().list_commands(click.Context(cli))


@pytest.mark.parametrize("name", _commands())
def test_help_names_no_outside_document(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0
    assert not re.search(r"RUNTIME\.md|LANGUAGE\.md|CONTINUATIONS\.md|§", result.stdout), result.stdout


def test_every_setting_has_a_meaning_and_serve_shows_it() -> None:
    from txcl.runtime.config import SETTING_HELP, default_text, settings_keys

    assert set(SETTING_HELP) == set(settings_keys())
    for key, (unit, text) in SETTING_HELP.items():
        assert unit in ("", "duration", "size", "count") and text.endswith(".") and len(text) < 160, key
    assert default_text("op_timeout") == "5s" and default_text("web_max_body_bytes") == "30MiB"
    assert default_text("continuation_retention") == "7d" and default_text("watch") == "off"
    out = CliRunner().invoke(cli, ["serve", "--help"]).stdout
    flat = " ".join(out.split())
    assert "--async-ack-timeout DURATION How long a dispatch waits for the worker's 202." in flat
    assert "[default: 5s]" in out


def test_the_command_list_is_not_cut_short() -> None:
    out = CliRunner().invoke(cli, ["--help"]).stdout
    listing = out.split("Commands:")[1]
    assert "..." not in listing
    assert "check" in listing and "and checks the" in " ".join(listing.split())


def test_the_repository_cites_no_section_of_a_document_it_does_not_hold() -> None:
    """Comments, docstrings, docs and messages stand on their own: no `§` references to
    specification documents a reader of the repository cannot open."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    offenders = []
    for folder in ("txcl", "docs", "tests", "bench", "grammar", "stdlib", "examples", "editors"):
        for path in (repo / folder).rglob("*"):
            if not path.is_file() or "node_modules" in path.parts or path.suffix not in (
                    ".py", ".md", ".lark", ".txcl", ".vim", ".js", ".json", ".yaml", ".txt", ".toml"):
                continue
            if path.name == "test_help_texts.py":
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if "§" in text or re.search(r"\b(RUNTIME|LANGUAGE|CONTINUATIONS|ARCHITECTURE)\.md\b", text):
                offenders.append(str(path.relative_to(repo)))
    assert offenders == []


def test_code_and_tests_use_no_opaque_ids_of_outside_documents() -> None:
    """Scenario and procedure ids of the specification (T27, DJ-5, EC-6, AU-8, P4) mean nothing
    to a reader of the repository: tests and comments say what they check instead."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    pattern = re.compile(r"\b(?:DJ-F?\d+|AU-\d+|EC-\d+|T\d{1,2}|P\d{1,2})\b")
    offenders = []
    for folder in ("txcl", "tests", "bench"):
        for path in (repo / folder).rglob("*.py"):
            if path.name == "test_help_texts.py":
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(repo)}:{n}")
    assert offenders == []
