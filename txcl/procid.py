"""This process's id, kept current across ``fork`` without a system call per question.

``os.getpid()`` is a system call on Linux (glibc stopped caching it), and the store asks on
every connection lookup, about twenty times per durable cycle, to notice a forked child that
must not reuse its parent's SQLite connections. The id is read once and again in every child
that Python forks (``os.register_at_fork``); a child made without Python (``posix_spawn``,
``subprocess``) runs no Python code of this process, so it never asks.
"""

from __future__ import annotations

import os

_pid = [os.getpid()]


def _forked() -> None:
    _pid[0] = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def current_pid() -> int:
    """The calling process's id (the same as ``os.getpid()``)."""
    return _pid[0]


__all__ = ["current_pid"]
