"""txcl's own OTLP encoder, decoded with the official protobuf definitions (opentelemetry-proto):
spans with every kind of attribute, links, events and status; sums, gauges and histograms;
the sampler and W3C traceparent parsing; the exporter's configuration from OTEL_* variables."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.proto")
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from txcl.otel import parse_traceparent  # noqa: E402
from txcl.otlp import Sampler, encode_metrics, encode_traces, endpoint, headers, resource_attributes  # noqa: E402


def _attrs(items):
    out = {}
    for kv in items:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which)
    return out


def test_spans_round_trip_through_the_official_definitions():
    trace_id, span_id, parent = bytes(range(16)), bytes(range(8)), bytes(range(8, 16))
    span = (trace_id, span_id, parent, "txcl op charge", 1, 1_000_000_000, 1_250_000_000,
            {"s": "shop", "n": 300, "neg": -5, "f": 0.5, "b": True, "long": "x" * 300, "é": "ü"},
            [(bytes(16), bytes(8), {"txcl.link": "parked"})], (2, "op failed"),
            [(1_100_000_000, "txcl scope shop", {"txcl.duration_us": 12})])
    body = encode_traces({"service.name": "txcl-test"}, ("txcl", "0.1"), [span, span])
    request = ExportTraceServiceRequest.FromString(body)
    resource = request.resource_spans[0]
    assert _attrs(resource.resource.attributes) == {"service.name": "txcl-test"}
    scope = resource.scope_spans[0]
    assert (scope.scope.name, scope.scope.version) == ("txcl", "0.1") and len(scope.spans) == 2
    got = scope.spans[0]
    assert (got.trace_id, got.span_id, got.parent_span_id) == (trace_id, span_id, parent)
    assert got.name == "txcl op charge" and got.kind == 1
    assert (got.start_time_unix_nano, got.end_time_unix_nano) == (1_000_000_000, 1_250_000_000)
    assert _attrs(got.attributes) == {"s": "shop", "n": 300, "neg": -5, "f": 0.5, "b": True, "long": "x" * 300,
                                      "é": "ü"}
    assert got.links[0].trace_id == bytes(16) and _attrs(got.links[0].attributes) == {"txcl.link": "parked"}
    assert got.events[0].name == "txcl scope shop" and got.events[0].time_unix_nano == 1_100_000_000
    assert (got.status.code, got.status.message) == (2, "op failed")


def test_true_and_one_are_different_attribute_values():
    span = (bytes(16), bytes(8), None, "s", 1, 1, 2, {"k": 1}, None, None, None)
    other = (bytes(16), bytes(8), None, "s", 1, 1, 2, {"k": True}, None, None, None)
    spans = ExportTraceServiceRequest.FromString(encode_traces({}, ("txcl", "0"), [span, other])) \
        .resource_spans[0].scope_spans[0].spans
    assert spans[0].attributes[0].value.WhichOneof("value") == "int_value"
    assert spans[1].attributes[0].value.WhichOneof("value") == "bool_value"


def test_metrics_round_trip():
    bounds = (0.1, 1.0)
    body = encode_metrics({"service.name": "t"}, ("txcl", "0"), [
        ("txcl.requests", "Requests.", "1", "sum", [({"stack": "shop"}, 3.0)]),
        ("txcl.runs", "Runs.", "1", "gauge", [({"state": "waiting"}, 2.0)]),
        ("txcl.request_duration", "Latency.", "s", "histogram", [({"stack": "shop"}, [1, 2, 0], 1.5, bounds)]),
    ])
    metrics = ExportMetricsServiceRequest.FromString(body).resource_metrics[0].scope_metrics[0].metrics
    by_name = {m.name: m for m in metrics}
    total = by_name["txcl.requests"].sum
    assert total.is_monotonic and total.aggregation_temporality == 2 and total.data_points[0].as_double == 3.0
    assert _attrs(total.data_points[0].attributes) == {"stack": "shop"}
    assert by_name["txcl.runs"].gauge.data_points[0].as_double == 2.0
    point = by_name["txcl.request_duration"].histogram.data_points[0]
    assert list(point.bucket_counts) == [1, 2, 0] and list(point.explicit_bounds) == [0.1, 1.0]
    assert point.count == 3 and point.sum == 1.5 and by_name["txcl.request_duration"].unit == "s"


def test_the_sampler():
    low, high = bytes(8) + bytes(8), bytes(8) + b"\xff" * 8
    assert Sampler({}).sample(high, None) and Sampler({}).sample(low, False) is False  # parent-based always on
    assert not Sampler({"OTEL_TRACES_SAMPLER": "always_off"}).sample(low, None)
    ratio = Sampler({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"})
    assert ratio.sample(low, None) and not ratio.sample(high, None) and not ratio.sample(high, True)
    parent_ratio = Sampler({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"})
    assert parent_ratio.sample(high, True)  # a sampled parent decides


def test_traceparent_parsing():
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert parse_traceparent(f"00-{trace}-00f067aa0ba902b7-01") == (int(trace, 16), int("00f067aa0ba902b7", 16),
                                                                      True)
    assert parse_traceparent(f"00-{trace}-00f067aa0ba902b7-00")[2] is False
    for bad in (None, "", "01-x", f"00-{'0' * 32}-00f067aa0ba902b7-01", f"00-{trace}-{'0' * 16}-01", "garbage"):
        assert parse_traceparent(bad) is None


def test_configuration_from_the_environment():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m/x",
           "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b,x=1", "OTEL_RESOURCE_ATTRIBUTES": "env=prod,service.name=s",
           "OTEL_SERVICE_NAME": "orders"}
    assert endpoint(env, "traces") == "http://c:4318/v1/traces" and endpoint(env, "metrics") == "http://m/x"
    assert endpoint({}, "traces") is None
    assert headers(env, "traces") == {"api-key": "a b", "x": "1"}
    attrs = resource_attributes(env)
    assert attrs["service.name"] == "orders" and attrs["env"] == "prod"


def test_fixed_attribute_blocks_int_ids_and_request_ids_encode_as_plain_attributes():
    """The tracer's fast forms — ids as ints, a rule's unchanging attributes as one `Fixed`
    block encoded once and reused — decode exactly as the plain forms do."""
    from txcl.otlp import Fixed

    fixed = Fixed({"txcl.stack": "shop", "txcl.rule": "charge", "txcl.status": "ok"})
    spans = [(0x0102 << 100, 7, 9, "txcl op charge", 1, 1, 2, (fixed, {"txcl.request_id": f"r-{n}" * (n + 1),
                                                                        "txcl.fuel": n * 40_000}), None, None, None)
             for n in range(3)]
    decoded = ExportTraceServiceRequest.FromString(encode_traces({}, ("txcl", "0"), spans)) \
        .resource_spans[0].scope_spans[0].spans
    for n, got in enumerate(decoded):
        assert got.trace_id == (0x0102 << 100).to_bytes(16, "big") and got.span_id == (7).to_bytes(8, "big")
        assert got.parent_span_id == (9).to_bytes(8, "big")
        want = {"txcl.stack": "shop", "txcl.rule": "charge", "txcl.status": "ok", "txcl.request_id": f"r-{n}" * (n + 1),
                "txcl.fuel": n * 40_000}
        assert _attrs(got.attributes) == want == {**spans[n][7][0], **spans[n][7][1]}
    long_id = "r" * 200  # lengths past one byte take the general path
    span = (1, 2, None, "s", 1, 1, 2, {"txcl.request_id": long_id}, None, None, None)
    got = ExportTraceServiceRequest.FromString(encode_traces({}, ("txcl", "0"), [span])) \
        .resource_spans[0].scope_spans[0].spans[0]
    assert _attrs(got.attributes) == {"txcl.request_id": long_id}


def test_the_exporter_keeps_its_connection_and_replaces_one_the_collector_closed():
    """Batches go over one kept-open connection; when the collector drops it between batches,
    the next batch goes on a new one instead of being lost."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from txcl.otlp import Exporter

    seen: list[tuple[int, int]] = []  # (client port, spans in the batch)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as collectors do

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            spans = ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans
            seen.append((self.client_address[1], len(spans)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    exporter = Exporter({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
                         "OTEL_BSP_SCHEDULE_DELAY": "3600000"})
    try:
        def batch(n):
            for i in range(n):
                exporter.add((1, i + 1, None, "s", 1, 1, 2, {}, None, None, None))
            exporter._flush_spans()

        batch(2)
        batch(3)
        assert [n for _, n in seen] == [2, 3] and seen[0][0] == seen[1][0]  # one connection, kept
        conn = exporter._connections[("http", "127.0.0.1", server.server_address[1])]
        conn.sock.shutdown(socket.SHUT_RDWR)  # as if the collector had closed it meanwhile
        batch(4)
        assert [n for _, n in seen] == [2, 3, 4] and seen[2][0] != seen[0][0]  # resent on a new connection
    finally:
        exporter.shutdown()
        server.shutdown()


def test_a_scope_of_local_rules_is_an_event_with_its_stack_and_duration():
    """The tracer records such a scope as (when, stack, duration in ns); the encoder names it."""
    span = (1, 2, None, "txcl request", 2, 1, 9, {}, None, None,
            [(5, "shop", 12_345_678), (6, "shop", 999)])
    got = ExportTraceServiceRequest.FromString(encode_traces({}, ("txcl", "0"), [span])) \
        .resource_spans[0].scope_spans[0].spans[0]
    assert [(e.name, e.time_unix_nano, _attrs(e.attributes)) for e in got.events] == [
        ("txcl scope shop", 5, {"txcl.stack": "shop", "txcl.duration_us": 12_345}),
        ("txcl scope shop", 6, {"txcl.stack": "shop", "txcl.duration_us": 0})]


def test_spans_that_find_the_queue_full_are_counted_and_reported(caplog):
    import logging

    from txcl.otlp import Exporter

    exporter = Exporter({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_MAX_QUEUE_SIZE": "3",
                         "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100", "OTEL_BSP_SCHEDULE_DELAY": "3600000"})
    try:
        for i in range(5):
            exporter.add((1, i + 1, None, "s", 1, 1, 2, {}, None, None, None))
        assert exporter.dropped == 2 and len(exporter.spans) == 3
        with caplog.at_level(logging.WARNING, logger="txcl.otel"):
            exporter._report_dropped()
        assert "2 span(s) dropped" in caplog.text and "OTEL_BSP_MAX_QUEUE_SIZE=3" in caplog.text
    finally:
        exporter.spans.clear()
        exporter.shutdown()


def test_an_op_span_names_the_scheme_the_rule_wrote_and_the_host():
    from types import SimpleNamespace

    from txcl.otel import _op_fixed_attributes
    from txcl.syntax.targets import classify_exec_target

    frame = SimpleNamespace(stack="shop", scope=200)
    for text, scheme, host in (("https://pay.example.com/charge", "https", "pay.example.com"),
                               ("txco://copy", "txco", None), ("shop/0300", "stage", None)):
        op = SimpleNamespace(name="charge", stack="shop", target=classify_exec_target(text))
        got = _op_fixed_attributes(frame, op, "http", "ok")
        assert got["txcl.target.scheme"] == scheme and got.get("server.address") == host, (text, got)


def test_the_native_metrics_recorder_counts_requests_scopes_and_ops():
    """What `txcl serve` records per request with OpenTelemetry's metrics on, as the collector
    receives it: request counts by stack and status, and latency histograms (buckets, count,
    sum) by stack, scope and op outcome; fuel only when some was used."""
    from txcl.metrics import LATENCY_BUCKETS
    from txcl.otel import NativeMetrics

    recorder = NativeMetrics()
    for status, seconds in ((200, 0.002), (200, 0.004), (500, 0.3)):
        recorder.request("shop", status, seconds, 0)
    recorder.request("cart", 200, 0.001, 12)
    recorder.scope("shop/0100", 0.0005)
    recorder.scope("shop/0100", 0.0007)
    recorder.op("https", "ok", 0.05)
    recorder.op("https", "error", 0.5)
    body = encode_metrics({"service.name": "t"}, ("txcl", "0"), recorder.agg.collect())
    metrics = ExportMetricsServiceRequest.FromString(body).resource_metrics[0].scope_metrics[0].metrics
    by_name = {m.name: m for m in metrics}

    def points(name):
        metric = by_name[name]
        data = metric.sum if metric.WhichOneof("data") == "sum" else metric.histogram
        return {tuple(sorted(_attrs(p.attributes).items())): p for p in data.data_points}

    requests = points("txcl.requests")
    assert {k: p.as_double for k, p in requests.items()} == {
        (("stack", "shop"), ("status", "200")): 2.0, (("stack", "shop"), ("status", "500")): 1.0,
        (("stack", "cart"), ("status", "200")): 1.0}
    assert {k: p.as_double for k, p in points("txcl.fuel_used").items()} == {(("stack", "cart"),): 12.0}
    shop = points("txcl.request_duration")[(("stack", "shop"),)]
    assert shop.count == 3 and abs(shop.sum - 0.306) < 1e-9 and list(shop.explicit_bounds) == list(LATENCY_BUCKETS)
    assert sum(shop.bucket_counts) == 3 and shop.bucket_counts[-1] == 0  # (0.3 s is under the last bound)
    scope = points("txcl.scope_duration")[(("stack", "shop/0100"),)]
    assert scope.count == 2 and abs(scope.sum - 0.0012) < 1e-12
    ops = points("txcl.op_duration")
    assert ops[(("outcome", "ok"), ("scheme", "https"))].count == 1
    assert ops[(("outcome", "error"), ("scheme", "https"))].sum == 0.5
