"""Big strings stored once per run: a request body held by the suspend's envelope, its budgets,
a unit's input view, the op's input and the result is one `blobs` row, and every document reads
back exactly as it was written (on each backend)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from testtools import RawDb

from contstore_util import complete, itemized, run_spec, unary, unit_spec

from txcl.store.blobs import BLOB_MIN, pack, unpack
from txcl.store.records import Fence

BODY = "".join(f"{i:x}," for i in range(BLOB_MIN // 2)) + "é"  # no repeated stretch: countable


def _roundtrip(value):
    blobs: dict[str, str] = {}
    text = pack(value, blobs)
    return text, blobs, unpack(text, lambda digests: {d: blobs[d] for d in digests})


def test_pack_moves_each_big_string_out_once_and_unpack_restores_it() -> None:
    doc = {"_txc": {"web": {"req": {"body": BODY}}}, "copy": [BODY, {"again": BODY}], "small": "s"}
    text, blobs, back = _roundtrip(doc)
    assert back == doc and list(back) == list(doc)
    assert len(blobs) == 1 and BODY in blobs.values()
    assert len(text) < 500


def test_user_strings_that_look_like_references_are_kept() -> None:
    doc = {"a": "\x00b:" + "0" * 64, "b": "\x00", "c": "\x00\x00x", "d": ["\x00b:"], "big": BODY}
    text, blobs, back = _roundtrip(doc)
    assert back == doc and len(blobs) == 1
    small = {"n": "\x00 nul"}  # small, but holding a NUL: escaped too
    assert _roundtrip(small)[2] == small


def test_small_documents_are_plain_json() -> None:
    blobs: dict[str, str] = {}
    assert pack({"a": [1, "x"]}, blobs) == '{"a":[1,"x"]}' and not blobs
    assert pack(None, blobs) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.sampled_from("ab\x00é"), max_size=6),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(json_values, st.booleans())
def test_pack_then_unpack_is_the_identity(value, with_big) -> None:
    doc = {"v": value, "big": BODY} if with_big else value
    assert _roundtrip(doc)[2] == doc


def _blob_rows(store, run_id: str) -> list:
    return RawDb(store).execute("SELECT digest, body FROM blobs WHERE run_id = ?", (run_id,))


def test_a_body_in_every_document_of_a_run_is_stored_once(store) -> None:
    envelope = {"_txc": {"web": {"req": {"body": BODY}}}, "order": 1}
    budgets = {"ttl": 10, "web_req": {"body": BODY}}
    unit = unit_spec(**{**unary().__dict__, "items": [{"payload": BODY}], "input_view": envelope})
    park = store.park_suspend(run_spec("rid-big"), Fence("rid-big"), stage="shop/100", kind="barrier",
                              envelope=envelope, budgets=budgets, units=[unit])
    run_id = park.run.run_id
    rows = _blob_rows(store, run_id)
    assert len(rows) == 1 and rows[0][1] == BODY
    susp = store.get_suspend(run_id, "shop/100", 1)
    assert susp.envelope == envelope and susp.budgets == budgets
    assert store.get_unit(park.unit_ids[0]).input_view == envelope
    assert park.dispatches[0].input == {"payload": BODY}
    assert store.get_interaction(park.dispatches[0].opc).input == {"payload": BODY}
    # the callback path hands out the unit and its interaction with the body restored
    rel = complete(store, park.dispatches[0])[1]
    bundle = store.claim_resume(run_id, rel.claim.claim_token)
    assert bundle.suspend.envelope == envelope and bundle.members[0].input_view == envelope
    fence = Fence(rel.claim.segment_id, rel.claim.claim_token)
    done = store.finish_segment(run_id, fence, status="completed", result={**envelope, "done": True})
    assert done.result == {**envelope, "done": True}
    assert store.get_run(run_id).result["_txc"]["web"]["req"]["body"] == BODY
    assert len(_blob_rows(store, run_id)) == 1  # the result shares the row
    # the whole database holds the body about once (not once per document)
    assert RawDb(store).everything().count(BODY[-2000:].encode()) <= 2  # (SQLite: the file and its WAL)


def test_purging_a_run_deletes_its_blobs(store, clock) -> None:
    envelope = {"body": BODY}
    park = store.park_suspend(run_spec("rid-p"), Fence("rid-p"), stage="shop/100", kind="barrier",
                              envelope=envelope, budgets={}, units=[unary()])
    rel = complete(store, park.dispatches[0])[1]
    store.claim_resume(park.run.run_id, rel.claim.claim_token)
    store.finish_segment(park.run.run_id, Fence(rel.claim.segment_id, rel.claim.claim_token),
                         status="completed", result=envelope)
    clock.advance(10_000)
    assert store.purge_finished(retention_ms=1_000) == [park.run.run_id]
    assert RawDb(store).execute("SELECT COUNT(*) FROM blobs")[0][0] == 0


def test_a_callback_check_never_reads_nor_decodes_the_units_view(store, monkeypatch) -> None:
    # An itemized unit's view holds the whole array and every item's callback reads the
    # unit: decoding the view each time made big runs quadratic, and reading it at all cost
    # PostgreSQL a decompression per item. The check needs the unit's kind, `into` and target.
    # Only the callback that releases the run decodes it, once, for the resume's bundle.
    import txcl.store.procedures.rows as rows

    envelope = {"_txc": {"web": {"req": {"body": BODY}}}, "items": list(range(50))}
    unit = unit_spec(**{**itemized(n=2, window=2).__dict__, "input_view": envelope})
    park = store.park_suspend(run_spec("rid-lazy"), Fence("rid-lazy"), stage="shop/100", kind="barrier",
                              envelope=envelope, budgets={}, units=[unit])
    decoded: list[str] = []
    real_unpack = rows.unpack
    monkeypatch.setattr(rows, "unpack", lambda text, fetch: decoded.append(text) or real_unpack(text, fetch))
    first, last = park.dispatches
    target = store.check_callback(first.opc, first.token)
    assert target.outcome == "ok" and decoded == []
    admit, release = complete(store, first)
    assert admit.outcome == "admitted" and release is not None and not release.won and decoded == []
    assert target.unit.input_view is None and decoded == []  # not read at all
    admit, release = complete(store, last)
    assert admit.outcome == "admitted" and release.won
    assert release.claim.bundle.members[0].input_view == envelope and release.claim.bundle.suspend.envelope == envelope
    assert len(decoded) <= 2  # the view and the suspend's envelope, once each
    assert store.get_unit(park.unit_ids[0]).input_view == envelope  # the stored view is whole
