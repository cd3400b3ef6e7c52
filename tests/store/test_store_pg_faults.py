"""PostgreSQL faults: a connection killed by the server in the middle of a procedure
(`pg_terminate_backend`) is retried from the start or fails cleanly — never half-applied; a
server that goes away answers StoreUnavailable and the store works again once it is back."""

from __future__ import annotations

import threading

import pytest
from contstore_util import FakeClock, complete, itemized, open_store, park_barrier

from txcl.store.backends.postgres import PostgresBackend
from txcl.store.errors import StoreUnavailable
from txcl.testing.postgres import TempPostgres


def _kill_own_backend(t) -> None:
    """Terminate the connection of transaction `t` from another connection (what an operator
    or a failover does), then let `t` go on."""
    import psycopg

    pid = t.one("SELECT pg_backend_pid() AS pid")["pid"]
    with psycopg.connect(t.backend.url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.fixture
def pg_store(new_pg_database):
    store = open_store(new_pg_database(), FakeClock())
    yield store
    store.close()


def test_killed_between_two_writes_of_a_procedure_is_retried_and_applied_once(pg_store, monkeypatch):
    store = pg_store
    park = park_barrier(store, units=[itemized(n=2, window=2)])
    d = park.dispatches[0]
    from txcl.store.procedures.continuations import ContinuationProcedures

    original = ContinuationProcedures._fact
    killed = []

    def fact_then_die(t, unit_id, kind, item_index):
        original(t, unit_id, kind, item_index)
        if not killed:  # the terminal row is written in this transaction: kill it now
            killed.append(True)
            _kill_own_backend(t)

    monkeypatch.setattr(ContinuationProcedures, "_fact", staticmethod(fact_then_die))
    retries = store.backend.retry_count()
    admit = store.admit_terminal(d.opc, "completed", {"i": 0}, source="callback", token=d.token)
    assert killed and store.backend.retry_count() > retries
    assert admit.outcome == "admitted"  # the first attempt left nothing behind
    assert store.get_terminal(d.opc).payload == {"i": 0}
    assert store.list_facts(park.unit_ids[0]) == [("provider", 0)]
    assert store.get_unit(park.unit_ids[0]).provider_done == 1


def test_killed_at_commit_fails_cleanly_and_repeating_it_is_safe(pg_store, monkeypatch):
    store = pg_store
    park = park_barrier(store, units=[itemized(n=2, window=2)])
    d = park.dispatches[0]
    backend = store.backend
    original = PostgresBackend._commit
    killed = []

    def die_at_commit(self, conn):
        if not killed:
            killed.append(True)
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        return original(self, conn)

    monkeypatch.setattr(PostgresBackend, "_commit", die_at_commit)
    with pytest.raises(StoreUnavailable, match="while committing"):
        store.admit_terminal(d.opc, "completed", {"i": 0}, source="callback", token=d.token)
    # the change was not applied (the server never saw COMMIT); repeating is safe either way
    again = store.admit_terminal(d.opc, "completed", {"i": 0}, source="callback", token=d.token)
    assert again.outcome in ("admitted", "duplicate")
    assert store.list_facts(park.unit_ids[0]) == [("provider", 0)]
    assert backend.commit_count() > 0


def test_a_whole_flow_survives_every_connection_being_killed_once(pg_store, monkeypatch):
    """Every procedure's first attempt loses its connection at the run lock; each is retried
    and the run completes with its output merged once."""
    store = pg_store
    from txcl.store.backend import Tx

    calls = [0]
    lock = threading.Lock()

    def dying(original):
        def locked_then_die(self, *args, **kwargs):
            row = original(self, *args, **kwargs)
            with lock:
                calls[0] += 1
                kill = calls[0] % 2 == 1  # every first attempt dies, its retry goes through
            if kill:
                _kill_own_backend(self)
            return row

        return locked_then_die

    monkeypatch.setattr(Tx, "lock_run", dying(Tx.lock_run))
    monkeypatch.setattr(Tx, "lock_run_of", dying(Tx.lock_run_of))
    monkeypatch.setattr(Tx, "lock_run_of_reading", dying(Tx.lock_run_of_reading))
    park = park_barrier(store, units=[itemized(n=3, window=3)])
    releases = [complete(store, d)[1] for d in park.dispatches]
    assert [r.won for r in releases].count(True) == 1
    unit = store.get_unit(park.unit_ids[0])
    assert unit.status == "completed" and unit.output == [{"ok": 0}, {"ok": 1}, {"ok": 2}]
    assert store.backend.retry_count() >= 4


def test_server_stopped_then_back(tmp_path):
    """While the server is down every call raises StoreUnavailable (nothing half-done); once it
    is back the same store object works again without being reopened."""
    server = TempPostgres.start()
    try:
        url = server.create_database("outage")
        store = open_store(url, FakeClock())
        park = park_barrier(store, units=[itemized(n=1, window=1)])
        d = park.dispatches[0]
        server.pause()
        with pytest.raises(StoreUnavailable):
            store.admit_terminal(d.opc, "completed", {"i": 0}, source="callback", token=d.token)
        with pytest.raises(StoreUnavailable):
            store.get_run(park.run.run_id)
        server.resume()
        admit, release = complete(store, d, {"i": 0})
        assert admit.outcome == "admitted" and release.won
        assert store.get_unit(park.unit_ids[0]).output == [{"i": 0}]
        store.close()
    finally:
        server.stop()
