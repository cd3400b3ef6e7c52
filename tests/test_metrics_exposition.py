"""The Prometheus exposition of txcl's recorder, parsed by prometheus_client's own parser:
histogram buckets are cumulative with `le` bounds, counters carry `_total`, every metric of
the catalogue is there."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from txcl.metrics import CATALOGUE, NAMESPACE  # noqa: E402
from txcl.metrics_prometheus import PrometheusMetrics  # noqa: E402


def _samples(recorder):
    text = recorder.exposition()[0].decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}, text


def test_histograms_counters_and_gauges():
    recorder = PrometheusMetrics(process=False)
    recorder.watch_store(lambda: 2)  # the store's own retry counter, read at each scrape
    recorder.request("shop", 200, 0.003, 7)
    recorder.request("shop", 200, 0.0025, 0)
    recorder.request("shop", 503, 2.0, 1)
    recorder.scope("shop", 0.0004)
    recorder.op("http", "ok", 0.2)
    recorder.callback("rejected", "txcl_bad_token")
    recorder.open_work({"runs": {"waiting": 3}, "parked_by_age": {"1m": 2, "older": 1}, "oldest_parked_s": 90000.0,
                        "units": {"u1": {"op": "pay/charge", "queued": 4, "in_flight": 2}},
                        "queues": {"resize": {"ready": 5, "leased": 1, "oldest_ready_s": 12.5}}})
    samples, text = _samples(recorder)
    bucket = "txcl_request_duration_seconds_bucket"
    assert samples[(bucket, (("le", "0.001"), ("stack", "shop")))] == 0
    assert samples[(bucket, (("le", "0.0025"), ("stack", "shop")))] == 1  # le: at most the bound
    assert samples[(bucket, (("le", "0.005"), ("stack", "shop")))] == 2
    assert samples[(bucket, (("le", "+Inf"), ("stack", "shop")))] == 3
    assert samples[("txcl_request_duration_seconds_count", (("stack", "shop"),))] == 3
    assert samples[("txcl_request_duration_seconds_sum", (("stack", "shop"),))] == pytest.approx(2.0055)
    assert samples[("txcl_requests_total", (("stack", "shop"), ("status", "200")))] == 2
    assert samples[("txcl_requests_total", (("stack", "shop"), ("status", "503")))] == 1
    assert samples[("txcl_fuel_used_total", (("stack", "shop"),))] == 8
    assert samples[("txcl_scope_duration_seconds_bucket", (("le", "0.0005"), ("stack", "shop")))] == 1
    assert samples[("txcl_op_duration_seconds_count", (("outcome", "ok"), ("scheme", "http")))] == 1
    assert samples[("txcl_callbacks_total", (("code", "txcl_bad_token"), ("outcome", "rejected")))] == 1
    assert samples[("txcl_runs", (("state", "waiting"),))] == 3 and samples[("txcl_runs", (("state", "active"),))] == 0
    assert samples[("txcl_parked_runs", (("age", "older"),))] == 1
    assert samples[("txcl_store_retries_total", ())] == 2
    assert samples[("txcl_itemized_items", (("op", "pay/charge"), ("state", "queued"), ("unit", "u1")))] == 4
    assert samples[("txcl_queue_jobs", (("queue", "resize"), ("state", "ready")))] == 5
    assert samples[("txcl_queue_jobs", (("queue", "resize"), ("state", "leased")))] == 1
    assert samples[("txcl_queue_oldest_ready_age_seconds", (("queue", "resize"),))] == 12.5
    recorder.open_work({"units": {}})  # the unit settled, the queue emptied: their series go away
    samples, _ = _samples(recorder)
    assert not any(name in ("txcl_itemized_items", "txcl_queue_jobs") for name, _ in samples)
    for spec in CATALOGUE:
        assert f"# TYPE {NAMESPACE}_{spec.name}" in text, spec.name
