"""Paths at run time: read, has, write, delete and path strings.

A path is a sequence of string segments. A segment is *numeric* when it is one or more
ASCII digits (leading zeros allowed); only numeric segments index arrays.
"""

from __future__ import annotations

import re
from typing import Any, Collection, Iterator, Sequence

from txcl.errors import TxclError

__all__ = [
    "MISSING", "PathError", "MAX_PADDING", "read", "has", "write", "delete",
    "split_path_string", "split_set_path", "delete_target", "is_numeric",
]

MAX_PADDING = 65_535


class _Missing:
    """The one `MISSING` value: falsy, distinct from JSON null."""

    __slots__ = ()
    _instance: "_Missing | None" = None

    def __new__(cls) -> "_Missing":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"

    def __copy__(self) -> "_Missing":
        return self

    def __deepcopy__(self, memo: dict) -> "_Missing":
        return self


MISSING: Any = _Missing()


class PathError(TxclError):
    """A write that cannot be made (a key on an array, too much padding). A TxclError: what
    reaches a caller of txcl's API is always one of txcl's own errors."""


def is_numeric(segment: str) -> bool:
    return segment.isdigit() and segment.isascii()


def _index(segment: str) -> int | None:
    """The array index of a segment, or None when it is not numeric."""
    if not (segment.isdigit() and segment.isascii()):
        return None
    if len(segment) > 18:
        stripped = segment.lstrip("0")
        if len(stripped) > 18:
            return 1 << 62  # beyond any list; int() would be slow or refuse
        return int(stripped or "0")
    return int(segment)


# ---------------------------------------------------------------- read


def read(doc: Any, segments: Sequence[str]) -> Any:
    """The value at the path, or MISSING. A present null is returned as None."""
    cur = doc
    for seg in segments:
        t = type(cur)
        if t is dict:
            cur = cur.get(seg, MISSING)
            if cur is MISSING:
                return MISSING
        elif t is list:
            if seg.isdigit() and seg.isascii():
                i = int(seg) if len(seg) < 19 else _index(seg)
                if i < len(cur):  # type: ignore[operator]
                    cur = cur[i]  # type: ignore[index]
                else:
                    return MISSING
            else:
                return MISSING
        elif isinstance(cur, dict):
            if seg in cur:
                cur = cur[seg]
            else:
                return MISSING
        elif isinstance(cur, list):
            i = _index(seg)
            if i is None or i >= len(cur):
                return MISSING
            cur = cur[i]
        else:
            return MISSING
    return cur


def has(doc: Any, segments: Sequence[str]) -> bool:
    return read(doc, segments) is not MISSING


# ---------------------------------------------------------------- write


def _is_container(v: Any) -> bool:
    return isinstance(v, (dict, list))


def _new_container(segment: str, forced: bool) -> Any:
    return [] if not forced and is_numeric(segment) else {}


def write(doc: Any, segments: Sequence[str], value: Any, *,
          force_key: Collection[int] = ()) -> Any:
    """Write `value` at the path and return the (possibly new) root.

    Containers are changed in place. `force_key` holds indexes of segments that are always
    object keys (`&set`'s `:` prefix): they never index an array, and a container created
    for them is an object. The whole write is checked before anything is changed, so a
    failing write leaves `doc` untouched. Raises PathError.
    """
    n = len(segments)
    if n == 0:
        return value
    if not force_key and type(doc) is dict and _write_objects_only(doc, segments, value):
        return doc
    _check_write(doc, segments, force_key)
    root = doc if _is_container(doc) else _new_container(segments[0], 0 in force_key)
    cur = root
    last = n - 1
    for pos, seg in enumerate(segments):
        if isinstance(cur, dict):
            if pos == last:
                cur[seg] = value
                break
            nxt = cur.get(seg)
            if not _is_container(nxt):
                nxt = _new_container(segments[pos + 1], pos + 1 in force_key)
                cur[seg] = nxt
            cur = nxt
        else:  # list; _check_write guaranteed a numeric, allowed index
            i = _index(seg)
            assert i is not None
            if i >= len(cur):
                cur.extend([None] * (i - len(cur) + 1))
            if pos == last:
                cur[i] = value
                break
            nxt = cur[i]
            if not _is_container(nxt):
                nxt = _new_container(segments[pos + 1], pos + 1 in force_key)
                cur[i] = nxt
            cur = nxt
    return root


def write_keys(doc: dict, segments: Sequence[str], value: Any) -> Any:
    """`write` for a path none of whose segments is numeric: the common case of a rule's
    assignment, decided once when the rule is planned, so the objects-only fast path need
    not look for a segment that would make a created container an array."""
    if type(doc) is dict and _write_objects_only(doc, segments, value, keys_only=True):
        return doc
    return write(doc, segments, value)


def _write_objects_only(doc: dict, segments: Sequence[str], value: Any, keys_only: bool = False) -> bool:
    """Fast path for the common case: the write touches objects only.

    Returns False, having changed nothing, when an array is on the way or a created
    container would be an array; the general path then handles the write. `keys_only`:
    the caller knows no segment is numeric (no created container can be an array).
    """
    cur = doc
    last = len(segments) - 1
    pos = 0
    while pos < last:
        nxt = cur.get(segments[pos])
        if type(nxt) is not dict:
            break
        cur = nxt
        pos += 1
    else:
        cur[segments[last]] = value
        return True
    if isinstance(nxt, list) or (not keys_only and any(is_numeric(seg) for seg in segments[pos + 1:])):
        return False
    for seg in segments[pos:last]:
        created: dict = {}
        cur[seg] = created
        cur = created
    cur[segments[last]] = value
    return True


def _check_write(doc: Any, segments: Sequence[str], force_key: Collection[int]) -> None:
    """Simulate a write: raise PathError for a key on an array or padding over the limit."""
    padding = 0
    cur = doc if _is_container(doc) else _new_container(segments[0], 0 in force_key)
    existing = _is_container(doc)
    for pos, seg in enumerate(segments):
        if isinstance(cur, list) or (not existing and cur == "list"):
            i = None if pos in force_key else _index(seg)
            if i is None:
                raise PathError(f'cannot use key "{seg}" on an array')
            length = len(cur) if existing else 0
            if i > length:
                padding += i - length
                if padding > MAX_PADDING:
                    raise PathError(
                        f"write to index {seg} would add more than {MAX_PADDING} padding elements")
            nxt = cur[i] if existing and i < length else None
        else:
            nxt = cur.get(seg) if existing else None
        if pos + 1 == len(segments):
            return
        if existing and _is_container(nxt):
            cur = nxt
        else:
            existing = False
            # a created container: only its kind matters from here on
            cur = "list" if (pos + 1 not in force_key and is_numeric(segments[pos + 1])) else "dict"


# ---------------------------------------------------------------- delete


def delete(doc: Any, segments: Sequence[str]) -> None:
    """Remove the member or element at the path, in place; missing paths are ignored."""
    if not segments:
        return
    parent = read(doc, segments[:-1])
    seg = segments[-1]
    if isinstance(parent, dict):
        parent.pop(seg, None)
    elif isinstance(parent, list):
        i = _index(seg)
        if i is not None and i < len(parent):
            del parent[i]


# ---------------------------------------------------------------- path strings


def _split_flags(text: str) -> list[tuple[str, bool]]:
    """Split at unescaped dots; each segment with whether it starts with an unescaped `:`."""
    if "\\" not in text:
        return [(s, s.startswith(":")) for s in text.split(".")]
    out: list[tuple[str, bool]] = []
    buf: list[str] = []
    colon = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            buf.append(text[i + 1])
            i += 2
            continue
        if ch == ".":
            out.append(("".join(buf), colon))
            buf, colon = [], False
        else:
            if ch == ":" and not buf:
                colon = True
            buf.append(ch)
        i += 1
    out.append(("".join(buf), colon))
    return out


def split_path_string(text: str) -> tuple[str, ...]:
    """Split a path string at every `.` not preceded by a backslash.

    A backslash makes the next character literal; a trailing lone backslash stays.
    `""` is one empty segment.
    """
    if "\\" not in text:
        return tuple(text.split("."))
    return tuple(s for s, _ in _split_flags(text))


def split_set_path(text: str) -> tuple[tuple[str, ...], frozenset[int]]:
    """`&set` paths: segments, and the indexes of `:`-prefixed ones (prefix removed)."""
    segments: list[str] = []
    forced: set[int] = set()
    for pos, (seg, colon) in enumerate(_split_flags(text)):
        if colon:
            forced.add(pos)
            seg = seg[1:]
        segments.append(seg)
    return tuple(segments), frozenset(forced)


def delete_target(text: str) -> tuple[str, ...]:
    """An `@delete` target: trimmed, leading `@` means `_txc.`, a leading `.` dropped.

    An empty (or all-blank) target gives `()`, which deletes nothing.
    """
    text = text.strip()
    if text.startswith("@"):
        text = "_txc." + text[1:]
    elif text.startswith("."):
        text = text[1:]
    if not text:
        return ()
    return split_path_string(text)


# ---------------------------------------------------------------------------------------------
# paths as an author types them (completion, the REPL's displays)

_SIMPLE_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*|[A-Za-z0-9_-]+")


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
