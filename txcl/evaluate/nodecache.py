"""Compiled closures cached by AST node identity.

Nodes are immutable, so a node compiles to the same closure forever. The node is kept alive
beside its closure, so an `id` can never be reused while its entry exists; the cache is
cleared wholesale when it grows past its limit.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class NodeCache(Generic[T]):
    def __init__(self, compile_node: Callable[[object], T], limit: int = 200_000):
        self._compile = compile_node
        self._limit = limit
        self._entries: dict[int, tuple[object, T]] = {}

    def get(self, node: object) -> T:
        entry = self._entries.get(id(node))
        if entry is not None and entry[0] is node:
            return entry[1]
        compiled = self._compile(node)
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[id(node)] = (node, compiled)
        return compiled
