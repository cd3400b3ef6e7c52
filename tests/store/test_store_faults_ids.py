"""ids.py (formats, tokens, constant-time compare), faults.py (the TXCL_FAULT switch), schema versions."""

from __future__ import annotations

import base64

import pytest

from txcl.continuations import ids
from txcl.store.continuations_base import SchemaTooNew, payload_sha256, resume_segment_id
from txcl.store.continuations_sqlite import SqliteContinuations
from txcl.store.schema_continuations import SCHEMA_VERSION, migrate
from txcl.testing import faults


def test_id_formats():
    assert ids.is_run_id(ids.new_run_id()) and len(ids.new_run_id()) == 30
    a, b = ids.new_run_id(1000), ids.new_run_id(2000)
    assert a < b  # ULIDs sort by time
    for _ in range(200):
        rc, opc = ids.new_rcid(), ids.new_opc()
        assert ids.is_rcid(rc) and len(rc) == 3 + 22
        assert ids.is_opc(opc) and len(opc) == 4 + 22
    assert ids.base58_fixed(b"\x00" * 16, 22) == "1" * 22
    assert not ids.is_rcid("rc_0OIl" + "1" * 16)  # not base58


def test_tokens_are_32_bytes_base64url_hashed():
    tok = ids.new_token()
    assert len(tok) == 43 and "=" not in tok
    assert len(base64.urlsafe_b64decode(tok + "=")) == 32
    h = ids.hash_token(tok)
    assert len(h) == 64 and tok not in h
    assert ids.token_matches(tok, h)
    assert ids.token_matches(tok, "ab" * 32 + "," + h)
    assert not ids.token_matches(tok + "x", h)
    assert not ids.token_matches(None, h) and not ids.token_matches(tok, None)


def test_payload_hash_is_canonical():
    assert payload_sha256({"b": 1, "a": [1, 2]}) == payload_sha256({"a": [1, 2], "b": 1})
    assert payload_sha256({"a": 1}) != payload_sha256({"a": 1.5})


def test_resume_segment_id_follows_runtime_8_2():
    assert resume_segment_id("run_X", "shop/100", 2) == "resume-run_X-shop_100-v2"
    assert resume_segment_id("run_X", "a.b/7", 1, attempt=3) == "resume-run_X-a_b_7-v1-a3"


def test_fault_switch_parsing_and_inertness(monkeypatch):
    assert faults.parse_faults("park:2,admit:raise") == (faults.Fault("park", 2, "kill"),
                                                         faults.Fault("admit", 1, "raise"))
    with pytest.raises(ValueError):
        faults.parse_faults("nowhere")
    monkeypatch.delenv("TXCL_TESTING", raising=False)
    monkeypatch.setenv("TXCL_FAULT", "admit:raise")
    faults.reset()
    faults.fault_point("admit")  # inert without TXCL_TESTING=1
    assert not faults.enabled()


def test_fault_switch_raises_on_nth_commit(monkeypatch):
    monkeypatch.setenv("TXCL_TESTING", "1")
    monkeypatch.setenv("TXCL_FAULT", "finish:2:raise")
    faults.reset()
    faults.fault_point("finish")
    faults.fault_point("park")
    with pytest.raises(faults.FaultInjected):
        faults.fault_point("finish")
    faults.fault_point("finish")  # only the 2nd
    faults.reset()


def test_fault_raised_after_commit_keeps_the_commit(tmp_path, monkeypatch):
    from contstore_util import park_barrier

    store = SqliteContinuations(tmp_path / "t.db")
    monkeypatch.setenv("TXCL_TESTING", "1")
    monkeypatch.setenv("TXCL_FAULT", "park:raise")
    faults.reset()
    with pytest.raises(faults.FaultInjected):
        park_barrier(store)
    monkeypatch.delenv("TXCL_FAULT")
    assert store.list_runs()[0].status == "waiting"  # committed before the fault fired
    faults.reset()
    store.close()


def test_schema_migration_idempotent_and_newer_refused(tmp_path):
    store = SqliteContinuations(tmp_path / "t.db")
    db = store._cs_db()
    assert migrate(db) == SCHEMA_VERSION
    db.conn.execute("UPDATE txcl_schema SET version = 99 WHERE component = 'continuations'")
    with pytest.raises(SchemaTooNew):
        migrate(db)
    store.close()
    with pytest.raises(SchemaTooNew):
        SqliteContinuations(tmp_path / "t.db")


def test_mixes_into_the_trace_and_kv_store(tmp_path):
    """The mixin shares SqliteStore's per-thread connection and schema table."""
    sqlite_mod = pytest.importorskip("txcl.store.sqlite")
    from contstore_util import complete, park_barrier

    from txcl.store.continuations_sqlite import SqliteContinuationStore

    class Store(SqliteContinuationStore, sqlite_mod.SqliteStore):
        pass

    store = Store(tmp_path / "both.db")
    park = park_barrier(store)
    assert complete(store, park.dispatches[0])[1].won
    assert store._cs_db() is store.db()
    tables = set(store.db().table_names())
    assert {"runs", "interactions", "kv", "traces"} <= tables
    components = dict(store.db().conn.execute("SELECT component, version FROM txcl_schema").fetchall())
    assert components["continuations"] == SCHEMA_VERSION and "kv" in components
    store.close()


def test_upgrade_from_v1_adds_the_fact_counter_trigger(tmp_path):
    from txcl.store.connection import open_sqlite, transaction
    from txcl.store.schema_continuations import MIGRATIONS, _split

    db = open_sqlite(tmp_path / "old.db")
    with transaction(db) as conn:
        conn.execute("CREATE TABLE txcl_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        for stmt in _split(MIGRATIONS[1]):
            conn.execute(stmt)
        conn.execute("INSERT INTO txcl_schema VALUES ('continuations', 1)")
    db.conn.close()
    store = SqliteContinuations(tmp_path / "old.db")
    triggers = [r[0] for r in store._cs_db().conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
    assert triggers == ["continuation_facts_count"]
    version = store._cs_db().conn.execute(
        "SELECT version FROM txcl_schema WHERE component = 'continuations'").fetchone()[0]
    assert version == SCHEMA_VERSION == 2
    store.close()
