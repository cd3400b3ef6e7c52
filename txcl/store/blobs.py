"""Big strings of a run stored once.

A run's envelope is written to several columns over its life (the suspend's envelope and
budgets, each unit's input view, the result), and a request body of 20 MiB sits in each of
them. Before a document is written, every string of at least BLOB_MIN characters in it is
moved to the run's `blobs` rows (keyed by its SHA-256, so one body is stored once however many
documents hold it) and replaced by a reference; reading the document puts the strings back.

The reference is a string starting with NUL: `"\\x00b:<sha256>"`. A user's string that itself
starts with NUL is stored with one more NUL in front, so no user value can be mistaken for a
reference. JSON text escapes NUL as `\\u0000`, so a document without that sequence has neither
and is decoded as plain JSON, at no extra cost.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Callable

from txcl.store.jsoncols import dumps as _dumps
from txcl.store.jsoncols import loads as _loads

BLOB_MIN = 64 * 1024  # characters: strings this long are stored once per run
_NUL = "\x00"
_REF = "\x00b:"
_ESCAPED_NUL = "\\u0000"


def pack(value: Any, blobs: dict[str, str]) -> str | None:
    """JSON text of `value` with its big strings replaced by references; the strings go into
    `blobs` (digest -> text), shared by every document of one write."""
    if value is None:
        return None
    text = _dumps(value)
    if len(text) < BLOB_MIN and _ESCAPED_NUL not in text:
        return text

    def walk(v: Any) -> Any:
        t = type(v)
        if t is str:
            if len(v) >= BLOB_MIN:
                digest = hashlib.sha256(v.encode("utf-8", "surrogatepass")).hexdigest()
                blobs.setdefault(digest, v)
                return _REF + digest
            return _NUL + v if v.startswith(_NUL) else v
        if t is dict:
            return {k: walk(x) for k, x in v.items()}
        if t is list:
            return [walk(x) for x in v]
        return v

    return _dumps(walk(value))


def unpack(text: str | None, fetch: Callable[[list[str]], dict[str, str]]) -> Any:
    """The document of `text`, with the strings it references read through `fetch` (digests ->
    texts) and escaped NULs restored."""
    if text is None:
        return None
    value = _loads(text)
    if _ESCAPED_NUL not in text:
        return value
    wanted: list[str] = []

    def find(v: Any) -> None:
        t = type(v)
        if t is str:
            if v.startswith(_REF):
                wanted.append(v[len(_REF):])
        elif t is dict:
            for x in v.values():
                find(x)
        elif t is list:
            for x in v:
                find(x)

    find(value)
    found = fetch(sorted(set(wanted))) if wanted else {}

    def walk(v: Any) -> Any:
        t = type(v)
        if t is str:
            if v.startswith(_REF):
                digest = v[len(_REF):]
                if digest not in found:
                    raise KeyError(f"stored string {digest[:12]}… is missing")
                return found[digest]
            return v[1:] if v.startswith(_NUL) else v
        if t is dict:
            return {k: walk(x) for k, x in v.items()}
        if t is list:
            return [walk(x) for x in v]
        return v

    return walk(value)


# A reference as it appears in JSON text (NUL is written `\u0000`). Found in the text itself,
# so the strings a document needs can be read without decoding the document. A user string
# with the same characters inside it only adds a digest that is looked up and not found.
_REF_IN_TEXT = re.compile(r"\\u0000b:([0-9a-f]{64})")


def referenced_digests(text: str) -> list[str]:
    """Every digest `text` may reference (a superset of what `unpack` fetches), sorted."""
    return sorted(set(_REF_IN_TEXT.findall(text)))


def needs_fetch(text: str | None) -> bool:
    """Whether `text` may hold references (or escaped NULs) and so must go through `unpack`."""
    return text is not None and _ESCAPED_NUL in text


__all__ = ["BLOB_MIN", "pack", "unpack", "needs_fetch", "referenced_digests"]
