"""What the user typed: a meta-command, a rule, an expression or a condition, and whether
a multi-line entry is complete yet."""

from __future__ import annotations

import re

import attrs

from txcl.errors import TxclSyntaxError
from txcl.vocabulary import CLAUSE_KEYWORDS

META_COMMANDS: dict[str, str] = {
    ".help": ".help                  this text",
    ".env": ".env [PATH]            show the working envelope (or the value at PATH)",
    ".set": ".set PATH VALUE        write VALUE (a TXCL value or JSON) at PATH in the envelope",
    ".unset": ".unset PATH            delete PATH from the envelope",
    ".load": ".load FILE             load a JSON file as the envelope, or apply a .txcl rule file",
    ".save": ".save FILE             write the envelope to FILE as JSON",
    ".output": ".output [JSON]         the op output typed rules pretend EXEC returned (default {})",
    ".run": ".run STACK             walk STACK of the loaded OPS tree over the envelope",
    ".reset": ".reset                 go back to the initial envelope",
    ".quit": ".quit                  leave (also .exit or Ctrl-D)",
    ".exit": "",
}

_RULE_START = re.compile(r"(?is)\s*(?:#[^\n]*\n\s*)*(" + "|".join(CLAUSE_KEYWORDS) + r")\b")
_META = re.compile(r"\s*(\.[a-z]+)(?=\s|$)")
_CONDITION_OP = re.compile(r"==|!=|<=|>=|=~|!~|&&|\|\||(?<![=!<>])[<>]")


@attrs.frozen
class Entry:
    kind: str  # "empty" | "meta" | "rule" | "expression"
    text: str
    command: str = ""  # for meta: ".set"
    argument: str = ""  # for meta: the rest of the line(s)


def parse_entry(text: str) -> Entry:
    """Decide what an entry is. A line starting with a known meta-command word is a
    meta-command (write `= .env` to evaluate a path that collides with one); a text whose
    first token is a clause keyword is a rule; anything else is an expression."""
    stripped = text.strip()
    if not stripped or all(line.strip().startswith("#") for line in stripped.splitlines()):
        return Entry("empty", text)
    meta = _META.match(text)
    if meta and meta.group(1) in META_COMMANDS:
        return Entry("meta", text, meta.group(1), text[meta.end():].strip())
    if stripped.startswith("="):
        return Entry("expression", stripped[1:].strip())
    if _RULE_START.match(text):
        return Entry("rule", text)
    return Entry("expression", stripped)


def looks_like_condition(text: str) -> bool:
    """An expression with a comparison or logical operator outside strings is a condition."""
    outside = re.sub(r'"(?:\\.|[^"\\])*"|/(?:\\.|[^/\\\n])*/', '""', text)
    return bool(_CONDITION_OP.search(outside))


def _ends_at_input_end(exc: TxclSyntaxError, text: str) -> bool:
    end = len(text.rstrip())
    for diag in exc.diagnostics:
        if diag.code == "TX003":  # unterminated string: the user is still typing it
            return True
        if diag.span.start.offset >= end:
            return True
    return False


def is_complete(text: str) -> bool:
    """Whether Enter should submit `text` (rather than start a new line).

    Meta-commands and expressions are single lines and always complete. A rule is complete
    when it parses, or when its first error is not at the end of the input (so the error is
    shown rather than waiting for more lines). An entry whose last line is empty is always
    complete: an empty line submits whatever is there.
    """
    if text.endswith("\n") or text.endswith("\n\r"):
        return True
    entry = parse_entry(text)
    if entry.kind != "rule":
        return True
    from txcl.syntax.parser import parse_rule

    try:
        parse_rule(text, filename="<repl>")
    except TxclSyntaxError as exc:
        return not _ends_at_input_end(exc, text)
    return True
