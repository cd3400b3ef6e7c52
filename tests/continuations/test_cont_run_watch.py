"""Waiting for a run to change: a change committed between reading the run and starting to
wait is not missed, and a PostgreSQL node wakes its waiters once its LISTEN takes hold."""

from __future__ import annotations

import asyncio
import threading

import pytest


def _service(db_url: str, tmp_path):
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.runtime.config import Settings

    store = open_run_store(db_url, node_id="watch")
    return store, ContinuationService(store, Settings(trace_mode="off"), workspace=tmp_path)


def test_a_change_between_the_read_and_the_wait_wakes_the_watcher(db_url, tmp_path):
    store, service = _service(db_url, tmp_path)

    async def scenario() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        with service.watch_run("run-1") as changed:
            service.notify_run("run-1")  # the commit lands after the read, before the wait
            started = loop.time()
            await service.until_changed(changed, 5.0)
            return changed.done(), loop.time() - started

    try:
        done, waited = asyncio.run(scenario())
    finally:
        asyncio.run(service.aclose())
        store.close()
    assert done and waited < 1.0
    assert service._run_waiters == {}  # the block leaves nothing registered


@pytest.mark.parametrize("backend", ["sqlite"])  # PostgreSQL's first LISTEN wakes everyone once, by design
def test_another_runs_change_does_not_wake_the_watcher(db_url, tmp_path):
    store, service = _service(db_url, tmp_path)

    async def scenario() -> bool:
        with service.watch_run("run-1") as changed:
            service.notify_run("run-2")
            await service.until_changed(changed, 0.2)
            return changed.done()

    try:
        assert asyncio.run(scenario()) is False
    finally:
        asyncio.run(service.aclose())
        store.close()


@pytest.mark.parametrize("backend", ["postgresql"])
def test_postgresql_announces_once_its_listen_holds(db_url):
    """A waiter subscribing first and a commit made while the LISTEN connection was still
    being opened: the announcement that LISTEN now holds makes every waiter re-read."""
    from txcl.store import open_store

    store = open_store(db_url)
    heard = threading.Event()
    try:
        store.subscribe(lambda run_id: heard.set() if run_id is None else None)
        assert heard.wait(10), "no announcement after LISTEN took hold"
    finally:
        store.close()
