"""An operator's operations on one run, named by its run id or its rcid: cancel it, or retry
it. The admin endpoint (`POST /_txc/admin/runs/<id>/cancel|retry`), the dashboard's buttons
and `txcl runs` ask these, so each answers the same."""

from __future__ import annotations

from typing import Any


def retry_by_id(store: Any, ident: str) -> tuple[str, Any] | None:
    """(run id, RetryResult) for a run id or rcid; None when there is no such run."""
    run_id = resolve_run_id(store, ident)
    return (run_id, store.retry_run(run_id)) if run_id is not None else None


def resolve_run_id(store: Any, ident: str) -> str | None:
    """The run id of a run id or rcid (None: no such run)."""
    record = store.get_run_by_rcid(ident) if ident.startswith("rc_") else store.get_run(ident)
    return record.run_id if record is not None else None


def cancel_by_id(store: Any, ident: str, reason: str | None) -> Any:
    """("cancelled" or the finished state, run id) for a run id or rcid; "unknown" when none."""
    run_id = resolve_run_id(store, ident)
    return (store.cancel_run(run_id, reason=reason), run_id) if run_id is not None else "unknown"


__all__ = ["resolve_run_id", "retry_by_id", "cancel_by_id"]
