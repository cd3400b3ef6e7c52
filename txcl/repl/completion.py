"""REPL completion: the language's completion (txcl.lsp.completion: keywords, functions,
WITH keys, EXEC schemes, envelope paths) plus the REPL's own words — meta-commands, `.run`
stacks and `.load`/`.save` files.

`complete()` is a plain function over the text before the cursor so it can be tested
without a terminal; `TxclCompleter` adapts it to prompt-toolkit.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Iterable, Iterator

from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document

from txcl.lsp.completion import _LONE_SURROGATE, Candidate, complete_rule, path_candidates
from txcl.repl.entry import META_COMMANDS


def file_candidates(prefix: str) -> list[Candidate]:
    directory, _, partial = prefix.rpartition("/")
    base = os.path.expanduser(directory) if directory else "."
    try:
        names = sorted(os.listdir(base or "/"))
    except OSError:
        return []
    out = []
    for name in names:
        if name.startswith(partial) and not (name.startswith(".") and not partial.startswith(".")):
            full = (directory + "/" if directory else "") + name
            if os.path.isdir(os.path.join(base or "/", name)):
                full += "/"
            out.append(Candidate(full, -len(prefix), full, "file", "file"))
    return out


def complete(before: str, envelope: Any = None, stacks: Iterable[str] = (),
             meta: bool = True) -> list[Candidate]:
    """Candidates for the word that ends at the cursor; `before` is the text before it.
    `meta` offers meta-commands when the entry is a single word starting with `.`."""
    envelope = envelope if envelope is not None else {}
    # a lone surrogate (an editor can send one) cannot be matched by RE2: the same character
    # count, with the replacement character in its place
    before = _LONE_SURROGATE.sub("\ufffd", before)
    line_start = before.rfind("\n") + 1
    line = before[line_start:]
    if line_start == 0 and meta:
        found = re.match(r"\s*(\.[a-z]+)\s+(.*)$", line)
        if found and found.group(1) in META_COMMANDS:
            command, arg = found.group(1), found.group(2)
            if command == ".run":
                return [Candidate(s, -len(arg), s, "stack", "stack") for s in stacks if s.startswith(arg)]
            if command in (".load", ".save"):
                return file_candidates(arg)
            if " " not in arg:
                return path_candidates(arg, envelope) if arg[:1] in (".", "@") else []
            if command == ".set":  # the VALUE: complete it like an expression
                return complete(arg.partition(" ")[2], envelope, stacks, meta=False)
            return []
    out = complete_rule(before, envelope)
    word = line.strip()
    if meta and line_start == 0 and re.fullmatch(r"\.[a-z]*", word) and before.endswith(word):
        out = [Candidate(c, -len(word), c, "command", "command") for c in META_COMMANDS
               if c.startswith(word) and c != ".exit"] + out
    return out


class TxclCompleter(Completer):
    """prompt-toolkit adapter; `state` returns (envelope, stacks) at completion time."""

    def __init__(self, state: Callable[[], tuple[Any, list[str]]]):
        self.state = state

    def get_completions(self, document: Document, complete_event: Any) -> Iterator[Completion]:
        envelope, stacks = self.state()
        for cand in complete(document.text_before_cursor, envelope, stacks):
            yield Completion(cand.text, start_position=cand.start, display=cand.display,
                             display_meta=cand.meta)
