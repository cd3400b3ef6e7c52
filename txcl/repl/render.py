"""Text the REPL prints: JSON values, envelope diffs and errors, optionally in ANSI colour."""

from __future__ import annotations

from txcl.values.paths import iter_paths, path_text  # noqa: F401 - shown as the user types them

from typing import Any, Iterator

from txcl.values.jsonio import dumps

RESET = "\x1b[0m"
COLOURS = {
    "green": "\x1b[32m", "red": "\x1b[31m", "yellow": "\x1b[33m", "cyan": "\x1b[36m",
    "bold": "\x1b[1m", "dim": "\x1b[2m", "magenta": "\x1b[35m",
}


def paint(text: str, colour: str, enabled: bool) -> str:
    return f"{COLOURS[colour]}{text}{RESET}" if enabled else text


def json_text(value: Any, indent: int | None = 2) -> str:
    return dumps(value, indent=indent)


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


