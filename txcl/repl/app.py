"""The REPL front ends: an interactive prompt-toolkit loop and a batch mode for piped input.

Both feed entries to a `ReplSession` and print its replies; all behaviour lives there.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.enums import DEFAULT_BUFFER
from prompt_toolkit.filters import has_focus
from prompt_toolkit.formatted_text import ANSI
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.shortcuts import print_formatted_text

from txcl.highlight import TxclLexer
from txcl.repl.completion import TxclCompleter
from txcl.repl.entry import parse_entry, is_complete
from txcl.repl.session import Reply, ReplSession

PROMPT = "txcl> "
CONTINUATION = " ...  "
_CLAUSE_START = re.compile(r"(?i)\s*(#|(WHEN|SET|SELECT|WITH|PRIORITY|EXEC|LOOP|EMIT)\b)")


def user_data_dir() -> Path:
    """Where txcl keeps per-user data (REPL history): $TXCL_DATA_DIR, else the platform's
    user data directory."""
    override = os.environ.get("TXCL_DATA_DIR")
    if override:
        return Path(override)
    if sys.platform == "win32":
        base = os.environ.get("APPDATA") or str(Path.home() / "AppData" / "Roaming")
        return Path(base) / "txcl"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "txcl"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "txcl"


def open_history() -> History:
    """File history under the user data dir; in memory when that is not writable."""
    try:
        directory = user_data_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "repl_history"
        path.touch(exist_ok=True)
        return FileHistory(str(path))
    except OSError:
        return InMemoryHistory()


def key_bindings() -> KeyBindings:
    """Enter submits a complete entry and opens a new line otherwise; Esc Enter always
    opens a new line; Tab completes (or indents at the start of a line)."""
    bindings = KeyBindings()
    editing = has_focus(DEFAULT_BUFFER)  # not while Ctrl-R search has the focus

    @bindings.add("enter", filter=editing)
    def _enter(event: Any) -> None:
        buffer = event.current_buffer
        if buffer.complete_state and buffer.complete_state.current_completion:
            buffer.apply_completion(buffer.complete_state.current_completion)
            return
        text = buffer.text
        # Like a shell, Enter anywhere in a one-line entry submits it; inside a multi-line
        # entry it submits only from the end.
        at_end = buffer.document.is_cursor_at_the_end or "\n" not in text
        if not at_end or not _safe_is_complete(text) or _rule_goes_on(text):
            buffer.insert_text("\n")
            return
        buffer.validate_and_handle()

    @bindings.add("tab", filter=editing)
    def _tab(event: Any) -> None:
        # Synchronous: a single candidate is inserted at once (so typing on after Tab is
        # never raced by the background completer); several open the menu.
        buffer = event.current_buffer
        if buffer.complete_state:
            buffer.complete_next()
            return
        before = buffer.document.current_line_before_cursor
        if not before.strip():
            buffer.insert_text("    ")
            return
        if buffer.completer is None:
            return
        found = list(buffer.completer.get_completions(buffer.document,
                                                      CompleteEvent(completion_requested=True)))
        if len(found) == 1:
            buffer.apply_completion(found[0])
        elif found:
            buffer.start_completion(insert_common_part=True)

    @bindings.add("escape", "enter", filter=editing)
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    return bindings


_ACTING_CLAUSE = re.compile(r"(?im)^\s*(EXEC|EMIT)\b")


def _rule_goes_on(text: str) -> bool:
    """A rule typed line by line goes on, as a compound statement does in Python's REPL: while
    it has no EXEC or EMIT yet (a WHEN, SET, SELECT or WITH alone does nothing) and its last
    line is not blank, Enter opens a new line; a blank line submits it. (A lone `WHEN …` is
    then submitted with a second Enter: it shows whether it matches.)"""
    if not _CLAUSE_START.match(text) or _ACTING_CLAUSE.search(text):
        return False
    return bool(text.rstrip(" \t").split("\n")[-1].strip())


def _safe_is_complete(text: str) -> bool:
    try:
        return is_complete(text)
    except Exception:  # never trap the user in the buffer because of a parser bug
        return True


def input_style() -> Any:
    """Highlighting in the terminal's own ANSI colours, so it reads on dark and light
    backgrounds alike (Pygments' default style writes paths dark blue, invisible on black)."""
    from prompt_toolkit.styles import style_from_pygments_dict
    from pygments.token import Comment, Error, Keyword, Name, Number, Operator, String

    return style_from_pygments_dict({
        Keyword: "ansimagenta bold", Keyword.Constant: "ansiyellow", Name.Variable: "ansicyan",
        Name.Function: "ansigreen", String: "ansiyellow", String.Regex: "ansiyellow", Number: "ansiblue",
        Operator: "", Comment: "ansibrightblack italic", Error: "ansired underline",
    })


def build_prompt(session: ReplSession, *, input: Any = None, output: Any = None,
                 history: History | None = None) -> PromptSession:
    return PromptSession(
        message=PROMPT,
        multiline=True,
        prompt_continuation=lambda width, line_number, soft_wrap: CONTINUATION[:width].ljust(width),
        lexer=PygmentsLexer(TxclLexer),
        style=input_style(),
        include_default_pygments_style=False,
        completer=TxclCompleter(lambda: (session.completion_envelope(), session.stacks())),
        complete_while_typing=False,
        auto_suggest=AutoSuggestFromHistory(),
        history=history if history is not None else open_history(),
        enable_history_search=False,  # Up/Down walk history; Ctrl-R searches it
        key_bindings=key_bindings(),
        input=input,
        output=output,
    )


def _printer(output: Any) -> Callable[[str], None]:
    def echo(text: str) -> None:
        print_formatted_text(ANSI(text), output=output)

    return echo


def run_interactive(session: ReplSession, *, input: Any = None, output: Any = None,
                    history: History | None = None, echo: Callable[[str], None] | None = None,
                    banner: bool = True) -> int:
    """The prompt loop. Ctrl-C clears the entry, Ctrl-D or .quit leaves."""
    prompt = build_prompt(session, input=input, output=output, history=history)
    echo = echo or _printer(output)
    if banner:
        echo("txcl repl: type a rule, an expression or .help; Ctrl-D leaves")
        if session.ops_error:
            echo(session.ops_error)
    while True:
        try:
            text = prompt.prompt()
        except KeyboardInterrupt:
            continue
        except EOFError:
            return 0
        reply = session.submit(text)
        if reply.text:
            echo(reply.text)
        if reply.quit:
            return 0


def batch_entries(lines: Iterable[str]) -> Iterable[str]:
    """Split piped input into entries.

    A meta-command or an expression is one line. A rule goes on while the text so far is
    incomplete, or while the next line is indented, a comment or starts with a clause
    keyword; a blank line ends it. So two rules in a row need a blank line between them.
    """
    buffer: list[str] = []
    for raw in lines:
        line = raw.rstrip("\n").rstrip("\r")
        if buffer:
            text = "\n".join(buffer)
            continues = (not _safe_is_complete(text)
                         or (line.strip() and (line[:1].isspace() or _CLAUSE_START.match(line))))
            if continues and line.strip():
                buffer.append(line)
                continue
            yield text
            buffer = []
        if not line.strip():
            continue
        if parse_entry(line).kind == "rule":
            buffer.append(line)
        else:
            yield line
    if buffer:
        yield "\n".join(buffer)


def run_batch(session: ReplSession, stream: TextIO, out: TextIO) -> int:
    """Run piped input without a prompt; exit status 1 when any entry failed."""
    status = 0
    for entry in batch_entries(stream):
        reply: Reply = session.submit(entry)
        if reply.text:
            out.write(reply.text + "\n")
        if not reply.ok:
            status = 1
        if reply.quit:
            break
    out.flush()
    return status
