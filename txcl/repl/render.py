"""Text the REPL prints: JSON values, envelope diffs and errors, optionally in ANSI colour."""

from __future__ import annotations

import re
from typing import Any, Iterator

from txcl.values.jsonio import dumps

RESET = "\x1b[0m"
COLOURS = {
    "green": "\x1b[32m", "red": "\x1b[31m", "yellow": "\x1b[33m", "cyan": "\x1b[36m",
    "bold": "\x1b[1m", "dim": "\x1b[2m", "magenta": "\x1b[35m",
}
_SIMPLE_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*|[A-Za-z0-9_-]+")


def paint(text: str, colour: str, enabled: bool) -> str:
    return f"{COLOURS[colour]}{text}{RESET}" if enabled else text


def json_text(value: Any, indent: int | None = 2) -> str:
    return dumps(value, indent=indent)


def path_text(segments: tuple[str, ...]) -> str:
    """A path as the user would type it: `@x` for `_txc.x`, quoted odd segments."""
    if not segments:
        return "."
    parts = list(segments)
    prefix = "."
    if parts[0] == "_txc" and len(parts) > 1 and _SIMPLE_SEGMENT.fullmatch(parts[1]) \
            and not parts[1][0].isdigit() and parts[1][0] != "-":
        prefix, parts = "@", parts[1:]
    out = []
    for i, seg in enumerate(parts):
        first_ok = i > 0 or (seg[:1].isalpha() or seg[:1] == "_")
        if _SIMPLE_SEGMENT.fullmatch(seg) and first_ok:
            out.append(seg)
        elif "\"" not in seg and "\n" not in seg and seg and i > 0:
            out.append(f'"{seg}"')
        else:
            out.append(seg)  # cannot be written as a TXCL path; shown as is
    return prefix + ".".join(out)


def diff_values(old: Any, new: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, tuple[str, ...], Any, Any]]:
    """Changes between two JSON values as ("+" | "-" | "~", path, old, new), objects by key."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                for leaf, value in _leaves(old[key], path + (key,)):
                    yield ("-", leaf, value, None)
        for key in new:
            if key not in old:
                for leaf, value in _leaves(new[key], path + (key,)):
                    yield ("+", leaf, None, value)
            else:
                yield from diff_values(old[key], new[key], path + (key,))
        return
    if type(old) is not type(new) or old != new:
        yield ("~", path, old, new)


def _leaves(value: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """A non-empty object as its leaf paths (so an added subtree reads as assignments)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, path + (key,))
    else:
        yield path, value


def render_diff(old: Any, new: Any, colour: bool) -> str:
    lines = []
    for kind, path, before, after in diff_values(old, new):
        where = path_text(path)
        if kind == "+":
            lines.append(paint(f"+ {where} = {json_text(after, None)}", "green", colour))
        elif kind == "-":
            lines.append(paint(f"- {where} = {json_text(before, None)}", "red", colour))
        else:
            lines.append(paint(f"~ {where}: {json_text(before, None)} → {json_text(after, None)}",
                               "yellow", colour))
    return "\n".join(lines) if lines else paint("(no change)", "dim", colour)


def heading(text: str, colour: bool) -> str:
    return paint(text, "bold", colour)


def iter_paths(value: Any, prefix: tuple[str, ...] = (), limit: int = 2000) -> Iterator[tuple[str, ...]]:
    """Every path present in a JSON value (objects by key, arrays by index), breadth-first."""
    queue: list[tuple[tuple[str, ...], Any]] = [(prefix, value)]
    count = 0
    while queue and count < limit:
        path, node = queue.pop(0)
        if isinstance(node, dict):
            children = [(path + (str(k),), v) for k, v in node.items()]
        elif isinstance(node, list):
            children = [(path + (str(i),), v) for i, v in enumerate(node)]
        else:
            continue
        for child in children:
            count += 1
            yield child[0]
            queue.append(child)
