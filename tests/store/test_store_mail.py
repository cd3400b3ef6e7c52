"""What the LMTP inlet remembers of deliveries (both backends): a repeated delivery gets the
recorded verdict, a 4xx is forgotten so the next attempt walks, a walk in progress is busy
until its session is stale."""

from __future__ import annotations


def test_a_repeated_delivery_gets_the_recorded_verdict(store, clock):
    assert store.begin_deliveries(["m1:a", "m1:b"], "r1", 60_000) == {"m1:a": ("new", None, None),
                                                                       "m1:b": ("new", None, None)}
    assert store.begin_deliveries(["m1:a"], "r2", 60_000) == {"m1:a": ("busy", None, None)}
    store.finish_deliveries([("m1:a", 250, "2.0.0 ok"), ("m1:b", 451, "4.3.0 later")], "r1")
    again = store.begin_deliveries(["m1:a", "m1:b"], "r3", 60_000)
    assert again == {"m1:a": ("done", 250, "2.0.0 ok"), "m1:b": ("new", None, None)}


def test_a_stale_walk_is_taken_over_and_the_old_session_cannot_record(store, clock):
    store.begin_deliveries(["k"], "r1", 60_000)
    clock.advance(61_000)
    assert store.begin_deliveries(["k"], "r2", 60_000) == {"k": ("new", None, None)}
    store.finish_deliveries([("k", 550, "5.1.1 no")], "r1")  # the old session's late verdict
    assert store.begin_deliveries(["k"], "r3", 60_000) == {"k": ("busy", None, None)}
    store.finish_deliveries([("k", 250, "2.0.0 ok")], "r2")
    assert store.begin_deliveries(["k"], "r4", 60_000) == {"k": ("done", 250, "2.0.0 ok")}
    clock.advance(1_000)
    assert store.purge_deliveries(clock.now) == 1
    assert store.begin_deliveries(["k"], "r5", 60_000) == {"k": ("new", None, None)}
