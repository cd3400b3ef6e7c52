"""txcl's own OTLP/HTTP exporter: spans and metrics encoded as OTLP protobuf by hand and sent in
batches — from a server's event loop (spans, with h11), or by one background thread.

Why not the OpenTelemetry SDK: a served request costs txcl about 200 µs of CPU, and the SDK
spends 25–40 µs to make and export one span — five spans a request would cost more than the
request itself. Here a span is recorded as a tuple and encoded as it ends, by the compiled
encoder (txcl._native.otlp_c, well under a microsecond a span) when it was built, else later
in Python (a few microseconds each). The wire format is the same OTLP any collector
reads (the tests decode it with `opentelemetry-proto`); the configuration is the same `OTEL_*`
environment variables (endpoint, headers, timeout, batch delay and size, queue size, sampler).

Only what txcl sends is encoded: spans with attributes, links, events and status; cumulative
sums, gauges and explicit-bucket histograms.
"""

from __future__ import annotations

import asyncio
import http.client
import logging
import ssl
import struct
import threading
import time
import urllib.parse
from bisect import bisect_left
from collections import deque
from typing import Any, Iterable

import h11  # (the HTTP/1.1 protocol library under uvicorn and httpx)

log = logging.getLogger("txcl.otel")

# ---------------------------------------------------------------------- protobuf, by hand


_SMALL = [bytes((i,)) for i in range(128)]


def _varint(n: int) -> bytes:
    if 0 <= n < 128:
        return _SMALL[n]
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint((field << 3) | wire)


_LEN_TAGS = [_tag(field, 2) for field in range(16)]


def _len(field: int, data: bytes) -> bytes:
    n = len(data)
    return _LEN_TAGS[field] + (_SMALL[n] if n < 128 else _varint(n)) + data


def _fixed64(field: int, n: int) -> bytes:
    return _tag(field, 1) + struct.pack("<Q", n)


def _double(field: int, x: float) -> bytes:
    return _tag(field, 1) + struct.pack("<d", x)


def _any(value: Any) -> bytes:
    if isinstance(value, bool):
        return _tag(2, 0) + (b"\x01" if value else b"\x00")
    if isinstance(value, int) and -(1 << 63) <= value < (1 << 64):  # (a larger one: as text)
        return _tag(3, 0) + _varint(value)
    if isinstance(value, float):
        return _double(4, value)
    return _len(1, str(value).encode("utf-8"))


_KEYS: dict[str, bytes] = {}
# (field, key, type, value) -> its encoding (True == 1, but not on the wire); values that
# differ on every request (ids, paths) are not kept: they would fill it with what never recurs
_PAIRS: dict[tuple, bytes] = {}
_UNIQUE_KEYS = frozenset({"txcl.request_id", "txcl.run_id"})


def _attributes(field: int, attrs: dict[str, Any]) -> bytes:
    out = []
    pairs = _PAIRS
    tag = _LEN_TAGS[field]
    for key, value in attrs.items():
        kind = type(value)
        if kind is str and key in _UNIQUE_KEYS:  # a request id: never again, so never kept
            prefix = _KEYS.get(key)
            if prefix is None:
                prefix = _KEYS[key] = _len(1, key.encode("utf-8"))
            data = value.encode("utf-8")
            n = len(data)
            if len(prefix) + n + 4 < 128:  # the common case: every length one byte
                out += (tag, _SMALL[len(prefix) + n + 4], prefix, b"\x12", _SMALL[n + 2], b"\x0a", _SMALL[n], data)
            else:
                out.append(_len(field, prefix + _len(2, _len(1, data))))
            continue
        cacheable = ((kind is str and len(value) <= 64) or (kind is int and -1 < value < 65536)
                     or kind is bool or kind is float)  # (anything else is written as its text)
        if cacheable:
            found = pairs.get((field, key, kind, value))
            if found is not None:
                out.append(found)
                continue
        prefix = _KEYS.get(key)
        if prefix is None:
            prefix = _KEYS[key] = _len(1, key.encode("utf-8"))
        encoded = _len(field, prefix + _len(2, _any(value)))
        if cacheable and len(pairs) < 16384:
            pairs[(field, key, kind, value)] = encoded
        out.append(encoded)
    return b"".join(out)


class Fixed(dict):
    """Span attributes that are the same on every span made with this object (a rule's stack,
    scope, op and transport): the tracer makes one per rule and reuses it, and the exporter
    encodes it once (kept by identity)."""

    __slots__ = ("encoded",)


def _span_attributes(attrs: Any) -> bytes:
    """A span's attributes: a dict, or (a `Fixed`, a dict of the values of this span)."""
    if type(attrs) is dict:
        return _attributes(9, attrs)
    fixed, own = attrs
    try:
        head = fixed.encoded
    except AttributeError:
        head = fixed.encoded = _attributes(9, fixed)
    return head + _attributes(9, own) if own else head


_pack_q = struct.Struct("<Q").pack
_TRACE_ID, _SPAN_ID, _PARENT_ID = b"\x0a\x10", b"\x12\x08", b"\x22\x08"  # fields 1, 2, 4: 16 and 8 bytes
_KIND, _START, _END = _tag(6, 0), _tag(7, 1), _tag(8, 1)
_NAMES: dict[str, bytes] = {}


def _id(value: int | bytes, size: int) -> bytes:
    """A trace (16) or span (8) id: the tracer keeps them as ints."""
    return value if type(value) is bytes else value.to_bytes(size, "big")


_SCOPE_EVENTS: dict[str, bytes] = {}  # stack -> its event's name and txcl.stack attribute, encoded
_TIME = _tag(1, 1)
_DURATION_KEY = _len(1, b"txcl.duration_us") + _tag(2, 2)


def _scope_event(when: int, stack: str, duration_ns: int) -> bytes:
    """The event a scope of local rules becomes: named ``txcl scope <stack>``, with
    ``txcl.stack`` and ``txcl.duration_us``."""
    head = _SCOPE_EVENTS.get(stack)
    if head is None:
        head = _len(2, f"txcl scope {stack}".encode("utf-8")) + _attributes(3, {"txcl.stack": stack})
        if len(_SCOPE_EVENTS) < 4096:
            _SCOPE_EVENTS[stack] = head
    value = _varint(duration_ns // 1000)  # int_value (field 3) of an AnyValue
    pair = _DURATION_KEY + _SMALL[len(value) + 1] + b"\x18" + value  # key, then value (field 2)
    event = _TIME + _pack_q(when) + head + _LEN_TAGS[3] + _SMALL[len(pair)] + pair
    return _LEN_TAGS[11] + _varint(len(event)) + event


def python_encode_span(span: tuple) -> bytes:
    """One Span message, from the tracer's tuple (trace id, span id, parent id or None, name,
    kind, start and end in ns, attributes, links, status, events), encoded in Python."""
    trace_id, span_id, parent, name, kind, start, end, attrs, links, status, events = span
    named = _NAMES.get(name)
    if named is None:
        named = _len(5, name.encode("utf-8"))
        if len(_NAMES) < 4096:
            _NAMES[name] = named
    out = [_TRACE_ID, _id(trace_id, 16), _SPAN_ID, _id(span_id, 8)]
    if parent:
        out += (_PARENT_ID, _id(parent, 8))
    out += (named, _KIND, _SMALL[kind], _START, _pack_q(start), _END, _pack_q(end), _span_attributes(attrs))
    for when, event_name, event_attrs in events or ():
        if type(event_attrs) is int:  # a scope of local rules: (when, its stack, its duration in ns)
            out.append(_scope_event(when, event_name, event_attrs))
            continue
        out.append(_len(11, _fixed64(1, when) + _len(2, event_name.encode("utf-8")) + _attributes(3, event_attrs)))
    for link_trace, link_span, link_attrs in links or ():
        out.append(_len(13, _len(1, _id(link_trace, 16)) + _len(2, _id(link_span, 8)) + _attributes(4, link_attrs)))
    if status is not None:
        code, message = status
        out.append(_len(15, (_len(2, message.encode("utf-8")) if message else b"") + _tag(3, 0) + _varint(code)))
    return b"".join(out)


def _scope(name: str, version: str) -> bytes:
    return _len(1, name.encode("utf-8")) + _len(2, version.encode("utf-8"))


def python_encode_traces(resource: dict[str, Any], scope: tuple[str, str], spans: Iterable[tuple]) -> bytes:
    """An ExportTraceServiceRequest, encoded in Python."""
    body = b"".join([_len(2, s if type(s) is bytes else python_encode_span(s)) for s in spans])
    scope_spans = _len(1, _scope(*scope)) + body
    return _len(1, _len(1, _attributes(1, resource)) + _len(2, scope_spans))


def _compiled_encoder() -> Any:
    """`txcl._native.otlp_c` (the same bytes, written in C) when it was built from the `otlp_c.pyx`
    beside this file; else None."""
    from txcl.syntax.compiled import native

    module = native("txcl._native.otlp_c", "otlp_c.pyx")
    if module is not None:
        module.bind(Fixed)
    return module


_COMPILED = _compiled_encoder()
# An ExportTraceServiceRequest of `spans` (the tracer's tuples, or spans `encode_span` encoded
# already): compiled when it can be
encode_traces = _COMPILED.encode_traces if _COMPILED is not None else python_encode_traces
encode_span = _COMPILED.encode_span if _COMPILED is not None else python_encode_span


def _number_point(attrs: dict[str, Any], start: int, now: int, value: float) -> bytes:
    return _attributes(7, attrs) + _fixed64(2, start) + _fixed64(3, now) + _double(4, float(value))


def _histogram_point(attrs: dict[str, Any], start: int, now: int, counts: list[int], total: float,
                     bounds: tuple[float, ...]) -> bytes:
    packed_counts = struct.pack(f"<{len(counts)}Q", *counts)
    packed_bounds = struct.pack(f"<{len(bounds)}d", *bounds)
    return (_attributes(9, attrs) + _fixed64(2, start) + _fixed64(3, now) + _fixed64(4, sum(counts))
            + _double(5, total) + _len(6, packed_counts) + _len(7, packed_bounds))


def encode_metrics(resource: dict[str, Any], scope: tuple[str, str], metrics: Iterable[tuple]) -> bytes:
    """An ExportMetricsServiceRequest. Each metric: (name, description, unit, kind, points) with
    kind "sum" (points: (attrs, value)), "gauge" (same) or "histogram" (points: (attrs, counts,
    total, bounds)); times: `start` (when the process began counting) and now."""
    start, now = _PROCESS_START_NS, time.time_ns()
    encoded = bytearray()
    for name, description, unit, kind, points in metrics:
        if kind == "histogram":
            data = b"".join(_len(1, _histogram_point(a, start, now, c, t, b)) for a, c, t, b in points)
            body = _len(9, data + _tag(2, 0) + _varint(2))  # cumulative
        elif kind == "sum":
            data = b"".join(_len(1, _number_point(a, start, now, v)) for a, v in points)
            body = _len(7, data + _tag(2, 0) + _varint(2) + _tag(3, 0) + b"\x01")  # cumulative, monotonic
        else:
            data = b"".join(_len(1, _number_point(a, start, now, v)) for a, v in points)
            body = _len(5, data)
        encoded += _len(2, _len(1, name.encode()) + _len(2, description.encode()) + _len(3, unit.encode()) + body)
    scope_metrics = _len(1, _scope(*scope)) + bytes(encoded)
    return _len(1, _len(1, _attributes(1, resource)) + _len(2, scope_metrics))


_PROCESS_START_NS = time.time_ns()


# ---------------------------------------------------------------------- configuration

def _env_float(env: Any, name: str, default: float) -> float:
    try:
        return float(env.get(name, default))
    except (TypeError, ValueError):
        return default


def endpoint(env: Any, signal: str) -> str | None:
    """The URL to POST `signal` ("traces" or "metrics") to, from the OTEL_* variables."""
    specific = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if specific:
        return specific
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not base:
        return None
    return base.rstrip("/") + f"/v1/{signal}"


def headers(env: Any, signal: str) -> dict[str, str]:
    """OTEL_EXPORTER_OTLP_HEADERS (and the signal's own): `key=value` pairs, comma-separated,
    URL-encoded."""
    out = {}
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", f"OTEL_EXPORTER_OTLP_{signal.upper()}_HEADERS"):
        for part in str(env.get(name, "")).split(","):
            if "=" in part:
                key, value = part.split("=", 1)
                out[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    return out


def resource_attributes(env: Any) -> dict[str, Any]:
    from txcl import __version__

    attrs: dict[str, Any] = {"telemetry.sdk.name": "txcl", "telemetry.sdk.language": "python",
                             "telemetry.sdk.version": __version__}
    for part in str(env.get("OTEL_RESOURCE_ATTRIBUTES", "")).split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            attrs[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    attrs["service.name"] = env.get("OTEL_SERVICE_NAME") or attrs.get("service.name") or "txcl"
    return attrs


_LOW64 = (1 << 64) - 1


class Sampler:
    """OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG: always_on, always_off, traceidratio and
    their parentbased_ forms (the default: parentbased_always_on)."""

    def __init__(self, env: Any) -> None:
        name = str(env.get("OTEL_TRACES_SAMPLER", "parentbased_always_on")).strip().lower()
        self.parent_based = name.startswith("parentbased_")
        base = name.removeprefix("parentbased_")
        ratio = 1.0 if base == "always_on" else 0.0 if base == "always_off" else \
            min(1.0, max(0.0, _env_float(env, "OTEL_TRACES_SAMPLER_ARG", 1.0)))
        if base not in ("always_on", "always_off", "traceidratio"):
            log.warning("txcl: OTEL_TRACES_SAMPLER=%s is not one txcl knows; sampling every trace", name)
            ratio = 1.0
        self.bound = int(ratio * (1 << 64))

    def sample(self, trace_id: int | bytes, parent_sampled: bool | None) -> bool:
        """Whether a trace is recorded (`trace_id`: as an int, or its 16 bytes)."""
        if parent_sampled is not None and self.parent_based:
            return parent_sampled
        low = int.from_bytes(trace_id[8:], "big") if type(trace_id) is bytes else trace_id & _LOW64
        return low < self.bound


# ---------------------------------------------------------------------- the exporter thread

class Exporter:
    """Spans queued by the request path, encoded and POSTed in batches by one thread; metrics
    read from `collect()` every interval. Never raises into the caller: a collector that is
    down costs a warning (once a minute) and the batch."""

    def __init__(self, env: Any, collect_metrics: Any = None) -> None:
        self.env = env
        self.resource = resource_attributes(env)
        from txcl import __version__

        self.scope = ("txcl", __version__)
        self.traces_url = endpoint(env, "traces") if str(env.get("OTEL_TRACES_EXPORTER", "otlp")).lower() != "none" \
            else None
        self.metrics_url = endpoint(env, "metrics") if collect_metrics is not None else None
        self.collect_metrics = collect_metrics
        self.trace_headers = {"Content-Type": "application/x-protobuf", **headers(env, "traces")}
        self.metric_headers = {"Content-Type": "application/x-protobuf", **headers(env, "metrics")}
        self.timeout = _env_float(env, "OTEL_EXPORTER_OTLP_TIMEOUT", 10_000) / 1000.0
        self.delay = _env_float(env, "OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000.0
        self.batch = int(_env_float(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512))
        self.queue_max = int(_env_float(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048))
        self.metric_interval = _env_float(env, "OTEL_METRIC_EXPORT_INTERVAL", 60_000) / 1000.0
        self.spans: deque = deque()
        self.dropped = 0  # spans that found the queue full
        self._reported_dropped = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._last_warning = 0.0
        self._connections: dict[tuple, http.client.HTTPConnection] = {}  # only the exporter thread uses them
        self._loop: Any = None  # the server's event loop, when spans are sent from it (`attach`)
        self._timer: Any = None
        self._posting: Any = None  # the loop's task sending batches
        self._stream: Any = None  # the loop's connection: (reader, writer, h11 connection, URL parts)
        self._thread = threading.Thread(target=self._run, name="txcl-otlp", daemon=True)
        self._thread.start()

    def add(self, span: tuple) -> None:
        """Queue one finished span (the request path: a deque append)."""
        if len(self.spans) >= self.queue_max:
            self.dropped += 1
            return
        # compiled, a span is encoded at once, while its objects are still in the CPU's cache
        # (later, a batch of them costs several times as much to read) and freed
        self.spans.append(_COMPILED.encode_span(span) if _COMPILED is not None else span)
        if len(self.spans) == self.batch:  # once per batch: waking the sender takes a lock
            self.batch_full()

    def batch_full(self) -> None:
        """A batch's worth of spans is queued: have it sent (from the server's loop, or the
        thread). The compiled tracer queues encoded spans itself and calls this."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._post_on_loop, False)
                return
            except RuntimeError:  # the loop was closed without `detach`: the thread takes over
                self._loop = None
        self._wake.set()

    # ---------------------------------------------------------------- on the server's loop
    # A server's event loop is busy with requests all the time: a thread that encodes and
    # sends beside it has to win the interpreter lock back after every system call it makes,
    # and those hand-overs cost both threads more CPU than the work itself (measured: ~20 µs
    # a request for the thread, and as much again on the loop). A server therefore sends its
    # spans from its own loop: a full batch (encoded already, span by span, when compiled) is
    # POSTed without blocking, with h11 over an asyncio stream; the thread keeps the metrics.

    def attach(self, loop: Any) -> None:
        """Send spans from `loop` (the running server's) from now on."""
        if self.traces_url is None or self._loop is not None:
            return
        self._loop = loop
        self._timer = loop.call_later(self.delay, self._tick)

    def _tick(self) -> None:
        if self._loop is None:
            return
        self._post_on_loop(True)
        self._timer = self._loop.call_later(self.delay, self._tick)

    def _post_on_loop(self, partial: bool) -> None:
        """Start sending the full batches (`partial`: and what is queued) unless a send is on."""
        loop = self._loop
        if loop is None or (self._posting is not None and not self._posting.done()):
            return
        if len(self.spans) >= self.batch or (partial and self.spans):
            self._posting = loop.create_task(self._post_batches(partial))

    async def _post_batches(self, partial: bool) -> None:
        while self._loop is not None and (len(self.spans) >= self.batch or (partial and self.spans)):
            body = encode_traces(self.resource, self.scope, self._take_batch())
            await self._apost(self.traces_url, self.trace_headers, body)
            partial = False  # (what came in meanwhile waits for its batch, or the next tick)

    async def _apost(self, url: str, headers: dict[str, str], body: bytes) -> None:
        """POST one batch from the loop, on a connection kept open between batches (one the
        collector has closed meanwhile is replaced once; a failure costs the batch and a
        warning)."""
        for attempt in (1, 2):
            reused = self._stream is not None
            try:
                status = await asyncio.wait_for(self._stream_post(url, headers, body), self.timeout)
            except (OSError, TimeoutError, ValueError, h11.ProtocolError) as exc:  # (ValueError: a bad port)
                await self._close_stream()
                if reused and attempt == 1:
                    continue
                self._warn(f"cannot reach the collector at {url}: {exc or type(exc).__name__}")
                return
            if status >= 300:
                self._warn(f"the collector at {url} answered {status}")
            return

    async def _stream_post(self, url: str, headers: dict[str, str], body: bytes) -> int:
        """One request and its answer with h11 over an asyncio stream: about a tenth of an
        HTTP client's cost, which matters here since this runs on the server's loop."""
        if self._stream is None:
            parts = urllib.parse.urlsplit(url)
            https = parts.scheme == "https"
            reader, writer = await asyncio.open_connection(
                parts.hostname, parts.port or (443 if https else 80),
                ssl=ssl.create_default_context() if https else None)
            self._stream = (reader, writer, h11.Connection(h11.CLIENT), parts)
        reader, writer, conn, parts = self._stream
        host = parts.netloc.rsplit("@", 1)[-1]
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        writer.write(conn.send(h11.Request(method="POST", target=target, headers=[
            ("Host", host), ("Content-Length", str(len(body))), *headers.items()])))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        status = 0
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data and conn.their_state is not h11.DONE:
                    raise ConnectionResetError("the collector closed the connection")
            elif type(event) is h11.Response:
                status = event.status_code
            elif type(event) is h11.EndOfMessage or type(event) is h11.ConnectionClosed:
                break
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:  # the collector closes the connection after its answer
            await self._close_stream()
        return status

    async def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()
            try:
                await stream[1].wait_closed()
            except (OSError, asyncio.CancelledError):
                pass

    async def detach(self) -> None:
        """Stop sending from the loop: the send in progress finishes, the rest is left to
        `shutdown` (or the thread)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        posting = self._posting
        if posting is not None and not posting.done():
            try:
                await asyncio.wait_for(asyncio.shield(posting), self.timeout + 1)
            except (TimeoutError, asyncio.CancelledError):
                posting.cancel()
        await self._close_stream()

    def _take_batch(self) -> list[tuple]:
        batch = []
        spans = self.spans
        while spans and len(batch) < self.batch:
            batch.append(spans.popleft())
        return batch

    def _run(self) -> None:
        next_metrics = time.monotonic() + self.metric_interval
        while not self._stop.is_set():
            self._wake.wait(min(self.delay, max(0.0, next_metrics - time.monotonic())))
            self._wake.clear()
            if self._loop is None:  # (a server's loop sends its spans itself)
                self._flush_spans()
            self._report_dropped()
            if self.metrics_url and time.monotonic() >= next_metrics:
                self._flush_metrics()
                next_metrics = time.monotonic() + self.metric_interval

    def _flush_spans(self) -> None:
        while self.spans and self.traces_url:
            self._post(self.traces_url, self.trace_headers, encode_traces(self.resource, self.scope, self._take_batch()))
        if not self.traces_url:
            self.spans.clear()

    def _report_dropped(self) -> None:
        """Spans that found the queue full are lost, as the OpenTelemetry SDK loses them: say
        so (at most once a minute), with the setting that makes the queue longer."""
        dropped = self.dropped
        if dropped > self._reported_dropped and self._warn(
                f"{dropped - self._reported_dropped} span(s) dropped: the export queue was full "
                f"(OTEL_BSP_MAX_QUEUE_SIZE={self.queue_max}; sample fewer traces, or make the queue longer)"):
            self._reported_dropped = dropped

    def _flush_metrics(self) -> None:
        try:
            metrics = self.collect_metrics()
        except Exception:  # noqa: BLE001 - a metric that cannot be read is skipped this time
            log.exception("txcl: reading the metrics for OTLP failed")
            return
        if metrics and self.metrics_url:
            self._post(self.metrics_url, self.metric_headers, encode_metrics(self.resource, self.scope, metrics))

    def _post(self, url: str, headers: dict[str, str], body: bytes) -> None:
        """POST one batch, on a connection kept open between batches (one the collector has
        closed meanwhile is replaced once; a failure costs the batch and a warning)."""
        parts = urllib.parse.urlsplit(url)
        where = (parts.scheme, parts.hostname, parts.port)
        for attempt in (1, 2):
            reused = where in self._connections
            try:
                conn = self._connections.get(where)
                if conn is None:
                    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
                    conn = self._connections[where] = kind(parts.hostname, parts.port, timeout=self.timeout)
                conn.request("POST", parts.path or "/", body=body, headers=headers)
                answer = conn.getresponse()
                answer.read()
                if answer.will_close:
                    self._close(where)
                if answer.status >= 300:
                    self._warn(f"the collector at {url} answered {answer.status}")
                return
            except (OSError, http.client.HTTPException) as exc:
                self._close(where)
                if not (reused and attempt == 1):
                    self._warn(f"cannot reach the collector at {url}: {exc}")
                    return

    def _close(self, where: tuple) -> None:
        conn = self._connections.pop(where, None)
        if conn is not None:
            conn.close()

    def _warn(self, message: str) -> bool:
        """Log `message` unless a warning was logged less than a minute ago (True: logged)."""
        now = time.monotonic()
        if now - self._last_warning > 60:
            self._last_warning = now
            log.warning("txcl: OpenTelemetry export: %s", message)
            return True
        return False

    def shutdown(self) -> None:
        """Send what is queued (and the metrics once more), then stop the thread."""
        self._loop = None  # (a server detached first: its loop waits for this call)
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self.timeout + 1)
        self._flush_spans()
        if self.metrics_url:
            self._flush_metrics()
        for where in list(self._connections):
            self._close(where)


__all__ = ["Exporter", "Sampler", "encode_traces", "python_encode_traces", "encode_metrics", "encode_span",
           "python_encode_span", "endpoint", "headers",
           "resource_attributes"]


# ---------------------------------------------------------------------- metrics, aggregated here

class Aggregate:
    """Every event of txcl.metrics kept as plain numbers (a dict update, or a bisect for a
    latency) and turned into OTLP metrics when the exporter asks (`collect`)."""

    def __init__(self, catalogue: Any, namespace: str, bounds: tuple[float, ...]) -> None:
        self.specs = {spec.name: spec for spec in catalogue}
        self.namespace = namespace
        self.bounds = bounds
        self.sums: dict[str, dict[tuple, float]] = {}
        self.histograms: dict[str, dict[tuple, list]] = {}  # labels -> [counts, total]
        self.gauges: dict[str, list[tuple[dict, float]]] = {}
        self.app: dict[str, tuple[str, str, dict[tuple, Any]]] = {}  # name -> (kind, unit, points)

    def add(self, name: str, labels: tuple, value: float = 1.0) -> None:
        table = self.sums_of(name)
        table[labels] = table.get(labels, 0.0) + value

    def observe(self, name: str, labels: tuple, value: float) -> None:
        self._count(self.series(name, labels), value)

    def observe_into(self, table: dict, labels: tuple, value: float) -> None:
        """One value into the histogram series `table[labels]`."""
        self._count(self._series_in(table, labels), value)

    def series(self, name: str, labels: tuple) -> list:
        """The histogram series of `name` for `labels` ([bucket counts, sum]), made when new:
        a caller on the request path keeps it and adds to it directly."""
        table = self.histograms.get(name)
        if table is None:
            table = self.histograms[name] = {}
        return self._series_in(table, labels)

    def sums_of(self, name: str) -> dict:
        """The table of the counter `name` (labels -> value), made when new."""
        table = self.sums.get(name)
        if table is None:
            table = self.sums[name] = {}
        return table

    def _series_in(self, table: dict, labels: tuple) -> list:
        series = table.get(labels)
        if series is None:
            series = table[labels] = [[0] * (len(self.bounds) + 1), 0.0]
        return series

    def _count(self, series: list, value: float) -> None:
        series[0][bisect_left(self.bounds, value)] += 1
        series[1] += value

    def _name(self, name: str) -> str:
        return f"{self.namespace}.{name.removesuffix('_seconds')}"

    def collect(self) -> list[tuple]:
        out = []
        for name, table in list(self.sums.items()):
            spec = self.specs[name]
            out.append((self._name(name), spec.doc, "1", "sum",
                        [(dict(zip(spec.labels, labels)), value) for labels, value in list(table.items())]))
        for name, table in list(self.histograms.items()):
            spec = self.specs[name]
            out.append((self._name(name), spec.doc, "s" if spec.unit == "seconds" else "1", "histogram",
                        [(dict(zip(spec.labels, labels)), list(counts), total, self.bounds)
                         for labels, (counts, total) in list(table.items())]))
        for name, points in list(self.gauges.items()):
            spec = self.specs[name]
            out.append((self._name(name), spec.doc, "s" if spec.unit == "seconds" else "1", "gauge", list(points)))
        for name, (kind, unit, points) in list(self.app.items()):
            full = f"{self.namespace}.app.{name}"
            if kind == "counter":
                out.append((full, f"Application metric {name}.", unit, "sum",
                            [(dict(labels), value) for labels, value in list(points.items())]))
            else:
                out.append((full, f"Application metric {name}.", unit, "histogram",
                            [(dict(labels), list(c), t, self.bounds) for labels, (c, t) in list(points.items())]))
        return out


__all__ += ["Aggregate"]
