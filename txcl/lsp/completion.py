"""Completion of rule text: keywords (by clause), functions with signatures, WITH keys,
EXEC schemes and the paths present in an envelope, from the language's vocabulary.

The language server completes with it; the REPL adds its meta-commands, `.run` stacks and
`.load`/`.save` files around it (txcl.repl.completion). `complete_rule()` is a plain function
over the text before the cursor, so it is tested without an editor.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import re2

from txcl.lsp import vocabulary
from txcl.values.paths import iter_paths, path_text

# The word before the cursor. RE2 (linear time): with Python's backtracking engine this
# pattern took exponential time on unclosed quotes (`."a"a"a…`), freezing the language server.
_WORD = re2.compile(r'(?:[.@](?:[A-Za-z0-9_-]|"[^"\n]*"?|\.)*|&[A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*)$')
_CLAUSE = re.compile(r"(?i)\b(WHEN|SET|SELECT|WITH|PRIORITY|EXEC|LOOP|EMIT)\b")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|#[^\n]*')


@attrs.frozen
class Candidate:
    text: str  # replaces the word before the cursor
    start: int  # negative: how many characters before the cursor are replaced
    display: str
    meta: str = ""
    kind: str = ""  # keyword | function | path | with-key | scheme | command | stack | file


def _match_case(word: str, typed: str) -> str:
    return word.lower() if typed and typed == typed.lower() else word.upper()


def _open_string(text: str) -> str | None:
    """The content typed so far if the cursor is inside a string literal, else None."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            nl = text.find("\n", i)
            if nl < 0:
                return None
            i = nl + 1
            continue
        if ch == '"':
            j = i + 1
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == '"':
                    break
                j += 1
            if j >= n:
                return text[i + 1:]
            i = j + 1
            continue
        i += 1
    return None


def _last_clause(text: str) -> str | None:
    cleaned = _STRING_OR_COMMENT.sub(" ", text)
    found = _CLAUSE.findall(cleaned)
    return found[-1].upper() if found else None


def _segment_count(path: str) -> int:
    return len(re.findall(r'\.(?:"[^"]*"?|[^".]*)', "." + path[1:])) if path else 0


def path_candidates(prefix: str, envelope: Any) -> list[Candidate]:
    """Envelope paths one level below what `prefix` (".a.b" / "@x.") already names."""
    depth = _segment_count(prefix)
    seen: dict[str, None] = {}
    for segments in iter_paths(envelope):
        text = path_text(segments)
        if text.startswith(prefix) and _segment_count(text) == depth:
            seen.setdefault(text, None)
    return [Candidate(t, -len(prefix), t, "path", "path") for t in seen]


def function_candidates(prefix: str) -> list[Candidate]:
    name = prefix[1:]
    out = []
    for info in vocabulary.functions():
        if info.name.startswith(name):
            out.append(Candidate(f"&{info.name}(", -len(prefix), f"&{info.signature}", info.doc,
                                 "function"))
    return out


def keyword_candidates(prefix: str, clause: str | None) -> list[Candidate]:
    out = []
    words = vocabulary.keywords()
    if clause != "LOOP":
        words = [w for w in words if w not in ("EVERY", "MAX", "UNTIL")]
    for word in words:
        if word.startswith(prefix.upper()):
            out.append(Candidate(_match_case(word, prefix), -len(prefix), word, "keyword", "keyword"))
    if clause == "WITH":
        for key in vocabulary.WITH_KEYS:
            if key.name.startswith(prefix):
                out.append(Candidate(key.name, -len(prefix), key.name, f"WITH key: {key.value}",
                                     "with-key"))
    return out


def complete_rule(before: str, envelope: Any = None) -> list[Candidate]:
    """Candidates for the word that ends at the cursor in rule text; `before` is the text
    before it, `envelope` the document whose paths are offered."""
    envelope = envelope if envelope is not None else {}
    # a lone surrogate (an editor can send one) cannot be matched by RE2: the same character
    # count, with the replacement character in its place
    before = _LONE_SURROGATE.sub("\ufffd", before)
    inside = _open_string(before)
    if inside is not None:
        if re.search(r'(?i)\bEXEC\s*"$', before[: len(before) - len(inside)]) and "/" not in inside:
            return [Candidate(s, -len(inside), s, doc, "scheme") for s, doc in vocabulary.EXEC_SCHEMES
                    if s.startswith(inside)]
        return []
    match = _WORD.search(before)
    word = match.group() if match else ""
    if word.startswith("&"):
        return function_candidates(word)
    if word.startswith((".", "@")):
        out = path_candidates(word, envelope)
        if word.startswith("@") and "." not in word:  # the reserved facts, even in a fresh document
            known = {c.text for c in out}
            out += [Candidate("@" + name, -len(word), "@" + name, doc, "path")
                    for name, doc in vocabulary.RESERVED_FACTS
                    if name.startswith(word[1:]) and "@" + name not in known]
        return out
    if word:
        head = before[: len(before) - len(word)]
        clause = _last_clause(head)
        if clause == "WITH" and _at_with_key(head):  # `WITH t|` names a key, not a value
            return [c for c in keyword_candidates(word, clause) if c.kind == "with-key"] or \
                keyword_candidates(word, clause)
        return keyword_candidates(word, clause)
    return []


def _at_with_key(head: str) -> bool:
    """Whether the text before the word ends where a WITH key goes: right after `WITH` or
    after a `,` that ends a `key = value` pair."""
    match = re.search(r"(?is)\bWITH\b(.*)$", head)
    if match is None:
        return False
    tail = _STRING_OR_COMMENT.sub('""', match.group(1))
    last = tail.rsplit(",", 1)[-1]
    return "=" not in last


__all__ = ["Candidate", "complete_rule", "path_candidates", "function_candidates", "keyword_candidates"]
