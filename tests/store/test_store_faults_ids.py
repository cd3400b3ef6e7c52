"""ids.py (formats, tokens, constant-time compare), faults.py (the TXCL_FAULT switch), schema versions."""

from __future__ import annotations

import base64

import pytest

from txcl import ids
from txcl.store.errors import SchemaTooNew
from txcl.store.records import payload_sha256, resume_segment_id
from txcl.store import schema
from txcl.testing import faults
from testtools import RawDb, reopened_after_downgrade


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


def test_random_base58_draws_every_character_equally_and_redraws_when_short(monkeypatch):
    """Random ids (rc_, opc_, au_, clm_) are 22 characters of the base58 alphabet, each equally
    likely; a draw with too few usable bytes (each byte from 232 up is dropped) is drawn again."""
    import collections
    import secrets

    alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    counts = collections.Counter()
    for _ in range(20_000):
        text = ids.random_base58()
        assert len(text) == 22
        counts.update(text)
    assert set(counts) == set(alphabet)
    expected = 20_000 * 22 / 58
    assert all(abs(n - expected) < 0.06 * expected for n in counts.values()), counts
    draws = iter([bytes([255] * 30 + [0] * 7), bytes(range(57, 57 + 37))])
    with monkeypatch.context() as patched:
        patched.setattr(secrets, "token_bytes", lambda n: next(draws))
        assert ids.random_base58() == alphabet[57] + alphabet[:21]  # the second draw: 57, 0, 1, … mod 58


def test_ulid_encodes_the_millisecond_then_80_random_bits(monkeypatch):
    """The first ten characters are the timestamp in Crockford base32 (so ids sort by time),
    the last sixteen are random, every digit equally likely."""
    import collections
    import secrets

    def reference(ms: int, rand: int) -> str:  # the ULID spec, one 5-bit digit at a time
        value = (ms << 80) | rand
        return "".join("0123456789ABCDEFGHJKMNPQRSTVWXYZ"[(value >> (5 * i)) & 31] for i in range(25, -1, -1))

    for ms in (0, 1, 1796254343944, (1 << 48) - 1):
        made = ids.ulid(ms)
        assert made[:10] == reference(ms, 0)[:10] and len(made) == 26
    rand = secrets.token_bytes(10)
    with monkeypatch.context() as patched:
        patched.setattr(secrets, "token_bytes", lambda n: rand)
        assert ids.ulid(1796254343944) == reference(1796254343944, int.from_bytes(rand, "big"))
    later = [ids.ulid(ms) for ms in range(1796254343000, 1796254343100)]
    assert later == sorted(later)
    digits = collections.Counter(ch for _ in range(4000) for ch in ids.ulid()[10:])
    assert len(digits) == 32 and max(digits.values()) < 1.3 * min(digits.values())


def test_pooled_request_id_tails_are_the_random_bytes_in_crockford_base32(monkeypatch):
    """The pool encodes a block of random bytes at once: each id's last sixteen digits are
    the next ten bytes as a ULID's 80 random bits, every digit equally likely."""
    import collections

    block = bytes((7 * i + 3) % 256 for i in range(4000))
    monkeypatch.setattr(ids.os, "urandom", lambda n: block[:n])
    monkeypatch.setattr(ids, "_pool", ids._RandomPool())
    crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    for k in range(3):
        tail = ids.new_request_id()[10:]
        value = int.from_bytes(block[10 * k:10 * k + 10], "big")
        assert tail == "".join(crockford[(value >> (5 * i)) & 31] for i in range(15, -1, -1))
    monkeypatch.undo()
    digits = collections.Counter(ch for _ in range(4000) for ch in ids.new_request_id()[10:])
    assert len(digits) == 32 and max(digits.values()) < 1.3 * min(digits.values())


def test_pooled_request_ids_differ_across_a_fork():
    """Request ids draw from a pool of random bytes; a forked child empties its copy, so it
    never mints the ids its parent mints next from the same pool."""
    import os

    ids.new_request_id()  # the parent's pool holds bytes now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, "".join(ids.new_request_id()[10:] for _ in range(5)).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 1000).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent = "".join(ids.new_request_id()[10:] for _ in range(5))
    assert len(child) == len(parent) == 80
    assert child != parent


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


def test_fault_raised_after_commit_keeps_the_commit(store, monkeypatch):
    from contstore_util import park_barrier

    monkeypatch.setenv("TXCL_TESTING", "1")
    monkeypatch.setenv("TXCL_FAULT", "park:raise")
    faults.reset()
    with pytest.raises(faults.FaultInjected):
        park_barrier(store)
    monkeypatch.delenv("TXCL_FAULT")
    assert store.list_runs()[0].status == "waiting"  # committed before the fault fired
    faults.reset()


def test_schema_migration_idempotent_and_newer_refused(db_url):
    from contstore_util import open_store

    store = open_store(db_url)
    found = schema.migrate(store.backend)  # a second migration finds everything current
    assert [st.state for st in found] == ["current"] * len(schema.COMPONENTS)
    RawDb(store).execute("UPDATE txcl_schema SET version = 99 WHERE component = 'continuations'")
    with pytest.raises(SchemaTooNew):
        schema.migrate(store.backend)
    store.close()
    with pytest.raises(SchemaTooNew):
        open_store(db_url)


def test_one_database_holds_traces_kv_and_continuations(store):
    from contstore_util import complete, park_barrier

    park = park_barrier(store)
    assert complete(store, park.dispatches[0])[1].won
    assert store.kv_set("ns", "k", {"v": 1}, now_ms=1) == 1
    components = {st.name: st.have for st in schema.status(store.backend)}
    assert components == {c.name: c.version for c in schema.COMPONENTS}
    assert components["continuations"] == 9 and components["traces"] == 8


@pytest.mark.no_state_guard
def test_upgrade_from_v2_drops_the_fact_counter_trigger_and_counts_once(tmp_path):
    """v2 counted facts in a SQLite trigger; v3 counts in the procedures. An upgraded database
    must not count twice."""
    from contstore_util import complete, itemized, open_store, park_barrier

    path = tmp_path / "old.db"
    store = open_store(path)
    raw = RawDb(store)
    raw.execute("""CREATE TRIGGER continuation_facts_count AFTER INSERT ON continuation_facts
BEGIN
    UPDATE await_units
       SET provider_done = provider_done + (NEW.kind = 'provider'),
           continuation_done = continuation_done + (NEW.kind = 'continuation')
     WHERE unit_id = NEW.unit_id;
END""")
    raw.execute("UPDATE txcl_schema SET version = 2 WHERE component = 'continuations'")
    store.close()
    store = open_store(path)
    raw = RawDb(store)
    assert raw.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'") == []
    assert raw.execute("SELECT version FROM txcl_schema WHERE component = 'continuations'")[0][0] == 9
    park = park_barrier(store, units=[itemized(n=2, window=2)])
    complete(store, park.dispatches[0])
    unit = store.get_unit(park.unit_ids[0])
    assert (unit.provider_done, unit.continuation_done) == (1, 1)
    store.close()


def test_upgrade_from_v6_adds_the_heartbeat_columns(tmp_path):
    """A version-6 database (before heartbeats) gets the two interaction columns in place."""
    from contstore_util import open_store

    store, raw = reopened_after_downgrade(open_store, tmp_path / "v6.db", "continuations", 6,
                                          "ALTER TABLE interactions DROP COLUMN heartbeat_ms",
                                          "ALTER TABLE interactions DROP COLUMN progress_json")
    columns = {r[1] for r in raw.execute("PRAGMA table_info(interactions)")}
    assert {"heartbeat_ms", "progress_json"} <= columns
    assert raw.execute("SELECT version FROM txcl_schema WHERE component = 'continuations'")[0][0] == 9
    store.close()


def test_upgrade_from_v7_adds_join_deadlines_cancel_calls_and_retries(tmp_path):
    """A version-7 database (before join deadlines, cancel URLs and retries) gets the new
    columns, the cancel_calls table and the indexes in place."""
    from contstore_util import open_store

    store, raw = reopened_after_downgrade(
        open_store, tmp_path / "v7.db", "continuations", 7,
        "DROP INDEX await_units_join_deadline", "DROP INDEX interactions_retry_due",
        *(f"ALTER TABLE interactions DROP COLUMN {column}" for column in ("retry_count", "retry_at_ms",
                                                                          "retired_tokens", "cancel_url",
                                                                          "cancel_token")),
        "ALTER TABLE await_units DROP COLUMN join_deadline_ms", "DROP TABLE cancel_calls")
    assert "join_deadline_ms" in {r[1] for r in raw.execute("PRAGMA table_info(await_units)")}
    assert {"cancel_url", "cancel_token", "retry_count", "retry_at_ms", "retired_tokens"} <= {
        r[1] for r in raw.execute("PRAGMA table_info(interactions)")}
    assert {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")} >= {
        "await_units_join_deadline", "cancel_calls_due", "cancel_calls_run", "interactions_retry_due"}
    assert raw.execute("SELECT version FROM txcl_schema WHERE component = 'continuations'")[0][0] == 9
    store.close()


def test_the_failed_children_of_a_unit_are_found_through_their_index(tmp_path):
    """Settling an itemized unit looks for its failed children after every completion; read
    through the primary key that scans every child of the unit (quadratic for a large await),
    so the query names the partial index where the planner would not pick it alone."""
    from contstore_util import open_store

    store = open_store(tmp_path / "plan.db")
    hint = store.backend.dialect.using_index("item_children_failed")
    raw = RawDb(store)
    plan = raw.execute("EXPLAIN QUERY PLAN SELECT item_index, error_json FROM item_children "
                       f"{hint} WHERE unit_id = 'u' AND status = 'failed' ORDER BY item_index LIMIT 1")
    assert "USING INDEX item_children_failed" in " ".join(str(row[-1]) for row in plan)
    bare = raw.execute("EXPLAIN QUERY PLAN SELECT item_index, error_json FROM item_children "
                       "WHERE unit_id = 'u' AND status = 'failed' ORDER BY item_index LIMIT 1")
    assert "PRIMARY KEY" in " ".join(str(row[-1]) for row in bare)  # why the hint is there
    store.close()


def test_a_forked_child_knows_its_own_pid_and_opens_its_own_connection(tmp_path):
    """The store notices a fork without asking the kernel at every lookup: the cached pid
    is renewed in the child, which then opens a connection of its own (never its parent's)."""
    import os

    from txcl.procid import current_pid
    from txcl.store.backends.sqlite import SqliteBackend

    backend = SqliteBackend(tmp_path / "fork.db")
    parent_conn = backend.connection()
    assert current_pid() == os.getpid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            fresh = backend.connection() is not parent_conn
            os.write(write, f"{current_pid()} {os.getpid()} {int(fresh)}".encode())
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 100).decode().split()
    os.close(read)
    os.waitpid(pid, 0)
    assert said[0] == said[1] == str(pid)
    assert said[2] == "1"
    assert current_pid() == os.getpid() != pid
    assert backend.connection() is parent_conn


def test_upgrade_from_v8_backfills_the_options_of_existing_units(db_url):
    """A version-8 database (units without their resolved options) gets the options_json
    column, and each unit's options are resolved from the WITH options it kept: a unit
    written by the older txcl settles by the same rules afterwards."""
    from contstore_util import complete, itemized, open_store, park_barrier, unary, unit_spec

    store = open_store(db_url)
    directives = {"retries": 3, "heartbeat": "5s", "cancel_url": "https://w.example/cancel"}
    op = unit_spec(**{**unary("a").__dict__, "directives": directives, "options": None})
    park = park_barrier(store, units=[op, itemized(n=3, window=3, policy="collect")])
    store.close()
    store, raw = reopened_after_downgrade(open_store, db_url, "continuations", 8,
                                          "ALTER TABLE await_units DROP COLUMN options_json")
    assert raw.execute("SELECT version FROM txcl_schema WHERE component = 'continuations'")[0][0] == 9
    assert raw.execute("SELECT COUNT(*) FROM await_units WHERE options_json IS NULL")[0][0] == 0
    unary_unit, items = (store.get_unit(u) for u in park.unit_ids)
    assert unary_unit.options.heartbeat_ms == 5_000 and len(unary_unit.options.retry_delays_ms) == 3
    assert unary_unit.options.cancel_url == "https://w.example/cancel" and unary_unit.options.fails_fast
    assert not items.options.fails_fast and items.options.sanitize_outputs
    # the backfilled `collect` unit keeps every item's outcome, as before the upgrade
    item_calls = [d for d in park.dispatches if d.kind == "itemized"]
    store.admit_terminal(item_calls[0].opc, "failed", {"message": "no"}, source="callback", token=item_calls[0].token)
    store.continue_release(item_calls[0].opc)
    for d in item_calls[1:]:
        complete(store, d)
    assert store.get_unit(items.unit_id).status == "completed"
    store.close()
