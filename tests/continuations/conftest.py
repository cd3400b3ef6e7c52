"""Registers the continuation fixtures; the helpers live in cont_support.py."""

from cont_support import (  # noqa: F401 - fixtures are found by name
    workspace,
    worker,
    reports,
    serve,
    store_at,
    shared_barrier,
    shared,
)
