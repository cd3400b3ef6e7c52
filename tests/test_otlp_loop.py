"""The OTLP exporter on a server's event loop, and the compiled span encoder.

- Attached to a running loop (as `txcl serve` attaches it), the exporter encodes spans as they
  end and sends full batches from the loop over one kept-open connection to a real HTTP/1.1
  collector: a batch the collector's closed connection would have lost is resent on a new
  one, a collector that is down costs a warning and never an exception, partial batches go
  out on the schedule delay, and what is left at shutdown is flushed.
- `txcl._native.otlp_c` writes exactly the bytes of the Python encoder, for every kind of span.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time

import pytest

pytest.importorskip("opentelemetry.proto")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from testtools import start_http_server  # noqa: E402
from txcl import otlp  # noqa: E402
from txcl.otlp import Exporter, Fixed  # noqa: E402


class Collector:
    """An OTLP/HTTP receiver keeping, for each batch, (client port, span names)."""

    def __init__(self, close_after: bool = False) -> None:
        from http.server import BaseHTTPRequestHandler

        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                spans = ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans
                seen.append((self.client_address[1], [s.name for s in spans]))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                if close_after:
                    self.send_header("Connection", "close")
                self.end_headers()

        self.server, self.url = start_http_server(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _span(i: int) -> tuple:
    return (7, i + 1, None, f"s{i}", 1, 1_000, 2_000, {"txcl.request_id": f"r{i}"}, None, None, None)


async def _until(predicate, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def test_full_batches_go_from_the_loop_over_one_kept_connection_and_survive_a_closed_one():
    collector = Collector()
    exporter = Exporter({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "3",
                         "OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_METRICS_EXPORTER": "none"})

    async def main():
        exporter.attach(asyncio.get_running_loop())
        for i in range(6):
            exporter.add(_span(i))
        await _until(lambda: len(collector.seen) == 2)
        assert [names for _, names in collector.seen] == [["s0", "s1", "s2"], ["s3", "s4", "s5"]]
        assert collector.seen[0][0] == collector.seen[1][0]  # one connection, kept open
        exporter._stream[1].get_extra_info("socket").shutdown(socket.SHUT_RDWR)  # the collector closed it
        for i in range(6, 9):
            exporter.add(_span(i))
        await _until(lambda: len(collector.seen) == 3)
        assert collector.seen[2][1] == ["s6", "s7", "s8"] and collector.seen[2][0] != collector.seen[0][0]
        await exporter.detach()
        assert exporter._stream is None

    try:
        asyncio.run(main())
        assert not exporter.spans
    finally:
        exporter.shutdown()
        collector.close()


def test_a_collector_that_closes_after_each_answer_gets_every_batch():
    collector = Collector(close_after=True)
    exporter = Exporter({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "2",
                         "OTEL_BSP_SCHEDULE_DELAY": "3600000"})

    async def main():
        exporter.attach(asyncio.get_running_loop())
        for i in range(6):
            exporter.add(_span(i))
            await asyncio.sleep(0)
        await _until(lambda: len(collector.seen) == 3)
        await exporter.detach()

    try:
        asyncio.run(main())
        assert [names for _, names in collector.seen] == [["s0", "s1"], ["s2", "s3"], ["s4", "s5"]]
        assert len({port for port, _ in collector.seen}) == 3  # a new connection each time, as asked
    finally:
        exporter.shutdown()
        collector.close()


def test_a_partial_batch_goes_on_the_schedule_delay_and_the_rest_at_shutdown():
    collector = Collector()
    exporter = Exporter({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100",
                         "OTEL_BSP_SCHEDULE_DELAY": "50"})

    async def main():
        exporter.attach(asyncio.get_running_loop())
        exporter.add(_span(0))
        await _until(lambda: len(collector.seen) == 1)  # not full: sent after the delay
        await exporter.detach()
        exporter.add(_span(1))  # after the loop let go: left for shutdown

    try:
        asyncio.run(main())
        assert [names for _, names in collector.seen] == [["s0"]]
    finally:
        exporter.shutdown()
        collector.close()
    assert [names for _, names in collector.seen] == [["s0"], ["s1"]]


def test_a_collector_that_is_down_costs_a_warning_and_the_loop_goes_on(caplog):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    exporter = Exporter({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                         "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "2", "OTEL_BSP_SCHEDULE_DELAY": "3600000"})

    async def main():
        exporter.attach(asyncio.get_running_loop())
        for i in range(2):
            exporter.add(_span(i))
        await _until(lambda: not exporter.spans and exporter._posting is not None and exporter._posting.done())
        assert exporter._posting.exception() is None
        await exporter.detach()
        return "still running"

    try:
        with caplog.at_level(logging.WARNING, logger="txcl.otel"):
            assert asyncio.run(main()) == "still running"
        assert f"cannot reach the collector at http://127.0.0.1:{port}/v1/traces" in caplog.text
    finally:
        exporter.shutdown()


# ---------------------------------------------------------------------- the compiled encoder

_COMPILED = otlp._COMPILED


def _random_value(rng: random.Random):
    kind = rng.randrange(8)
    if kind == 0:
        return rng.choice([True, False])
    if kind == 1:
        return rng.randrange(-2**63, 2**64)  # every 64-bit int, both signs
    if kind == 2:
        return rng.choice([0, 1, 127, 128, 16383, 16384, -1, 2**70, -2**70])  # and past 64 bits
    if kind == 3:
        return rng.uniform(-1e9, 1e9)
    if kind == 4:
        return "".join(rng.choice("aé€😀\n\"") for _ in range(rng.randrange(0, 300)))
    if kind == 5:
        return ["a", 1]  # anything else: as its text
    if kind == 6:
        return None
    return "x" * rng.choice([0, 1, 127, 128, 20000])


def _random_attrs(rng: random.Random) -> dict:
    return {f"k{i}.{rng.randrange(1000)}": _random_value(rng) for i in range(rng.randrange(0, 9))}


def _random_span(rng: random.Random) -> tuple:
    def an_id(size):
        return rng.randrange(1, 2 ** (8 * size)) if rng.random() < 0.7 else rng.randbytes(size)

    attrs = _random_attrs(rng) if rng.random() < 0.5 else (Fixed(_random_attrs(rng)), _random_attrs(rng))
    events = None
    if rng.random() < 0.6:
        events = [(rng.randrange(2**63), "shop", rng.randrange(0, 10**12)) if rng.random() < 0.5
                  else (rng.randrange(2**63), "an event é", _random_attrs(rng)) for _ in range(rng.randrange(4))]
    links = [(an_id(16), an_id(8), _random_attrs(rng)) for _ in range(rng.randrange(3))] or None
    status = rng.choice([None, (2, "op failed: é"), (2, ""), (1, None)])
    return (an_id(16), an_id(8), an_id(8) if rng.random() < 0.5 else None, rng.choice(["txcl op é", "s", "n" * 200]),
            rng.choice([1, 2, 3]), rng.randrange(2**63), rng.randrange(2**63), attrs, links, status, events)


@pytest.mark.skipif(_COMPILED is None, reason="txcl._native.otlp_c was not built (no C compiler at install)")
def test_the_compiled_encoder_writes_the_python_encoders_bytes():
    rng = random.Random(48)
    spans = [_random_span(rng) for _ in range(400)]
    resource = {"service.name": "txcl-test", "n": 3}
    for span in spans:
        assert _COMPILED.encode_span(span) == otlp.python_encode_span(span), span
    expected = otlp.python_encode_traces(resource, ("txcl", "1.0"), spans)
    assert _COMPILED.encode_traces(resource, ("txcl", "1.0"), spans) == expected
    # spans encoded as they ended (what the exporter queues) make the same request
    mixed = [_COMPILED.encode_span(s) if i % 2 else s for i, s in enumerate(spans)]
    assert _COMPILED.encode_traces(resource, ("txcl", "1.0"), mixed) == expected
    assert otlp.python_encode_traces(resource, ("txcl", "1.0"), mixed) == expected
    decoded = ExportTraceServiceRequest.FromString(expected).resource_spans[0].scope_spans[0].spans
    assert len(decoded) == 400 and decoded[0].name == spans[0][3]


@pytest.mark.skipif(_COMPILED is None, reason="txcl._native.otlp_c was not built (no C compiler at install)")
def test_the_compiled_encoder_refuses_what_the_python_encoder_refuses():
    bad = (1, 2, None, "s", 1, 1, 2, {"k": "\ud800"}, None, None, None)  # a lone surrogate: no UTF-8
    with pytest.raises(UnicodeEncodeError):
        otlp.python_encode_span(bad)
    with pytest.raises(UnicodeEncodeError):
        _COMPILED.encode_span(bad)


def test_a_compiled_encoder_built_from_another_source_is_not_used(tmp_path, monkeypatch):
    """An edited otlp_c.pyx is not shadowed by an old build: the digest must match."""
    import types

    from txcl.syntax import compiled

    stale = types.ModuleType("txcl._native.otlp_c")
    stale.__file__ = str(tmp_path / "otlp_c.so")
    stale.__txcl_source_sha256__ = "0" * 64
    (tmp_path / "otlp_c.pyx").write_text("# the source as edited\n")
    monkeypatch.setitem(__import__("sys").modules, "txcl._native.otlp_c", stale)
    monkeypatch.delenv("TXCL_PURE_PYTHON", raising=False)
    assert compiled.native("txcl._native.otlp_c", "otlp_c.pyx") is None
    assert compiled.status["txcl._native.otlp_c"] == "built from another version of the source"
    stale.__txcl_source_sha256__ = compiled.source_digest(tmp_path / "otlp_c.pyx")
    assert compiled.native("txcl._native.otlp_c", "otlp_c.pyx") is stale
    monkeypatch.setenv("TXCL_PURE_PYTHON", "1")
    assert compiled.native("txcl._native.otlp_c", "otlp_c.pyx") is None


def test_an_ops_bytes_are_measured_once_for_its_span_and_its_trace_row(tmp_path, monkeypatch):
    """With txcl's own trace and OpenTelemetry both on, the op's input and output are sized
    once (a JSON encoding each), and the span and the trace row say the same sizes."""
    from txcl import otel
    from txcl.ops.tree import load_ops
    from txcl.runtime import walker
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Interpreter

    (tmp_path / "OPS/shop/100").mkdir(parents=True)
    (tmp_path / "OPS/shop/100/copy.txcl").write_text('WITH from = "order.id", to = "copied"\nEXEC "txco://copy"\n')
    sized: list = []
    real = walker._json_size
    monkeypatch.setattr(walker, "_json_size", lambda value: sized.append(value) or real(value))
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    tracing = otel.setup({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_METRICS_EXPORTER": "none",
                          "OTEL_BSP_SCHEDULE_DELAY": "3600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1000"})
    records: list = []
    try:
        interp = Interpreter(load_ops(tmp_path / "OPS"), settings=Settings(trace_mode="summary"),
                             trace_sink=records.append)
        with tracing.request([], "GET", "/", "r1", False):
            interp.run_sync({"order": {"id": 42}}, "shop")
        queued = list(tracing.exporter.spans)  # (the tracer's tuples, or spans encoded already)
        tracing.exporter.spans.clear()
    finally:
        otel.shutdown()
    assert len(sized) == 2  # the input and the output, once each
    spans = ExportTraceServiceRequest.FromString(otlp.encode_traces({}, ("txcl", "0"), queued)) \
        .resource_spans[0].scope_spans[0].spans
    (op_span,) = [s for s in spans if s.name == "txcl op copy"]
    own = {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in op_span.attributes}
    (row,) = records[0].steps
    assert row["status"] == "ok"
    assert own["txcl.bytes_in"] == row["input_bytes"] == real(sized[0]) > 0
    assert own["txcl.bytes_out"] == row["output_bytes"] == real(sized[1]) > 0


def test_a_loop_closed_without_detach_hands_the_spans_back_to_the_thread():
    """Adding a span never raises into the request path: when the loop it was attached to is
    gone, the next full batch wakes the exporter thread, which sends it."""
    collector = Collector()
    exporter = Exporter({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "2",
                         "OTEL_BSP_SCHEDULE_DELAY": "3600000"})

    async def main():
        exporter.attach(asyncio.get_running_loop())

    try:
        asyncio.run(main())  # the loop closes, still attached
        exporter.add(_span(0))
        exporter.add(_span(1))  # a full batch: no exception, and the thread sends it
        assert exporter._loop is None
        for _ in range(500):
            if collector.seen:
                break
            time.sleep(0.01)
        assert [names for _, names in collector.seen] == [["s0", "s1"]]
    finally:
        exporter.shutdown()
        collector.close()
