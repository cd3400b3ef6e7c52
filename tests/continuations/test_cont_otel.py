"""OpenTelemetry with real parts: an OTLP/HTTP receiver in the test (the payloads decoded with
`opentelemetry-proto`) receives the spans and metrics of two `txcl serve` nodes on one
database. A request parks on an async op at node A; the test worker gets `traceparent` with
the dispatch, calls back at node B carrying its own span's `traceparent`; B resumes the run.

Expected: two segment root spans (no span held open across the park) — the request's (its SERVER span)
and the resume's — the resume's linked to the parked segment; the worker's span in between (the
dispatch carried A's trace, and B's callback span links to the worker's span); the request and
run ids on the segment spans; op and scope spans; and the metrics through the OTel meter."""

from __future__ import annotations

import json
import secrets
import time
from http.server import BaseHTTPRequestHandler

import pytest
from cont_support import http_get, wait_until
from contworker import post_json
from testtools import start_http_server

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2  # noqa: E402
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402


class Receiver:
    """An OTLP/HTTP (protobuf) receiver: every span and metric name it is sent."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.metric_names: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                assert self.headers.get("Content-Type") == "application/x-protobuf"
                if self.path == "/v1/traces":
                    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                    for resource in request.resource_spans:
                        service = {a.key: a.value.string_value for a in resource.resource.attributes}
                        for scope in resource.scope_spans:
                            for span in scope.spans:
                                receiver.spans.append({
                                    "service": service.get("service.name"), "name": span.name,
                                    "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                                    "parent": span.parent_span_id.hex(),
                                    "attrs": {a.key: (a.value.string_value or a.value.int_value) for a in span.attributes},
                                    "links": [(link.trace_id.hex(), link.span_id.hex(),
                                               {a.key: a.value.string_value for a in link.attributes})
                                              for link in span.links]})
                elif self.path == "/v1/metrics":
                    request = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                    for resource in request.resource_metrics:
                        for scope in resource.scope_metrics:
                            receiver.metric_names.update(m.name for m in scope.metrics)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server, self.url = start_http_server(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    found = Receiver()
    yield found
    found.close()


@pytest.mark.parametrize("exporter", ["native", "sdk"])
def test_a_parked_request_and_its_resume_on_another_node_are_two_linked_root_spans(serve, workspace, worker,
                                                                                     receiver, exporter):
    """With txcl's own OTLP exporter (the default) and with the OpenTelemetry SDK's."""
    ws = workspace({"OPS/shop/100/job.txcl": f'WITH mode = "async", into = "job"\nEXEC "{worker.url()}"',
                    "OPS/shop/200/after.txcl": "EMIT .after = true"})
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100",
           "OTEL_METRIC_EXPORT_INTERVAL": "300", "OTEL_SERVICE_NAME": "txcl-under-test", "OTEL_TXCL_EXPORTER": exporter}
    node_a = serve(ws, "--node-id", "a", env=env)
    node_b = serve(ws, "--node-id", "b", env=env)
    status, headers, _ = http_get(node_a.url + "/go")
    assert status == 202
    job = worker.wait_job()
    dispatched = job.headers["traceparent"]
    _, trace_id, dispatch_parent, _ = dispatched.split("-")
    worker_span = secrets.token_hex(8)
    callback = node_b.url + job.callback_url[job.callback_url.index("/_txc/"):]
    answer = post_json(callback, {"status": "completed", "output": {"ok": 1}}, job.token,
                       headers={"traceparent": f"00-{trace_id}-{worker_span}-01"})
    assert answer[0] == 200
    final = wait_until(lambda: (r := http_get(node_b.url + headers["location"]))[0] == 200 and json.loads(r[2]))
    assert final["after"] is True and final["job"] == {"ok": 1}
    node_a.stop()
    node_b.stop()  # each flushes its batched spans as it shuts down
    spans = receiver.spans
    assert {s["service"] for s in spans} == {"txcl-under-test"}
    # (the poll of the run is a request of its own, on the system stack: not one of these)
    segments = [s for s in spans if s["attrs"].get("txcl.segment") and s["attrs"]["txcl.stack"] == "shop"]
    assert len(segments) == 2, [(s["name"], s["attrs"]) for s in spans]
    first, resumed = sorted(segments, key=lambda s: s["attrs"]["txcl.segment"] != "request")
    assert first["attrs"]["txcl.segment"] == "request" and resumed["attrs"]["txcl.segment"] == "resume"
    run_id = job.body["_txc"]["run_id"]
    assert first["attrs"]["txcl.run_id"] == run_id == resumed["attrs"]["txcl.run_id"]
    assert first["attrs"]["txcl.request_id"] == headers["x-request-id"]
    # a served request's segment is its request span (a root here: no traceparent came in); the
    # resume is a root of its own
    assert first["name"] == "txcl request" and first["parent"] == ""
    assert resumed["name"] == "txcl segment"
    assert resumed["parent"] == "" and resumed["trace_id"] != first["trace_id"]
    parked = [link for link in resumed["links"] if link[2].get("txcl.link") == "parked"]
    assert parked and parked[0][:2] == (first["trace_id"], first["span_id"])
    # the dispatch carried the first segment's trace; the worker's span came back on the callback
    assert trace_id == first["trace_id"]
    assert any(s["span_id"] == dispatch_parent and s["trace_id"] == trace_id for s in spans)
    callback_span = next(s for s in spans if s["name"] == "txcl callback")
    assert callback_span["parent"] == "" and (trace_id, worker_span) in [link[:2] for link in callback_span["links"]]
    released = [link for link in resumed["links"] if link[2].get("txcl.link") == "released_by"]
    assert released and released[0][1] == callback_span["span_id"]
    ops = [s for s in spans if s["name"] == "txcl op job"]
    assert ops and ops[0]["attrs"]["txcl.transport"] == "async" and ops[0]["attrs"]["server.address"] == "127.0.0.1"
    assert any(s["name"].startswith("txcl scope shop") for s in spans)
    assert {"txcl.requests", "txcl.callbacks", "txcl.op_duration"} <= receiver.metric_names


def test_without_otel_variables_nothing_is_exported(serve, workspace, receiver):
    srv = serve(workspace({"OPS/shop/100/a.txcl": "EMIT .a = 1"}),
                env={"OTEL_SERVICE_NAME": "txcl-under-test", "OTEL_BSP_SCHEDULE_DELAY": "50"})
    assert http_get(srv.url + "/go")[0] == 200
    srv.stop()
    time.sleep(0.3)
    assert receiver.spans == [] and receiver.metric_names == set()


def _serve_one_request(serve, workspace, env) -> None:
    """A server with `env` answers one request of a two-scope stack (an op, then an EMIT), then stops."""
    srv = serve(workspace({"OPS/shop/100/a.txcl": 'EXEC "txco://noop"', "OPS/shop/200/b.txcl": "EMIT .b = 1"}), env=env)
    status, _, body = http_get(srv.url + "/go")
    assert status == 200 and json.loads(body)["b"] == 1
    srv.stop()


def test_a_request_the_sampler_leaves_out_makes_no_spans(serve, workspace, receiver):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50",
           "OTEL_TRACES_SAMPLER": "always_off", "OTEL_METRICS_EXPORTER": "none"}
    _serve_one_request(serve, workspace, env)
    time.sleep(0.2)
    assert receiver.spans == [] and receiver.metric_names == set()


def test_metrics_only_sends_metrics_and_makes_no_span(serve, workspace, receiver):
    """OTEL_TRACES_EXPORTER=none: the metrics reach the collector (flushed at shutdown), and no
    span is made at all; the walk keeps its plain path."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50",
           "OTEL_TRACES_EXPORTER": "none", "OTEL_METRIC_EXPORT_INTERVAL": "100000"}
    _serve_one_request(serve, workspace, env)
    deadline = time.monotonic() + 10
    while "txcl.requests" not in receiver.metric_names and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "txcl.requests" in receiver.metric_names  # sent by the flush at shutdown
    assert receiver.spans == []


def test_metrics_only_tracing_is_off_in_process():
    from txcl import metrics, otel

    try:
        found = otel.setup({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_TRACES_EXPORTER": "none"})
        assert isinstance(found, otel.MetricsOnly) and not otel.current.enabled
        assert metrics.current.enabled  # the request metrics are recorded for the exporter
        assert otel.setup({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_TRACES_EXPORTER": "none",
                           "OTEL_METRICS_EXPORTER": "none"}) is None
    finally:
        otel.shutdown()
        metrics.install(metrics.OFF)


def test_two_worker_processes_each_send_their_spans_while_serving_and_the_rest_at_shutdown(serve, workspace,
                                                                                           receiver):
    """`--workers 2`: each process sets up its own exporter and sends full batches from its own
    event loop while it serves; what is left is flushed when the server stops. Every request's
    three spans arrive once."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_METRICS_EXPORTER": "none",
           "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "30", "OTEL_BSP_SCHEDULE_DELAY": "3600000"}
    srv = serve(workspace({"OPS/shop/100/a.txcl": 'EXEC "txco://noop"', "OPS/shop/200/b.txcl": "EMIT .b = 1"}),
                "--workers", "2", env=env)
    for _ in range(60):
        assert http_get(srv.url + "/go")[0] == 200
    deadline = time.monotonic() + 10
    while len(receiver.spans) < 30 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(receiver.spans) >= 30  # full batches sent while serving (the delay is an hour)
    srv.stop()
    deadline = time.monotonic() + 10
    while len(receiver.spans) < 180 and time.monotonic() < deadline:
        time.sleep(0.05)
    requests = [s for s in receiver.spans if s["name"] == "txcl request"]
    assert len(requests) == 60 and len({s["attrs"]["txcl.request_id"] for s in requests}) == 60
    assert len(receiver.spans) == 180  # a scope span and an op span each, none twice
