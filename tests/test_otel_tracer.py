"""The tracer behind `txcl serve`'s OpenTelemetry spans, in both its forms: NativeTracing in
Python and, when txcl._native.otlp_c was built, CompiledTracing (the same spans made in C).
Both are driven through the same calls the server and the walk make, and what they queue is
decoded with the official protobuf definitions (opentelemetry-proto)."""

from __future__ import annotations

import os
import shutil
import time
import types

import pytest

pytest.importorskip("opentelemetry.proto")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from txcl import otel, otlp  # noqa: E402

COMPILED = otel._compiled_tracing()
KINDS = ["python", "compiled"]
ENV = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_METRICS_EXPORTER": "none",
       "OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100000",
       "OTEL_BSP_MAX_QUEUE_SIZE": "100000"}


def tracer(kind: str, monkeypatch, **env: str):
    """A tracer of `kind` as `otel.setup` makes it (the caller shuts it down). The tests
    install txcl where a C compiler is at hand, so the compiled one must be there; without a
    compiler, "compiled" is what setup falls back to: the Python tracer."""
    if kind == "compiled" and COMPILED is None:
        assert not (shutil.which("cc") or shutil.which("gcc")), "a C compiler is here but the tracer was not built"
    if kind == "python":
        monkeypatch.setattr(otel, "_compiled_tracing", lambda: None)
    tracing = otel.setup({**ENV, **env})
    compiled = kind == "compiled" and COMPILED is not None
    assert type(tracing).__name__ == ("CompiledTracing" if compiled else "NativeTracing")
    return tracing


def queued_spans(tracing) -> list:
    """The spans in the exporter's queue, decoded (and taken out of it)."""
    spans = list(tracing.exporter.spans)
    tracing.exporter.spans.clear()
    body = otlp.encode_traces({}, ("txcl", "0"), spans)
    return list(ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans)


def attrs(items) -> dict:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in items}


class _Budget:
    fuel_used = 7


def a_run(**fields):
    values = {"rid": "req_1", "run_id": None, "entry_stack": "shop", "stack": "shop/0200", "status": "completed",
              "budget": _Budget(), "trace_context": None, "traced": False, "trace_span": None}
    values.update(fields)
    return types.SimpleNamespace(**values)


def a_request(tracing, headers=(), run=None):
    """What a served request does: its span, the segment, a scope of local rules, a scope with
    an op (whose call carries traceparent), and the answer's status; the outgoing headers."""
    run = run or a_run()
    frame = types.SimpleNamespace(stack="shop", scope="0200")
    op = types.SimpleNamespace(stack="shop", name="copy", target=types.SimpleNamespace(
        target="https://api.example.com/x", url="https://api.example.com/x", kind="url"))
    outgoing: dict = {}
    with tracing.request(list(headers), "POST", "/", run.rid, False) as span:
        with tracing.segment(run, "request"):
            tracing.local_scope(run, "shop/0100", time.perf_counter())
            handle = tracing.open_scope(run)
            tracing.inject(outgoing)
            tracing.op(run, frame, op, "http", "ok", 1_700_000_000.0, 0.002, None, 10, 20)
            tracing.op(run, frame, op, "http", "error", 1_700_000_000.0, 0.001, "boom", None, None)
            tracing.close_scope(handle)
        span.set_attribute("http.response.status_code", 200)
    return outgoing


def shape(spans) -> list:
    """Each span without its ids and times: name, kind, parent's name, attributes, events,
    links and status."""
    by_id = {s.span_id: s for s in spans}
    out = []
    for s in spans:
        parent = by_id.get(s.parent_span_id)
        out.append((s.name, s.kind, parent.name if parent is not None else None,
                    attrs(s.attributes),
                    [(e.name, sorted(attrs(e.attributes))) for e in s.events],
                    [attrs(link.attributes) for link in s.links], (s.status.code, s.status.message)))
    return sorted(out, key=repr)


@pytest.mark.parametrize("kind", KINDS)
def test_a_served_request_makes_its_spans(kind, monkeypatch):
    tracing = tracer(kind, monkeypatch)
    try:
        outgoing = a_request(tracing)
        spans = queued_spans(tracing)
    finally:
        otel.shutdown()
    names = {s.name: s for s in spans}
    assert sorted(names) == ["txcl op copy", "txcl request", "txcl scope shop/0200"]
    request, scope = names["txcl request"], names["txcl scope shop/0200"]
    ops = [s for s in spans if s.name == "txcl op copy"]
    assert len({s.trace_id for s in spans}) == 1 and len(request.trace_id) == 16
    assert request.parent_span_id == b"" and scope.parent_span_id == request.span_id
    assert all(o.parent_span_id == scope.span_id for o in ops) and len({o.span_id for o in ops}) == 2
    assert attrs(request.attributes) == {
        "http.request.method": "POST", "url.path": "/", "txcl.request_id": "req_1", "txcl.stack": "shop",
        "txcl.segment": "request", "txcl.status": "completed", "txcl.fuel": 7, "http.response.status_code": 200}
    assert [e.name for e in request.events] == ["txcl scope shop/0100"]
    ok, failed = sorted(ops, key=lambda o: o.status.code)
    assert attrs(ok.attributes)["txcl.bytes_in"] == 10 and attrs(ok.attributes)["server.address"] == "api.example.com"
    assert (failed.status.code, failed.status.message) == (2, "boom") and "txcl.bytes_in" not in attrs(failed.attributes)
    assert ok.end_time_unix_nano - ok.start_time_unix_nano == 2_000_000
    # the op's call carried the scope's span as its parent
    assert outgoing["traceparent"] == f"00-{scope.trace_id.hex()}-{scope.span_id.hex()}-01"


def test_both_tracers_make_the_same_spans(monkeypatch):
    shapes = []
    for kind in ("compiled", "python"):  # (the python one patches the compiled one away)
        tracing = tracer(kind, monkeypatch)
        try:
            a_request(tracing)
            a_request(tracing, headers=[(b"traceparent", b"00-" + b"ab" * 16 + b"-" + b"cd" * 8 + b"-01")])
            resumed = a_run(rid="req_2", run_id="run_9", trace_context="00-" + "12" * 16 + "-" + "34" * 8 + "-01")
            with tracing.request([], "POST", "/_txc/callback/x", "req_3", True):
                with tracing.segment(resumed, "resume"):
                    pass
            shapes.append(shape(queued_spans(tracing)))
        finally:
            otel.shutdown()
    assert shapes[0] == shapes[1]


@pytest.mark.parametrize("kind", KINDS)
def test_an_incoming_traceparent_is_continued_and_a_resume_is_linked(kind, monkeypatch):
    tracing = tracer(kind, monkeypatch)
    try:
        a_request(tracing, headers=[(b"traceparent", b"00-" + b"ab" * 16 + b"-" + b"cd" * 8 + b"-01")])
        resumed = a_run(rid="req_2", run_id="run_9", trace_context="00-" + "12" * 16 + "-" + "34" * 8 + "-01")
        with tracing.request([(b"traceparent", b"00-" + b"56" * 16 + b"-" + b"78" * 8 + b"-01")], "POST",
                             "/_txc/callback/x", "req_3", True):
            with tracing.segment(resumed, "resume") as segment:
                assert resumed.traced is True and resumed.trace_span is segment
        spans = queued_spans(tracing)
    finally:
        otel.shutdown()
    request = next(s for s in spans if s.name == "txcl request")
    assert request.trace_id == bytes.fromhex("ab" * 16) and request.parent_span_id == bytes.fromhex("cd" * 8)
    segment = next(s for s in spans if s.name == "txcl segment")
    callback_span = next(s for s in spans if s.name == "txcl callback")
    assert segment.parent_span_id == b"" and segment.trace_id != callback_span.trace_id  # a new root
    links = {attrs(link.attributes)["txcl.link"]: link for link in segment.links}
    assert links["parked"].trace_id == bytes.fromhex("12" * 16) and links["parked"].span_id == bytes.fromhex("34" * 8)
    assert links["released_by"].span_id == callback_span.span_id
    assert attrs(callback_span.links[0].attributes) == {"txcl.link": "worker"}
    assert callback_span.links[0].trace_id == bytes.fromhex("56" * 16)


@pytest.mark.parametrize("kind", KINDS)
def test_a_request_the_sampler_leaves_out_queues_nothing(kind, monkeypatch):
    tracing = tracer(kind, monkeypatch, OTEL_TRACES_SAMPLER="parentbased_always_off")
    try:
        run = a_run()
        a_request(tracing, run=run)
        assert run.traced is False and list(tracing.exporter.spans) == []
        # a caller that sampled its trace in is followed (parent-based)
        a_request(tracing, headers=[(b"traceparent", b"00-" + b"ab" * 16 + b"-" + b"cd" * 8 + b"-01")])
        assert len(queued_spans(tracing)) == 4
    finally:
        otel.shutdown()


@pytest.mark.parametrize("kind", KINDS)
def test_a_full_queue_drops_spans_and_counts_them(kind, monkeypatch):
    tracing = tracer(kind, monkeypatch, OTEL_BSP_MAX_QUEUE_SIZE="3", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="100")
    try:
        a_request(tracing)  # four spans: the last finds the queue full
        assert len(tracing.exporter.spans) == 3 and tracing.exporter.dropped == 1
    finally:
        tracing.exporter.spans.clear()
        otel.shutdown()


def test_a_forked_worker_makes_other_ids_than_its_parent(monkeypatch):
    """`txcl serve --workers` forks: the compiled tracer's generator is reseeded in the child
    (the Python one's `random` reseeds itself), so the two processes' next spans differ
    (without it they would repeat each other)."""
    tracing = tracer("compiled", monkeypatch)
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its next trace id, to the parent
            try:
                with tracing.request([], "GET", "/", "r", False) as span:
                    os.write(write, span.traceparent().encode())
            finally:
                os._exit(0)
        os.close(write)
        child = os.read(read, 200).decode()
        os.waitpid(pid, 0)
        with tracing.request([], "GET", "/", "r", False) as span:
            mine = span.traceparent()
        assert child.startswith("00-") and child[3:35] != mine[3:35]
    finally:
        tracing.exporter.spans.clear()
        otel.shutdown()
