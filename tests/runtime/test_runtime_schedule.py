"""`txco://schedule` called directly: its answers and its op errors, on each store backend."""

from __future__ import annotations

import logging

import pytest

from txcl.runtime.dispatch import OpContext, OpError
from txcl.runtime.kv import Kv
from txcl.runtime.schemes.txco import start_builtin
from txcl.store import open_store


@pytest.fixture
def call(db_url):
    store = open_store(db_url)
    kv = Kv(store, payload_max=200)

    def run(**directives):
        ctx = OpContext("r1", "shop", 100, "schedule", directives, 0.0, logging.getLogger("t"), kv)
        return start_builtin("schedule", {}, directives, ctx)

    yield run, store
    store.close()


def test_schedule_reschedule_cancel(call):
    run, store = call
    first = run(idempotency_key="k", schedule_at="2030-01-01T08:00:00+02:00", payload={"a": 1})
    assert first["status"] == "scheduled" and first["schedule_at"] == "2030-01-01T06:00:00Z"
    again = run(idempotency_key="k", schedule_at="2030-01-02T00:00:00Z", payload={"a": 2})
    assert again == {**first, "status": "rescheduled", "schedule_at": "2030-01-02T00:00:00Z"}
    event = store.get_event("k")
    assert event.payload == {"a": 2} and event.origin_stack == "shop" and event.origin_rid == "r1"
    assert run(idempotency_key="k", cancel=True) == {"idempotency_key": "k", "status": "cancelled",
                                                      "event_id": first["event_id"]}
    assert run(idempotency_key="other", cancel=True)["status"] == "not_found"


@pytest.mark.parametrize("directives, message", [
    ({"schedule_at": "2030-01-01T00:00:00Z"}, "idempotency_key (a non-empty string) is required"),
    ({"idempotency_key": "k"}, "schedule_at must be an RFC 3339 time"),
    ({"idempotency_key": "k", "schedule_at": "next tuesday"}, "is not an RFC 3339 time"),
    ({"idempotency_key": "k", "schedule_at": "2030-01-01T00:00:00"}, "has no time zone"),
    ({"idempotency_key": "k", "schedule_at": "2030-01-01T00:00:00Z", "payload": [1]}, "payload must be a JSON object"),
    ({"idempotency_key": "k", "schedule_at": "2030-01-01T00:00:00Z", "payload": {"x": "y" * 300}},
     "larger than --op-payload-max"),
    ({"idempotency_key": "k" * 513, "schedule_at": "2030-01-01T00:00:00Z"}, "longer than 512 bytes"),
])
def test_bad_directives_are_op_errors_that_change_nothing(call, directives, message):
    run, store = call
    with pytest.raises(OpError, match="txco://schedule: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        run(**directives)
    assert store.list_events() == []
