"""The interactive REPL driven through prompt-toolkit's pipe input and a dummy output."""

from __future__ import annotations

from pathlib import Path

import pytest
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from txcl.highlight import TxclLexer
from txcl.repl.app import build_prompt, open_history, run_interactive, user_data_dir
from txcl.repl.session import ReplSession

ENTER = "\r"
ESC_ENTER = "\x1b\r"
CTRL_D = "\x04"
CTRL_R = "\x12"
RIGHT = "\x1b[C"


def drive(keys: str, session: ReplSession | None = None, history=None) -> tuple[list[str], ReplSession]:
    session = session or ReplSession({"user": {"id": 7}, "order": {"total": 120}})
    printed: list[str] = []
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        status = run_interactive(session, input=pipe, output=DummyOutput(),
                                 history=history or InMemoryHistory(), echo=printed.append,
                                 banner=False)
    assert status == 0
    return printed, session


def test_expression_and_quit() -> None:
    printed, _ = drive(".user.id" + ENTER + '&concat("a", 1)' + ENTER + ".quit" + ENTER)
    assert printed == ["7", '"a1"']


def test_ctrl_d_leaves() -> None:
    printed, _ = drive("&add(1, 2)" + ENTER + CTRL_D)
    assert printed == ["3"]


def test_multiline_rule_is_submitted_when_it_parses() -> None:
    # "WHEN .order.total >=" does not parse yet: Enter opens a new line instead.
    keys = "WHEN .order.total >=" + ENTER + "100" + ESC_ENTER + "EMIT .big = true" + ENTER + CTRL_D
    printed, session = drive(keys)
    assert len(printed) == 1
    assert "WHEN matches" in printed[0]
    assert "+ .big = true" in printed[0]
    assert session.envelope["big"] is True


def test_a_rule_typed_line_by_line_is_one_entry() -> None:
    """As Python's REPL does for a compound statement: a rule without EXEC or EMIT yet goes on
    with Enter; the EMIT line (or a blank line) submits it."""
    keys = "WHEN .order.total >= 100" + ENTER + "EMIT .big = true" + ENTER + CTRL_D
    printed, session = drive(keys)
    assert len(printed) == 1 and "WHEN matches" in printed[0] and session.envelope["big"] is True
    printed, _ = drive("WHEN .order.total > 500" + ENTER + ENTER + CTRL_D)  # a lone WHEN: a blank line submits
    assert len(printed) == 1 and "does not match" in printed[0]


def test_empty_line_submits_an_incomplete_rule_and_shows_the_caret() -> None:
    printed, session = drive("WHEN .a ==" + ENTER + ENTER + CTRL_D)
    assert len(printed) == 1
    assert "TX026" in printed[0]
    assert "^" in printed[0]
    assert "Traceback" not in printed[0]


def test_ctrl_c_discards_the_entry() -> None:
    printed, _ = drive("WHEN .a ==" + ENTER + "\x03" + ".user.id" + ENTER + CTRL_D)
    assert printed == ["7"]


def test_tab_completes_functions_and_paths() -> None:
    printed, _ = drive("&ad\t1, 2)" + ENTER + ".us\t.id" + ENTER + CTRL_D)
    assert printed == ["3", "7"]


def test_history_search_with_ctrl_r_and_suggestions() -> None:
    history = InMemoryHistory()
    drive("&add(40, 2)" + ENTER + ".user.id" + ENTER + CTRL_D, history=history)
    # Ctrl-R, type part of an old entry, Enter accepts it into the buffer, Enter runs it.
    printed, _ = drive(CTRL_R + "add(40" + ENTER + ENTER + CTRL_D, history=history)
    assert printed == ["42"]


def test_auto_suggestion_from_history() -> None:
    from prompt_toolkit.buffer import Buffer
    from prompt_toolkit.document import Document

    history = InMemoryHistory()
    drive("&add(40, 2)" + ENTER + CTRL_D, history=history)
    session = ReplSession()
    with create_pipe_input() as pipe:
        prompt = build_prompt(session, input=pipe, output=DummyOutput(), history=history)
    buffer = Buffer(history=history)
    suggestion = prompt.auto_suggest.get_suggestion(buffer, Document("&ad"))
    assert suggestion is not None and suggestion.text == "d(40, 2)"


def test_history_is_persistent_under_the_user_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXCL_DATA_DIR", str(tmp_path / "data"))
    assert user_data_dir() == tmp_path / "data"
    history = open_history()
    assert isinstance(history, FileHistory)
    drive('&concat("kept")' + ENTER + CTRL_D, history=history)
    stored = (tmp_path / "data" / "repl_history").read_text(encoding="utf-8")
    assert '&concat("kept")' in stored
    # a new session sees it
    assert '&concat("kept")' in list(open_history().load_history_strings())


def test_xdg_data_home_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TXCL_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setattr("sys.platform", "linux")
    assert user_data_dir() == tmp_path / "txcl"


def test_prompt_highlights_with_the_txcl_lexer() -> None:
    session = ReplSession()
    with create_pipe_input() as pipe:
        prompt = build_prompt(session, input=pipe, output=DummyOutput(), history=InMemoryHistory())
    assert prompt.lexer.pygments_lexer_cls is TxclLexer
    assert prompt.auto_suggest is not None
    assert prompt.multiline


def test_input_highlighting_uses_the_terminals_own_colours():
    """ANSI colour names follow the terminal's palette, so paths read on dark and light
    backgrounds (no fixed dark-blue from Pygments' default style)."""

    from txcl.repl.app import input_style

    rules = dict(input_style().style_rules)
    assert rules["pygments.name.variable"] == "ansicyan"
    assert all(not value or value.startswith("ansi") for value in rules.values())
