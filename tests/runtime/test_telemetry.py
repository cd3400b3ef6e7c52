"""Application metrics (EMIT @telemetry.metrics): what is kept, what is dropped and why, the
caps and the redaction of sensitive attribute keys; and their export to the Prometheus
registry when a walk completes."""

from __future__ import annotations

import pytest

from txcl import metrics
from txcl.telemetry import MAX_ATTRS, MAX_INTENTS, REDACTED, check_intent, intents_of


def _env(items):
    return {"_txc": {"telemetry": {"metrics": items}}}


def test_a_valid_counter_and_histogram_are_kept():
    kept, dropped = intents_of(_env([
        {"name": "book.queued", "kind": "counter", "value": 1, "attrs": {"source": "search", "vip": True}},
        {"name": "checkout.ms", "kind": "histogram", "value": 12.5, "unit": "ms"}]))
    assert dropped == [] and [(i.name, i.kind, i.value) for i in kept] == [("book.queued", "counter", 1.0),
                                                                             ("checkout.ms", "histogram", 12.5)]
    assert kept[0].attrs == {"source": "search", "vip": "true"} and kept[1].unit == "ms"


@pytest.mark.parametrize("item, reason", [
    ("x", "not_an_object"),
    ({"name": "book queued", "kind": "counter", "value": 1}, "bad_name"),
    ({"name": "a" * 101, "kind": "counter", "value": 1}, "bad_name"),
    ({"name": "x.y", "kind": "gauge", "value": 1}, "bad_kind"),
    ({"name": "x.y", "kind": "counter", "value": "1"}, "bad_value"),
    ({"name": "x.y", "kind": "counter", "value": True}, "bad_value"),
    ({"name": "x.y", "kind": "counter", "value": -1}, "negative_counter"),
    ({"name": "x.y", "kind": "histogram", "value": 1, "unit": 5}, "bad_unit"),
    ({"name": "x.y", "kind": "counter", "value": 1, "attrs": [1]}, "bad_attrs"),
    ({"name": "x.y", "kind": "counter", "value": 1, "attrs": {"a b": 1}}, "bad_attr_key"),
    ({"name": "x.y", "kind": "counter", "value": 1, "attrs": {"a": {"b": 1}}}, "bad_attr_value"),
])
def test_bad_intents_are_dropped_with_a_reason(item, reason):
    assert check_intent(item) == (None, reason)


def test_caps_and_redaction():
    many = [{"name": "x.y", "kind": "counter", "value": 1}] * (MAX_INTENTS + 3)
    kept, dropped = intents_of(_env(many))
    assert len(kept) == MAX_INTENTS and dropped == ["too_many"] * 3
    attrs = {f"k{i}": "v" * 500 for i in range(MAX_ATTRS + 4)}
    attrs = {"user_email": "ann@example.com", "authToken": "t0k", **attrs}
    intent, _ = check_intent({"name": "x.y", "kind": "counter", "value": 1, "attrs": attrs})
    assert len(intent.attrs) == MAX_ATTRS
    assert intent.attrs["user_email"] == REDACTED and intent.attrs["authToken"] == REDACTED
    assert len(intent.attrs["k0"]) == 128


def test_a_completed_walk_exports_its_intents(workspace, run_tree):
    pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families

    from txcl.metrics_prometheus import PrometheusMetrics

    recorder = PrometheusMetrics(process=False)
    metrics.install(recorder)
    try:
        ws = workspace({
            "OPS/s/0100/a.txcl": 'EMIT @telemetry.metrics = &array(&object("name", "book.queued", "kind", "counter", '
                                 '"value", 2, "attrs", &object("source", "search", "email", "ann@example.com")))',
            "OPS/s/0200/b.txcl": 'EMIT @telemetry.metrics = &array(&object("name", "bad name", "kind", "counter", '
                                 '"value", 1), &object("name", "wait.ms", "kind", "histogram", "value", 40, "unit", "ms"))',
        })
        run_tree(ws, {})
        run_tree(ws, {})
    finally:
        metrics.reset()
    text = recorder.exposition()[0].decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("txcl_app_book_queued_total", (("email", REDACTED), ("source", "search")))] == 4
    assert samples[("txcl_app_wait_ms_count", ())] == 2
    assert samples[("txcl_telemetry_dropped_total", (("reason", "bad_name"),))] == 2
    assert "ann@example.com" not in text
