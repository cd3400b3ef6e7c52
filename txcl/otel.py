"""OpenTelemetry traces and metrics (the `otel` extra), configured by the standard `OTEL_*`
environment variables.

Spans:

- ``txcl request`` (kind SERVER) for each HTTP request: it continues the trace of an incoming
  ``traceparent``; a worker's callback is a root span *linked* to the ``traceparent`` it
  carries (the worker's span), never its child.
- ``txcl segment`` for each segment of a walk — the original request, each resume, each
  inline continuation — with the request id and run id as attributes. A resumed segment is a
  new root span **linked** to the segment that parked it (and to the callback that released
  it): no span is ever held open across a suspend, however long the wait.
- ``txcl scope <stack>/<scope>`` for each scope, and ``txcl op <name>`` for each EXEC (its stack,
  scope, rule, how it ran, target scheme and host, status, fuel and bytes).

Outgoing http(s) and MCP calls and async dispatches carry W3C ``traceparent``/``tracestate``.

Metrics: the recorder of :mod:`txcl.metrics` is also exported through the OTel meter (the
same catalogue, ``txcl.requests`` for ``txcl_requests_total``) when a metrics exporter is
configured.

The spans are made by `NativeTracing`, or by `CompiledTracing` — the same tracer with its
request path compiled (`txcl._native.otlp_c.Tracer`) — when that module was built.

Off (no ``OTEL_EXPORTER_OTLP_*ENDPOINT`` set, or ``OTEL_SDK_DISABLED=true``): `current` is a
:class:`Tracing` whose `enabled` is False, and the walk takes its plain path. An application
that embeds txcl and has set its own global tracer provider keeps it: txcl only adds spans.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import random
import re
import time
from bisect import bisect_left as _bisect
from typing import Any, Iterator

from txcl import metrics as _metrics

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


class Tracing:
    """The tracing interface; this base class traces nothing (OpenTelemetry off)."""

    enabled = False
    stopping = False  # has an exporter to flush and stop at shutdown

    def inject(self, headers: dict[str, str]) -> None: ...

    def attach(self, loop: Any) -> None:
        """A server's event loop is running: send spans from it (see txcl.otlp.Exporter.attach)."""

    async def detach(self) -> None:
        """The server stops: stop sending from its loop (before `shutdown`)."""


OFF = Tracing()
current: Tracing = OFF
# the native tracer's current span
_native_current: contextvars.ContextVar[Any] = contextvars.ContextVar("txcl.otel.native_span", default=None)
# the SERVER span of the request being handled (None: not in a request, or in a callback)
_request_span: contextvars.ContextVar[Any] = contextvars.ContextVar("txcl.otel.request_span", default=None)


def configured(env: Any = None) -> bool:
    """Whether the environment asks for OpenTelemetry export."""
    env = os.environ if env is None else env
    if str(env.get("OTEL_SDK_DISABLED", "")).strip().lower() == "true":
        return False
    return any(env.get(name) for name in ENDPOINT_VARS)


class OtelTracing(Tracing):
    enabled = True
    stopping = True

    def __init__(self, tracer_provider: Any, owned: bool) -> None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        from txcl import __version__

        self.provider = tracer_provider
        self.owned = owned  # txcl made the provider (and shuts it down); else the application did
        self.tracer = tracer_provider.get_tracer("txcl", __version__)
        self.propagator = TraceContextTextMapPropagator()

    # ------------------------------------------------------------------ HTTP
    def _carrier(self, raw_headers: Any) -> dict[str, str]:
        carrier = {}
        for key, value in raw_headers:
            name = key.decode("latin-1").lower() if isinstance(key, bytes) else str(key).lower()
            if name in ("traceparent", "tracestate"):
                carrier[name] = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        return carrier

    @contextlib.contextmanager
    def request(self, raw_headers: Any, method: str, path: str, rid: str, callback: bool) -> Iterator[Any]:
        """The span of one HTTP request, current while it is handled."""
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        carrier = self._carrier(raw_headers)
        incoming = self.propagator.extract(carrier) if carrier else None
        links = []
        if callback:  # a worker's callback: linked to the worker's span, not its child
            parent = otel_context.Context()
            if incoming is not None:
                remote = trace.get_current_span(incoming).get_span_context()
                if remote.is_valid:
                    links.append(trace.Link(remote, {"txcl.link": "worker"}))
        else:
            parent = incoming
        with self.tracer.start_as_current_span(
                "txcl callback" if callback else "txcl request", context=parent, kind=trace.SpanKind.SERVER,
                links=links, attributes={"http.request.method": method, "url.path": path,
                                         "txcl.request_id": rid}) as span:
            token = _request_span.set(None if callback else span)
            try:
                yield span
            finally:
                _request_span.reset(token)

    def inject(self, headers: dict[str, str]) -> None:
        """Add traceparent/tracestate of the current span to outgoing `headers`."""
        self.propagator.inject(headers)

    # ------------------------------------------------------------------ walks
    @contextlib.contextmanager
    def segment(self, run: Any, kind: str) -> Iterator[Any]:
        """One segment of a walk. A resume (`run.trace_context` holds the parker's) is a new
        root span linked to the segment that parked it and to the span current here (the
        callback that released it); a request's segment is a child of the request span."""
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        links = []
        parent = None
        if kind == "resume":
            parent = otel_context.Context()
            parked = self.propagator.extract({"traceparent": run.trace_context}) if run.trace_context else None
            if parked is not None:
                found = trace.get_current_span(parked).get_span_context()
                if found.is_valid:
                    links.append(trace.Link(found, {"txcl.link": "parked"}))
            releaser = trace.get_current_span().get_span_context()
            if releaser.is_valid:
                links.append(trace.Link(releaser, {"txcl.link": "released_by"}))
        attributes = {"txcl.request_id": run.rid, "txcl.stack": run.entry_stack or "", "txcl.segment": kind}
        if run.run_id:
            attributes["txcl.run_id"] = run.run_id
        here = _request_span.get() if kind == "request" else None
        if here is not None and here is trace.get_current_span():
            # a served request: its SERVER span is the segment's span (one span fewer per request;
            # and a request the sampler left out costs no second span)
            if here.is_recording():
                here.set_attributes(attributes)
            with _segment_of(here, run):
                yield here
            return
        with self.tracer.start_as_current_span("txcl segment", context=parent, links=links,
                                               attributes=attributes) as span:
            with _segment_of(span, run):
                yield span

    def open_scope(self, run: Any) -> Any:
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        span = self.tracer.start_span(f"txcl scope {run.stack}", attributes=_scope_attributes(run))
        return span, otel_context.attach(trace.set_span_in_context(span))

    def close_scope(self, handle: Any) -> None:
        from opentelemetry import context as otel_context

        span, token = handle
        otel_context.detach(token)
        span.end()

    def local_scope(self, run: Any, stack: str, started: float) -> None:
        """A scope of local rules, traced after it ran: a span with its own start time."""
        duration_ns = int((time.perf_counter() - started) * 1e9)
        end = time.time_ns()
        span = self.tracer.start_span(f"txcl scope {stack}", start_time=end - duration_ns,
                                      attributes={**_scope_attributes(run), "txcl.stack": stack})
        span.end(end_time=end)

    def op(self, run: Any, frame: Any, op: Any, transport: str, status: str, started_wall: float,
           duration_s: float, error: str | None, bytes_in: int | None, bytes_out: int | None) -> None:
        """The span of one EXEC, made when it ends (its start time is the op's own)."""
        from opentelemetry.trace import Status, StatusCode

        start_ns = int(started_wall * 1e9)
        attributes = _op_attributes(run, frame, op, transport, status, bytes_in, bytes_out)
        span = self.tracer.start_span(f"txcl op {op.name}", start_time=start_ns, attributes=attributes)
        if status not in ("ok", "pending", "completed"):
            span.set_status(Status(StatusCode.ERROR, error or status))
        span.end(end_time=start_ns + int(duration_s * 1e9))

    def shutdown(self) -> None:
        if self.owned:
            self.provider.shutdown()


class OtelMetrics(_metrics.Metrics):
    """The metrics catalogue as OpenTelemetry instruments (`txcl.requests`, …)."""

    enabled = True

    def __init__(self, meter_provider: Any) -> None:
        from txcl import __version__

        self.provider = meter_provider
        meter = meter_provider.get_meter("txcl", __version__)
        self.meter = meter
        self.i: dict[str, Any] = {}
        self._open: dict = {}
        for spec in _metrics.CATALOGUE:
            name = f"{_metrics.NAMESPACE}.{spec.name.removesuffix('_seconds')}"
            unit = "s" if spec.unit == "seconds" else "1"
            if spec.kind == "counter":
                self.i[spec.name] = meter.create_counter(name, unit=unit, description=spec.doc)
            elif spec.kind == "histogram":
                self.i[spec.name] = meter.create_histogram(name, unit=unit, description=spec.doc)
        from opentelemetry.metrics import Observation

        def observe(which: str):
            def callback(_options: Any) -> list:
                snapshot = self._open
                if which == "runs":
                    return [Observation(v, {"state": k}) for k, v in snapshot.get("runs", {}).items()]
                if which == "parked_runs":
                    return [Observation(v, {"age": k}) for k, v in snapshot.get("parked_by_age", {}).items()]
                if which == "oldest_parked_run_age_seconds":
                    return [Observation(snapshot.get("oldest_parked_s", 0.0))]
                return [Observation(c.get(state, 0), {"op": str(c.get("op", "")), "unit": u, "state": state})
                        for u, c in snapshot.get("units", {}).items() for state in ("queued", "in_flight")]
            return callback

        for spec in _metrics.CATALOGUE:
            if spec.kind == "gauge":
                meter.create_observable_gauge(f"{_metrics.NAMESPACE}.{spec.name.removesuffix('_seconds')}",
                                              callbacks=[observe(spec.name)], description=spec.doc,
                                              unit="s" if spec.unit == "seconds" else "1")
        self._app: dict[str, Any] = {}

    def request(self, stack: str, status: int, seconds: float, fuel: int) -> None:
        self.i["requests"].add(1, {"stack": stack, "status": str(status)})
        self.i["request_duration_seconds"].record(seconds, {"stack": stack})
        if fuel:
            self.i["fuel_used"].add(fuel, {"stack": stack})

    def scope(self, stack: str, seconds: float) -> None:
        self.i["scope_duration_seconds"].record(seconds, {"stack": stack})

    def op(self, scheme: str, outcome: str, seconds: float) -> None:
        self.i["op_duration_seconds"].record(seconds, {"scheme": scheme, "outcome": outcome})

    def callback(self, outcome: str, code: str = "") -> None:
        self.i["callbacks"].add(1, {"outcome": outcome, "code": code})

    def sweeper(self, kind: str, count: int = 1) -> None:
        if count:
            self.i["sweeper_repairs"].add(count, {"kind": kind})

    def commit(self, seconds: float) -> None:
        self.i["store_commit_duration_seconds"].record(seconds)

    def store_retry(self) -> None:
        self.i["store_retries"].add(1)

    def cancellation(self, outcome: str) -> None:
        self.i["cancellations"].add(1, {"outcome": outcome})

    def retry_sent(self, count: int = 1) -> None:
        self.i["retries_sent"].add(count)

    def dropped(self, reason: str) -> None:
        self.i["telemetry_dropped"].add(1, {"reason": reason})

    def application(self, name: str, kind: str, value: float, attrs: dict[str, str], unit: str | None) -> None:
        found = self._app.get(name)
        if found is None:
            if len(self._app) >= 256:
                self.dropped("too_many_metrics")
                return
            full = f"{_metrics.NAMESPACE}.app.{name}"
            found = self._app[name] = (self.meter.create_counter(full, unit=unit or "1") if kind == "counter"
                                       else self.meter.create_histogram(full, unit=unit or "1"))
        if kind == "counter":
            found.add(value, attrs)
        else:
            found.record(value, attrs)

    def open_work(self, snapshot: dict) -> None:
        self._open = snapshot

    def shutdown(self) -> None:
        self.provider.shutdown()


class _Span:
    """One span of the native tracer, until it ends (then a tuple in the exporter's queue).
    Ids are ints (random bits), turned into bytes only when the exporter encodes them.
    `attrs` is a dict, or for a scope's or an op's span (whose attributes nobody sets later)
    a `txcl.otlp.Fixed` block and a dict of this span's own values."""

    __slots__ = ("trace_id", "span_id", "parent", "name", "kind", "start", "attrs", "links", "sampled", "events")

    def __init__(self, trace_id: int, span_id: int, parent: int | None, name: str, kind: int,
                 attrs: Any, links: list | None, sampled: bool) -> None:
        self.trace_id, self.span_id, self.parent, self.name, self.kind = trace_id, span_id, parent, name, kind
        self.start = _time_ns()
        self.attrs, self.links, self.sampled = attrs, links, sampled
        self.events: list | None = None

    def set_attribute(self, key: str, value: Any) -> None:
        self.attrs[key] = value

    def set_attributes(self, values: dict) -> None:
        self.attrs.update(values)

    def is_recording(self) -> bool:
        return self.sampled

    def traceparent(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{'01' if self.sampled else '00'}"


_time_ns = time.time_ns
_perf_counter = time.perf_counter
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def parse_traceparent(value: str | None) -> tuple[int, int, bool] | None:
    """(trace id, span id, sampled) of a W3C traceparent, or None when it is not one."""
    m = _TRACEPARENT.match((value or "").strip().lower())
    if m is None or m.group(1) == "0" * 32 or m.group(2) == "0" * 16:
        return None
    return int(m.group(1), 16), int(m.group(2), 16), bool(int(m.group(3), 16) & 1)


class _Current:
    """`span` current while the block runs (and, for a request, the request's span); ended
    after it. A class rather than a generator: this runs twice on every traced request."""

    __slots__ = ("tracing", "span", "request", "token", "request_token")

    def __init__(self, tracing: "NativeTracing", span: _Span, request: _Span | None = None) -> None:
        self.tracing, self.span, self.request = tracing, span, request
        self.request_token = None

    def __enter__(self) -> _Span:
        if self.request is not None:
            self.request_token = _request_span.set(self.request)
        self.token = _native_current.set(self.span)
        return self.span

    def __exit__(self, *exc: Any) -> None:
        _native_current.reset(self.token)
        if self.request_token is not None:
            _request_span.reset(self.request_token)
        self.tracing._end(self.span)


class _Segment:
    """One segment of a walk (see `NativeTracing.segment`); `span` is its own span, or the
    request's when the segment is the request's (then the request's block ends it)."""

    __slots__ = ("tracing", "span", "run", "own", "token")

    def __init__(self, tracing: "NativeTracing", span: _Span, run: Any, own: bool) -> None:
        self.tracing, self.span, self.run, self.own = tracing, span, run, own
        run.traced = span.sampled
        run.trace_span = span

    def __enter__(self) -> _Span:
        if self.own:
            self.token = _native_current.set(self.span)
        return self.span

    def __exit__(self, *exc: Any) -> None:
        span = self.span
        _finish_segment(span, self.run)
        if self.own:
            _native_current.reset(self.token)
            self.tracing._end(span)


class NativeTracing(Tracing):
    """The same spans as OtelTracing, recorded by txcl itself and sent by its own OTLP
    exporter (txcl.otlp): a span costs a small object and a queue append on the request path;
    a request the sampler leaves out costs one span object and no more."""

    enabled = True
    stopping = True

    def __init__(self, exporter: Any, sampler: Any) -> None:
        self.exporter = exporter
        self.sampler = sampler
        self._bits = random.getrandbits
        # the attributes that are the same on every span of a scope or rule (txcl.otlp.Fixed),
        # made once and encoded once
        self._fixed: dict[Any, Any] = {}
        from txcl.otlp import Fixed

        self._Fixed = Fixed

    def _remember(self, key: Any, fixed: Any) -> Any:
        if len(self._fixed) >= 4096:  # a server whose rules keep changing: start again
            self._fixed.clear()
        self._fixed[key] = fixed
        return fixed

    def _start(self, name: str, kind: int, attrs: dict, *, root: bool = False,
               remote: tuple[int, int, bool] | None = None, links: list | None = None) -> _Span:
        if remote is not None:
            trace_id, parent_id, sampled = remote[0], remote[1], self.sampler.sample(remote[0], remote[2])
        else:
            trace_id, parent_id, sampled = self._lineage(None if root else _native_current.get())
        return _Span(trace_id, self._bits(64) or 1, parent_id, name, kind, attrs, links, sampled)

    def _lineage(self, parent: _Span | None) -> tuple[int, int | None, bool]:
        """(trace id, parent span id, sampled) of a span made under `parent` (None: a new trace)."""
        if parent is not None:
            return parent.trace_id, parent.span_id, parent.sampled
        trace_id = self._bits(128) or 1
        return trace_id, None, self.sampler.sample(trace_id, None)

    def _end(self, span: _Span, status: tuple[int, str] | None = None, end: int | None = None) -> None:
        if span.sampled:
            self.exporter.add((span.trace_id, span.span_id, span.parent, span.name, span.kind, span.start,
                               end or _time_ns(), span.attrs, span.links, status, span.events))

    def request(self, raw_headers: Any, method: str, path: str, rid: str, callback: bool) -> Any:
        incoming = None
        for key, value in raw_headers:
            if key == b"traceparent":
                incoming = parse_traceparent(value.decode("latin-1"))
        attrs = {"http.request.method": method, "url.path": path, "txcl.request_id": rid}
        if callback:
            links = [(incoming[0], incoming[1], {"txcl.link": "worker"})] if incoming else None
            span = self._start("txcl callback", 2, attrs, root=True, links=links)
            return _Current(self, span)
        span = self._start("txcl request", 2, attrs, root=True, remote=incoming)
        return _Current(self, span, request=span)

    def inject(self, headers: dict[str, str]) -> None:
        span = _native_current.get()
        if span is not None:
            headers["traceparent"] = span.traceparent()

    def segment(self, run: Any, kind: str) -> _Segment:
        """One segment of a walk. A served request's segment is the request's own span (one
        span fewer, and nothing more for a request the sampler left out); a resume is a new
        root span linked to the segment that parked it and to the callback that released it."""
        here = _request_span.get() if kind == "request" else None
        if here is not None and here is _native_current.get():
            if here.sampled:
                attrs = here.attrs
                attrs["txcl.stack"] = run.entry_stack or ""
                attrs["txcl.segment"] = kind
                if run.run_id:
                    attrs["txcl.run_id"] = run.run_id
            return _Segment(self, here, run, own=False)
        attrs = {"txcl.request_id": run.rid, "txcl.stack": run.entry_stack or "", "txcl.segment": kind}
        if run.run_id:
            attrs["txcl.run_id"] = run.run_id
        links = None
        if kind == "resume":
            links = []
            parked = parse_traceparent(run.trace_context)
            if parked is not None:
                links.append((parked[0], parked[1], {"txcl.link": "parked"}))
            releaser = _native_current.get()
            if releaser is not None:
                links.append((releaser.trace_id, releaser.span_id, {"txcl.link": "released_by"}))
        span = self._start("txcl segment", 1, attrs, root=kind == "resume", links=links)
        return _Segment(self, span, run, own=True)

    def open_scope(self, run: Any) -> Any:
        """A scope's span, current until `close_scope`."""
        found = self._fixed.get(run.stack)
        if found is None:
            found = self._remember(run.stack, (self._Fixed({"txcl.stack": run.stack}), f"txcl scope {run.stack}"))
        own = {"txcl.request_id": run.rid, "txcl.run_id": run.run_id} if run.run_id else {"txcl.request_id": run.rid}
        span = self._start(found[1], 1, (found[0], own))
        return span, _native_current.set(span)

    def close_scope(self, handle: Any) -> None:
        span, token = handle
        _native_current.reset(token)
        self._end(span)

    def local_scope(self, run: Any, stack: str, started: float) -> None:
        """A scope that only evaluated local rules (`started`: its perf_counter start): an
        event of the segment's span with its duration, since a span would cost several times
        what such a scope does."""
        parent = _native_current.get()
        if parent is None or not parent.sampled:
            return
        duration_ns = int((_perf_counter() - started) * 1e9)
        events = parent.events
        if events is None:
            events = parent.events = []
        if len(events) < 128:  # (the exporter names it and writes its attributes)
            events.append((_time_ns() - duration_ns, stack, duration_ns))

    def op(self, run: Any, frame: Any, op: Any, transport: str, status: str, started_wall: float,
           duration_s: float, error: str | None, bytes_in: int | None, bytes_out: int | None) -> None:
        """An EXEC's span, made when it ended (a tuple at once: nothing can be its child)."""
        trace_id, parent_id, sampled = self._lineage(_native_current.get())
        if not sampled:
            return
        target = op.target
        key = (frame.stack, frame.scope, op.stack, op.name, transport, status,
               getattr(target, "url", None) if target is not None else None)
        found = self._fixed.get(key)
        if found is None:
            found = self._remember(key, (self._Fixed(_op_fixed_attributes(frame, op, transport, status)),
                                         f"txcl op {op.name}"))
        fixed, name = found
        own = _op_own_attributes(run, bytes_in, bytes_out)
        start = int(started_wall * 1e9)
        failed = status not in ("ok", "pending", "completed")
        self.exporter.add((trace_id, self._bits(64) or 1, parent_id, name, 1, start, start + int(duration_s * 1e9),
                           (fixed, own), None, (2, error or status) if failed else None, None))

    def attach(self, loop: Any) -> None:
        self.exporter.attach(loop)

    async def detach(self) -> None:
        await self.exporter.detach()

    def shutdown(self) -> None:
        self.exporter.shutdown()


def _compiled_tracing() -> type | None:
    """NativeTracing with its request path compiled (`txcl._native.otlp_c.Tracer`), when that
    module was built; else None."""
    from txcl.otlp import _COMPILED, Fixed

    if _COMPILED is None:
        return None

    class CompiledTracing(_COMPILED.Tracer, NativeTracing):
        """NativeTracing whose spans are made and encoded in C (the same spans; the exporter,
        attach, detach and shutdown are NativeTracing's)."""

        def __init__(self, exporter: Any, sampler: Any) -> None:
            _COMPILED.Tracer.__init__(self, exporter, sampler, _native_current, _request_span, Fixed,
                                      _op_fixed_attributes, parse_traceparent)

    return CompiledTracing


def _reseed_after_fork() -> None:
    """A forked child (`txcl serve --workers`) must not make its parent's span ids."""
    reseed = getattr(current, "reseed", None)
    if reseed is not None:
        reseed()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_after_fork)


def _scope_attributes(run: Any) -> dict:
    attributes = {"txcl.stack": run.stack, "txcl.request_id": run.rid}
    if run.run_id:
        attributes["txcl.run_id"] = run.run_id
    return attributes


@contextlib.contextmanager
def _segment_of(span: Any, run: Any) -> Iterator[None]:
    """`span` (an SDK span) as the segment's: a sampled-out one makes no scope or op spans, its
    context is what a park stores (for the resume's link), and its end learns the outcome."""
    run.traced = span.is_recording()
    context = span.get_span_context()
    run.trace_context = f"00-{context.trace_id:032x}-{context.span_id:016x}-01"
    try:
        yield
    finally:
        _finish_segment(span, run)


def _finish_segment(span: Any, run: Any) -> None:
    """The attributes a segment's span learns only at its end (either tracer's span)."""
    if span.is_recording():
        if run.run_id:
            span.set_attribute("txcl.run_id", run.run_id)
        span.set_attribute("txcl.status", str(run.status))
        span.set_attribute("txcl.fuel", int(run.budget.fuel_used))


def _op_attributes(run: Any, frame: Any, op: Any, transport: str, status: str, bytes_in: int | None,
                   bytes_out: int | None) -> dict:
    return {**_op_fixed_attributes(frame, op, transport, status), **_op_own_attributes(run, bytes_in, bytes_out)}


def _op_fixed_attributes(frame: Any, op: Any, transport: str, status: str) -> dict:
    """What an EXEC's span says that is the same for every request through that rule."""
    attributes: dict[str, Any] = {
        "txcl.stack": frame.stack, "txcl.scope": frame.scope, "txcl.rule": op.name, "txcl.op": f"{op.stack}/{op.name}",
        "txcl.transport": transport, "txcl.status": status}
    target = op.target
    if target is not None:
        # the scheme the rule wrote (https, mcp+http, txco, py, queue, nats, goto); a stage
        # target (<stack>/<scope>) has none: its kind
        text = str(getattr(target, "target", "") or "")
        attributes["txcl.target.scheme"] = text.split("://", 1)[0].lower() if "://" in text else target.kind
        url = getattr(target, "url", None)
        if url:
            from urllib.parse import urlsplit

            try:
                attributes["server.address"] = urlsplit(url).hostname or ""
            except ValueError:
                pass
    return attributes


def _op_own_attributes(run: Any, bytes_in: int | None, bytes_out: int | None) -> dict:
    """What an EXEC's span says about this request."""
    attributes: dict[str, Any] = {"txcl.request_id": run.rid, "txcl.fuel": int(run.budget.fuel_used)}
    if run.run_id:
        attributes["txcl.run_id"] = run.run_id
    if bytes_in is not None:
        attributes["txcl.bytes_in"] = bytes_in
    if bytes_out is not None:
        attributes["txcl.bytes_out"] = bytes_out
    return attributes


_BOUNDS = _metrics.LATENCY_BUCKETS


class NativeMetrics(_metrics.Metrics):
    """The metrics catalogue aggregated by txcl (txcl.otlp.Aggregate) and sent by its exporter."""

    enabled = True

    def __init__(self) -> None:
        from txcl.otlp import Aggregate

        self.agg = Aggregate(_metrics.CATALOGUE, _metrics.NAMESPACE, _metrics.LATENCY_BUCKETS)
        # the per-request events' series, kept by stack (or scheme and outcome) so that an
        # event is a dict lookup, a bisect and two additions
        self._requests: dict | None = None
        self._per_request: dict[str, list] = {}
        self._per_scope: dict[str, list] = {}
        self._per_op: dict[tuple[str, str], list] = {}

    def request(self, stack: str, status: int, seconds: float, fuel: int) -> None:
        counts = self._requests
        if counts is None:
            counts = self._requests = self.agg.sums_of("requests")
        key = (stack, str(status))
        counts[key] = counts.get(key, 0.0) + 1
        series = self._per_request.get(stack)
        if series is None:
            series = self._per_request[stack] = self.agg.series("request_duration_seconds", (stack,))
        series[0][_bisect(_BOUNDS, seconds)] += 1
        series[1] += seconds
        if fuel:
            self.agg.add("fuel_used", (stack,), fuel)

    def scope(self, stack: str, seconds: float) -> None:
        series = self._per_scope.get(stack)
        if series is None:
            series = self._per_scope[stack] = self.agg.series("scope_duration_seconds", (stack,))
        series[0][_bisect(_BOUNDS, seconds)] += 1
        series[1] += seconds

    def op(self, scheme: str, outcome: str, seconds: float) -> None:
        key = (scheme, outcome)
        series = self._per_op.get(key)
        if series is None:
            series = self._per_op[key] = self.agg.series("op_duration_seconds", key)
        series[0][_bisect(_BOUNDS, seconds)] += 1
        series[1] += seconds

    def callback(self, outcome: str, code: str = "") -> None:
        self.agg.add("callbacks", (outcome, code))

    def sweeper(self, kind: str, count: int = 1) -> None:
        if count:
            self.agg.add("sweeper_repairs", (kind,), count)

    def commit(self, seconds: float) -> None:
        self.agg.observe("store_commit_duration_seconds", (), seconds)

    def store_retry(self) -> None:
        self.agg.add("store_retries", ())

    def cancellation(self, outcome: str) -> None:
        self.agg.add("cancellations", (outcome,))

    def retry_sent(self, count: int = 1) -> None:
        self.agg.add("retries_sent", (), count)

    def dropped(self, reason: str) -> None:
        self.agg.add("telemetry_dropped", (reason,))

    def application(self, name: str, kind: str, value: float, attrs: dict[str, str], unit: str | None) -> None:
        found = self.agg.app.get(name)
        if found is None:
            if len(self.agg.app) >= 256:
                self.dropped("too_many_metrics")
                return
            found = self.agg.app[name] = (kind, unit or "1", {})
        points = found[2]
        labels = tuple(sorted(attrs.items()))
        if found[0] == "counter":
            points[labels] = points.get(labels, 0.0) + value
        else:
            self.agg.observe_into(points, labels, value)

    def open_work(self, snapshot: dict) -> None:
        gauges = self.agg.gauges
        gauges["runs"] = [({"state": k}, v) for k, v in snapshot.get("runs", {}).items()]
        gauges["parked_runs"] = [({"age": k}, v) for k, v in snapshot.get("parked_by_age", {}).items()]
        gauges["oldest_parked_run_age_seconds"] = [({}, snapshot.get("oldest_parked_s", 0.0))]
        gauges["itemized_items"] = [({"op": str(c.get("op", "")), "unit": u, "state": state}, c.get(state, 0))
                                    for u, c in snapshot.get("units", {}).items() for state in ("queued", "in_flight")]
        queues = snapshot.get("queues", {})
        gauges["queue_jobs"] = [({"queue": q, "state": state}, d.get(state, 0))
                                for q, d in queues.items() for state in ("ready", "leased")]
        gauges["queue_oldest_ready_age_seconds"] = [({"queue": q}, d.get("oldest_ready_s", 0.0))
                                                    for q, d in queues.items()]


class MetricsOnly(Tracing):
    """OTLP metrics without traces (`OTEL_TRACES_EXPORTER=none`): nothing is traced, so the walk
    keeps its plain path; `stopping` flushes the metrics exporter at shutdown."""

    enabled = False
    stopping = True

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter

    def shutdown(self) -> None:
        self.exporter.shutdown()


def setup(env: Any = None) -> Tracing | None:
    """Turn OpenTelemetry on when the environment asks for it (None when it does not). txcl's
    own exporter (txcl.otlp) sends the spans and metrics, unless an application already set
    an SDK tracer provider or `OTEL_TXCL_EXPORTER=sdk` asks for the SDK's (the otel extra)."""
    global current
    env = os.environ if env is None else env
    if not configured(env):
        return None
    if not wants_sdk(env) and not _sdk_provider_set():
        from txcl.otlp import Exporter, Sampler

        recorder = None
        if str(env.get("OTEL_METRICS_EXPORTER", "otlp")).strip().lower() != "none":
            recorder = NativeMetrics()
        traces = str(env.get("OTEL_TRACES_EXPORTER", "otlp")).strip().lower() != "none"
        if not traces and recorder is None:
            return None  # both exporters turned off: nothing to do
        exporter = Exporter(env, recorder.agg.collect if recorder is not None else None)
        if not traces:  # no span is made at all (not made and thrown away)
            _metrics.install(recorder)
            current = MetricsOnly(exporter)
            return current
        tracing = (_compiled_tracing() or NativeTracing)(exporter, Sampler(env))
        if recorder is not None:
            _metrics.install(recorder)
        current = tracing
        return tracing
    return _setup_sdk(env)


def wants_sdk(env: Any = None) -> bool:
    """Whether the SDK's exporter is asked for (OTEL_TXCL_EXPORTER=sdk)."""
    env = os.environ if env is None else env
    return str(env.get("OTEL_TXCL_EXPORTER", "native")).strip().lower() == "sdk"


def _sdk_provider_set() -> bool:
    """Whether an application set its own OpenTelemetry tracer provider (then txcl uses it)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    return hasattr(trace.get_tracer_provider(), "add_span_processor")


def _setup_sdk(env: Any) -> OtelTracing | None:
    """Turn OpenTelemetry on when the environment asks for it; the tracing installed as
    `current` (its metrics recorder joins txcl.metrics). None when off."""
    global current
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "txcl")})
    provider = trace.get_tracer_provider()
    owned = False
    if not hasattr(provider, "add_span_processor"):  # the API's proxy: nobody set one
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        owned = True
    tracing = OtelTracing(provider, owned)
    if os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() == "none":  # the standard way to turn one off
        current = tracing
        return tracing
    meters = otel_metrics.get_meter_provider()
    if not hasattr(meters, "force_flush"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        meters = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
        otel_metrics.set_meter_provider(meters)
        tracing.meter_owned = True
    recorder = OtelMetrics(meters)
    _metrics.install(recorder)
    tracing.recorder = recorder
    current = tracing
    return tracing


def shutdown() -> None:
    """Flush and stop what `setup` started (at server shutdown)."""
    global current
    tracing = current
    current = OFF
    if isinstance(tracing, (NativeTracing, MetricsOnly)):
        tracing.shutdown()
    elif isinstance(tracing, OtelTracing):
        tracing.shutdown()
        if getattr(tracing, "meter_owned", False):
            tracing.recorder.shutdown()




__all__ = ["Tracing", "OtelTracing", "OtelMetrics", "NativeTracing", "NativeMetrics", "MetricsOnly", "parse_traceparent", "setup", "shutdown", "configured", "current", "OFF"]
