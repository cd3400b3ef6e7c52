"""`parsing_many()`: the setting for parsing a whole tree of rules at once.

Every rule parsed becomes a few hundred small objects that stay alive (the AST, its spans).
While thousands are made in a row, Python's cyclic garbage collector keeps running and
scanning the growing heap of them, which measured at about half the time of loading 1,000
rules. None of these objects form cycles (they are freed by reference counting), so the
collector is paused while a tree is parsed, and runs again afterwards. The parse cache on
disk writes its new entries at the end too.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
from typing import Iterator

from txcl.syntax import diskcache


@contextlib.contextmanager
def parsing_many() -> Iterator[None]:
    """Pause the cyclic garbage collector while many rules are parsed (see the module docstring)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # what was made meanwhile goes straight to the oldest generation (freeze, then
            # unfreeze, moves it there without a scan): the young collection that would
            # otherwise follow at once would scan every new node once more, to no avail
            gc.freeze()
            gc.unfreeze()
            gc.enable()
        diskcache.flush()


_KEEP_PARSES: contextvars.ContextVar[bool] = contextvars.ContextVar("txcl.keep_parses", default=True)


@contextlib.contextmanager
def parsing_once() -> Iterator[None]:
    """Parses made inside are not kept in the parse caches (memory or disk): an editor's buffer,
    different at every keystroke, would otherwise fill them with versions never seen again (and
    make every collection of the garbage collector walk them)."""
    token = _KEEP_PARSES.set(False)
    try:
        yield
    finally:
        _KEEP_PARSES.reset(token)


def keeping_parses() -> bool:
    return _KEEP_PARSES.get()


__all__ = ["parsing_many", "parsing_once", "keeping_parses"]
