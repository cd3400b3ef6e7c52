"""The store's procedures, written once against :class:`txcl.store.backend.Tx`.

A procedure is a method taking the transaction as its first argument after ``self``;
``@write_procedure`` runs it in one write transaction of the store's backend (a part of the
batch's transaction when it is in one), ``@read_procedure`` outside any. Callers never see the
``Tx``: they call ``store.mark_ack(acks)``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Concatenate, ParamSpec, TypeVar

from txcl.store.backend import SqlBackend, Tx

P = ParamSpec("P")
R = TypeVar("R")


class HasBackend:
    backend: SqlBackend


S = TypeVar("S", bound=HasBackend)


def write_procedure(fn: Callable[Concatenate[S, Tx, P], R]) -> Callable[Concatenate[S, P], R]:
    @functools.wraps(fn)
    def call(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.backend.transact(lambda t: fn(self, t, *args, **kwargs))

    return call


def read_procedure(fn: Callable[Concatenate[S, Tx, P], R]) -> Callable[Concatenate[S, P], R]:
    @functools.wraps(fn)
    def call(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.backend.read(lambda t: fn(self, t, *args, **kwargs))

    return call


__all__ = ["write_procedure", "read_procedure", "HasBackend", "Any"]
