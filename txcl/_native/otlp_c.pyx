# cython: language_level=3, boundscheck=False, wraparound=False
"""The OTLP span encoder of txcl.otlp, compiled: the same bytes as `txcl.otlp.encode_traces`,
written into one C buffer instead of joined from Python bytes objects; and the tracer of
txcl.otel (`Tracer`, the request path of `NativeTracing`), whose spans end straight into
those bytes.

A traced request makes three spans; encoding them in Python costs about as much CPU as the
rest of tracing together, and it runs on the server's process. Built by `pip install` when a
C compiler is there (setup.py); without it txcl.otlp encodes in Python, with the same output
(tests/test_otlp_loop.py compares the two).
"""

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLongMask
from cpython.exc cimport PyErr_Occurred
from cpython.contextvars cimport PyContextVar_Set, PyContextVar_Reset, get_value
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove
from libc.stdint cimport uint64_t, int64_t, uint8_t

cdef object _Fixed = None  # txcl.otlp.Fixed, set by `bind` (importing txcl.otlp here would be circular)


def bind(fixed_class):
    global _Fixed
    _Fixed = fixed_class


cdef class _Writer:
    cdef uint8_t* buf
    cdef Py_ssize_t size
    cdef Py_ssize_t cap

    def __cinit__(self, Py_ssize_t cap=65536):
        self.buf = <uint8_t*> malloc(cap)
        if self.buf == NULL:
            raise MemoryError()
        self.size = 0
        self.cap = cap

    def __dealloc__(self):
        free(self.buf)

    cdef inline int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self.size + extra
        cdef Py_ssize_t cap = self.cap
        cdef uint8_t* grown
        if need <= cap:
            return 0
        while cap < need:
            cap *= 2
        grown = <uint8_t*> realloc(self.buf, cap)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        self.cap = cap
        return 0

    cdef inline int byte(self, uint8_t value) except -1:
        self.reserve(1)
        self.buf[self.size] = value
        self.size += 1
        return 0

    cdef inline int raw(self, const uint8_t* data, Py_ssize_t n) except -1:
        self.reserve(n)
        memcpy(self.buf + self.size, data, n)
        self.size += n
        return 0

    cdef inline int bytes_(self, bytes data) except -1:
        return self.raw(<const uint8_t*> PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))

    cdef inline int varint(self, uint64_t n) except -1:
        self.reserve(10)
        while n > 0x7F:
            self.buf[self.size] = <uint8_t> ((n & 0x7F) | 0x80)
            self.size += 1
            n >>= 7
        self.buf[self.size] = <uint8_t> n
        self.size += 1
        return 0

    cdef inline int fixed64(self, uint64_t n) except -1:
        cdef int i
        self.reserve(8)
        for i in range(8):
            self.buf[self.size + i] = <uint8_t> ((n >> (8 * i)) & 0xFF)
        self.size += 8
        return 0

    cdef inline int string(self, int field, str text) except -1:
        cdef Py_ssize_t n
        cdef const char* data = PyUnicode_AsUTF8AndSize(text, &n)  # (kept in the str: no copy)
        self.byte(<uint8_t> ((field << 3) | 2))
        self.varint(<uint64_t> n)
        return self.raw(<const uint8_t*> data, n)

    cdef inline int id_(self, int field, object value, int size) except -1:
        """A trace (16 bytes) or span id (8): bytes as they are, an int big-endian."""
        cdef uint64_t high, low
        if type(value) is bytes:
            self.byte(<uint8_t> ((field << 3) | 2))
            self.varint(<uint64_t> PyBytes_GET_SIZE(value))
            return self.bytes_(<bytes> value)
        if value < 0 or value >> (8 * size):
            raise OverflowError(f"an id of {size} bytes cannot hold {value}")
        low = PyLong_AsUnsignedLongLongMask(value)
        high = PyLong_AsUnsignedLongLongMask(value >> 64) if size == 16 else 0
        self.byte(<uint8_t> ((field << 3) | 2))
        self.byte(<uint8_t> size)
        if size == 16:
            self.big_endian(high)
        return self.big_endian(low)

    cdef inline int big_endian(self, uint64_t n) except -1:
        cdef int i
        self.reserve(8)
        for i in range(8):
            self.buf[self.size + i] = <uint8_t> ((n >> (8 * (7 - i))) & 0xFF)
        self.size += 8
        return 0

    cdef bytes result(self):
        return PyBytes_FromStringAndSize(<char*> self.buf, self.size)


cdef int _any(_Writer w, object value) except -1:
    """An AnyValue's content (bool, int, double or string)."""
    cdef type kind = type(value)
    cdef long long number
    cdef int overflow = 0
    cdef double real
    if kind is bool:
        w.byte(0x10)
        w.byte(1 if value else 0)
    elif isinstance(value, int):
        number = PyLong_AsLongLongAndOverflow(value, &overflow)
        if number == -1 and PyErr_Occurred():
            raise
        if overflow == 0:
            w.byte(0x18)
            w.varint(<uint64_t> number)
        elif overflow > 0 and value <= 0xFFFFFFFFFFFFFFFF:  # (an unsigned 64-bit one)
            w.byte(0x18)
            w.varint(PyLong_AsUnsignedLongLongMask(value))
        else:  # past 64 bits: as its text
            w.string(1, str(value))
    elif isinstance(value, float):
        real = value
        w.byte(0x21)
        w.fixed64((<uint64_t*> &real)[0])
    else:
        w.string(1, str(value))
    return 0


cdef int _attributes(_Writer w, int field, dict attrs) except -1:
    cdef Py_ssize_t pair, inner
    for key, value in attrs.items():
        w.byte(<uint8_t> ((field << 3) | 2))
        pair = w.size
        w.string(1, key)
        w.byte(0x12)
        inner = w.size
        _any(w, value)
        _put_length(w, inner)
        _put_length(w, pair)
    return 0


cdef int _put_length(_Writer w, Py_ssize_t start) except -1:
    """Insert the varint length of what was written since `start` at `start` (its tag is
    already in front)."""
    cdef Py_ssize_t n = w.size - start
    cdef uint8_t head[10]
    cdef int h = 0
    cdef uint64_t v = <uint64_t> n
    while v > 0x7F:
        head[h] = <uint8_t> ((v & 0x7F) | 0x80)
        h += 1
        v >>= 7
    head[h] = <uint8_t> v
    h += 1
    w.reserve(h)
    memmove(w.buf + start + h, w.buf + start, n)
    memcpy(w.buf + start, head, h)
    w.size += h
    return 0


cdef int _span_attributes(_Writer w, object attrs) except -1:
    cdef _Writer head
    if type(attrs) is dict:
        return _attributes(w, 9, <dict> attrs)
    fixed, own = attrs
    try:
        encoded = fixed.encoded
    except AttributeError:
        head = _Writer(512)
        _attributes(head, 9, <dict> fixed)
        encoded = fixed.encoded = head.result()
    w.bytes_(<bytes> encoded)
    if own:
        _attributes(w, 9, <dict> own)
    return 0


cdef dict _SCOPE_EVENTS = {}  # stack -> the encoded name and txcl.stack attribute of its scope event


cdef int _span(_Writer w, tuple span) except -1:
    trace_id, span_id, parent, name, kind, start_ns, end_ns, attrs, links, status, events = span
    w.id_(1, trace_id, 16)
    w.id_(2, span_id, 8)
    if parent:
        w.id_(4, parent, 8)
    return _span_body(w, name, kind, start_ns, end_ns, attrs, links, status, events)


cdef int _span_body(_Writer w, str name, int64_t kind, uint64_t start_ns, uint64_t end_ns, object attrs,
                    object links, object status, object events) except -1:
    """A span's fields after its ids (name onwards)."""
    cdef Py_ssize_t start, inner
    w.string(5, name)
    w.byte(0x30)
    w.varint(<uint64_t> kind)
    w.byte(0x39)
    w.fixed64(start_ns)
    w.byte(0x41)
    w.fixed64(end_ns)
    _span_attributes(w, attrs)
    if events:
        for event in events:
            when, event_name, event_attrs = event
            w.byte(0x5a)  # field 11
            start = w.size
            w.byte(0x09)
            w.fixed64(<uint64_t> when)
            if type(event_attrs) is int:  # a scope of local rules: (when, its stack, its duration in ns)
                head = _SCOPE_EVENTS.get(event_name)
                if head is None:
                    named = _Writer(256)
                    named.string(2, "txcl scope " + event_name)
                    _attributes(named, 3, {"txcl.stack": event_name})
                    head = named.result()
                    if len(_SCOPE_EVENTS) < 4096:
                        _SCOPE_EVENTS[event_name] = head
                w.bytes_(<bytes> head)
                w.byte(0x1a)
                inner = w.size
                w.string(1, "txcl.duration_us")
                w.byte(0x12)
                _duration(w, <uint64_t> ((<int64_t> event_attrs) // 1000))
                _put_length(w, inner)
            else:
                w.string(2, event_name)
                _attributes(w, 3, <dict> event_attrs)
            _put_length(w, start)
    if links:
        for link in links:
            link_trace, link_span, link_attrs = link
            w.byte(0x6a)  # field 13
            start = w.size
            w.id_(1, link_trace, 16)
            w.id_(2, link_span, 8)
            _attributes(w, 4, <dict> link_attrs)
            _put_length(w, start)
    if status is not None:
        code, message = status
        w.byte(0x7a)  # field 15
        start = w.size
        if message:
            w.string(2, message)
        w.byte(0x18)
        w.varint(<uint64_t> <int64_t> code)
        _put_length(w, start)
    return 0


cdef int _duration(_Writer w, uint64_t micros) except -1:
    """The AnyValue of an int: its length, then field 3 and the varint."""
    cdef Py_ssize_t start = w.size
    w.byte(0x18)
    w.varint(micros)
    return _put_length(w, start)


def encode_traces(dict resource, tuple scope, spans):
    """An ExportTraceServiceRequest (see txcl.otlp.encode_traces)."""
    cdef _Writer w = _Writer()
    cdef Py_ssize_t outer, resource_spans, scope_spans, one
    w.byte(0x0a)  # resource_spans
    outer = w.size
    w.byte(0x0a)  # resource
    resource_spans = w.size
    _attributes(w, 1, resource)
    _put_length(w, resource_spans)
    w.byte(0x12)  # scope_spans
    scope_spans = w.size
    w.byte(0x0a)  # scope
    one = w.size
    w.string(1, scope[0])
    w.string(2, scope[1])
    _put_length(w, one)
    for span in spans:
        w.byte(0x12)
        if type(span) is bytes:  # encoded already (`encode_span`)
            w.varint(<uint64_t> PyBytes_GET_SIZE(span))
            w.bytes_(<bytes> span)
            continue
        one = w.size
        _span(w, <tuple> span)
        _put_length(w, one)
    _put_length(w, scope_spans)
    _put_length(w, outer)
    return w.result()


def encode_span(tuple span):
    """One Span message (see txcl.otlp.python_encode_span)."""
    cdef _Writer w = _Writer(1024)  # (not one shared buffer: any thread may call this)
    _span(w, span)
    return w.result()


# ---------------------------------------------------------------------- the tracer, compiled
# The same spans as txcl.otel.NativeTracing (which it stands in for when built), made without
# Python objects where none is needed: ids come from a xoshiro256** generator and stay C
# integers, a span ends straight into its encoded bytes, and making one current is the C API
# of context variables. NativeTracing's docstrings say what each method means.

cdef inline uint64_t _rotl(uint64_t x, int k):
    return (x << k) | (x >> (64 - k))


cdef class Span:
    """One span until it ends (see txcl.otel._Span, whose interface it has)."""

    cdef public uint64_t trace_hi, trace_lo, sid, parent_sid
    cdef public str name
    cdef public int kind
    cdef public uint64_t start
    cdef public object attrs, links, events, token
    cdef public bint sampled

    @property
    def trace_id(self):
        return (<object> self.trace_hi << 64) | <object> self.trace_lo

    @property
    def span_id(self):
        return self.sid

    @property
    def parent(self):
        return self.parent_sid if self.parent_sid else None

    def set_attribute(self, key, value):
        self.attrs[key] = value

    def set_attributes(self, values):
        self.attrs.update(values)

    def is_recording(self):
        return self.sampled

    def traceparent(self):
        return "00-%016x%016x-%016x-%s" % (self.trace_hi, self.trace_lo, self.sid, "01" if self.sampled else "00")


cdef bytes _encode_live(uint64_t hi, uint64_t lo, uint64_t sid, uint64_t parent, str name, int kind,
                        uint64_t start, uint64_t end, object attrs, object links, object status, object events):
    cdef _Writer w = _Writer(1024)
    w.byte(0x0a)  # trace id: 16 bytes
    w.byte(16)
    w.big_endian(hi)
    w.big_endian(lo)
    w.byte(0x12)  # span id: 8 bytes
    w.byte(8)
    w.big_endian(sid)
    if parent:
        w.byte(0x22)
        w.byte(8)
        w.big_endian(parent)
    _span_body(w, name, kind, start, end, attrs, links, status, events)
    return w.result()


cdef class Current:
    """A request's (or a callback's) span, current while the block runs, ended after it."""

    cdef Tracer tracer
    cdef Span span
    cdef bint is_request
    cdef object token, request_token

    def __enter__(self):
        if self.is_request:
            self.request_token = PyContextVar_Set(self.tracer.request_var, self.span)
        self.token = PyContextVar_Set(self.tracer.current_var, self.span)
        return self.span

    def __exit__(self, *exc):
        PyContextVar_Reset(self.tracer.current_var, self.token)
        if self.request_token is not None:
            PyContextVar_Reset(self.tracer.request_var, self.request_token)
        self.tracer._end(self.span, None)


cdef class Segment:
    """One segment of a walk; `own`: its span is its own (else the request's, ended by it)."""

    cdef Tracer tracer
    cdef Span span
    cdef object run, token
    cdef bint own

    def __enter__(self):
        if self.own:
            self.token = PyContextVar_Set(self.tracer.current_var, self.span)
        return self.span

    def __exit__(self, *exc):
        cdef Span span = self.span
        cdef object run = self.run
        if span.sampled:  # what the segment learns at its end (as txcl.otel._finish_segment)
            attrs = span.attrs
            if run.run_id:
                attrs["txcl.run_id"] = run.run_id
            attrs["txcl.status"] = str(run.status)
            attrs["txcl.fuel"] = int(run.budget.fuel_used)
        if self.own:
            PyContextVar_Reset(self.tracer.current_var, self.token)
            self.tracer._end(span, None)


cdef class Tracer:
    """txcl.otel.NativeTracing's request path, compiled (txcl.otel.CompiledTracing adds the
    rest). `exporter`: a txcl.otlp.Exporter, whose queue gets the encoded spans."""

    cdef public object exporter
    cdef object queue, fixed, fixed_class, op_fixed, parse_traceparent, time_ns, perf_counter
    cdef public object current_var, request_var
    cdef Py_ssize_t queue_max, batch
    cdef uint64_t bound, s0, s1, s2, s3
    cdef bint sample_all, parent_based

    def __init__(self, exporter, sampler, current_var, request_var, fixed_class, op_fixed, parse_traceparent):
        import time
        self.exporter = exporter
        self.queue = exporter.spans
        self.queue_max = exporter.queue_max
        self.batch = exporter.batch
        self.sample_all = sampler.bound >= (1 << 64)
        self.bound = 0 if self.sample_all else sampler.bound
        self.parent_based = sampler.parent_based
        self.current_var, self.request_var = current_var, request_var
        self.fixed = {}
        self.fixed_class, self.op_fixed, self.parse_traceparent = fixed_class, op_fixed, parse_traceparent
        self.time_ns, self.perf_counter = time.time_ns, time.perf_counter
        self.reseed()

    def reseed(self):
        """New random state (a forked child calls this: it must not repeat its parent's ids)."""
        import os
        seed = os.urandom(32)
        self.s0 = int.from_bytes(seed[0:8], "little") | 1
        self.s1 = int.from_bytes(seed[8:16], "little")
        self.s2 = int.from_bytes(seed[16:24], "little")
        self.s3 = int.from_bytes(seed[24:32], "little")

    cdef inline uint64_t _next(self):
        cdef uint64_t result = _rotl(self.s1 * 5, 7) * 9
        cdef uint64_t t = self.s1 << 17
        self.s2 ^= self.s0
        self.s3 ^= self.s1
        self.s1 ^= self.s2
        self.s0 ^= self.s3
        self.s2 ^= t
        self.s3 = _rotl(self.s3, 45)
        return result

    cdef inline bint _sampled(self, uint64_t low):
        return self.sample_all or low < self.bound

    cdef Span _new(self, str name, int kind, object attrs, Span parent, object links):
        """A span under `parent` (None: the root of a new trace)."""
        cdef Span span = Span.__new__(Span)
        if parent is not None:
            span.trace_hi, span.trace_lo, span.parent_sid = parent.trace_hi, parent.trace_lo, parent.sid
            span.sampled = parent.sampled
        else:
            span.trace_hi = self._next()
            span.trace_lo = self._next() or 1
            span.parent_sid = 0
            span.sampled = self._sampled(span.trace_lo)
        span.sid = self._next() or 1
        span.name, span.kind, span.attrs, span.links = name, kind, attrs, links
        span.start = self.time_ns()
        return span

    cdef int _end(self, Span span, object status) except -1:
        if span.sampled:
            self._queue(_encode_live(span.trace_hi, span.trace_lo, span.sid, span.parent_sid, span.name, span.kind,
                                     span.start, self.time_ns(), span.attrs, span.links, status, span.events))
        return 0

    cdef int _queue(self, bytes encoded) except -1:
        cdef Py_ssize_t queued = len(self.queue)
        if queued >= self.queue_max:
            self.exporter.dropped += 1
            return 0
        self.queue.append(encoded)
        if queued + 1 == self.batch:
            self.exporter.batch_full()
        return 0

    cdef Span _current(self):
        return <Span?> get_value(self.current_var)

    def _remember(self, key, fixed):
        if len(self.fixed) >= 4096:  # a server whose rules keep changing: start again
            self.fixed.clear()
        self.fixed[key] = fixed
        return fixed

    def request(self, raw_headers, method, path, rid, callback):
        cdef Current current = Current.__new__(Current)
        cdef Span span
        incoming = None
        for key, value in raw_headers:
            if key == b"traceparent":
                incoming = self.parse_traceparent(value.decode("latin-1"))
        attrs = {"http.request.method": method, "url.path": path, "txcl.request_id": rid}
        current.tracer = self
        if callback:  # linked to the worker's span, not its child
            links = [(incoming[0], incoming[1], {"txcl.link": "worker"})] if incoming else None
            current.span = self._new("txcl callback", 2, attrs, None, links)
            current.is_request = False
            return current
        span = self._new("txcl request", 2, attrs, None, None)
        if incoming is not None:  # the trace the caller is in
            trace_id, parent_id, parent_sampled = incoming
            span.trace_hi = <uint64_t> (trace_id >> 64)
            span.trace_lo = PyLong_AsUnsignedLongLongMask(trace_id)
            span.parent_sid = PyLong_AsUnsignedLongLongMask(parent_id)
            span.sampled = parent_sampled if self.parent_based else self._sampled(span.trace_lo)
        current.span = span
        current.is_request = True
        return current

    def inject(self, headers):
        span = get_value(self.current_var)
        if span is not None:
            headers["traceparent"] = span.traceparent()

    def segment(self, run, str kind):
        cdef Segment segment = Segment.__new__(Segment)
        cdef Span here = None
        cdef Span span
        cdef Span releaser
        segment.tracer, segment.run = self, run
        if kind == "request":
            here = <Span?> get_value(self.request_var)
        if here is not None and here is get_value(self.current_var):
            if here.sampled:
                attrs = here.attrs
                attrs["txcl.stack"] = run.entry_stack or ""
                attrs["txcl.segment"] = kind
                if run.run_id:
                    attrs["txcl.run_id"] = run.run_id
            segment.span, segment.own = here, False
        else:
            attrs = {"txcl.request_id": run.rid, "txcl.stack": run.entry_stack or "", "txcl.segment": kind}
            if run.run_id:
                attrs["txcl.run_id"] = run.run_id
            links = None
            if kind == "resume":
                links = []
                parked = self.parse_traceparent(run.trace_context)
                if parked is not None:
                    links.append((parked[0], parked[1], {"txcl.link": "parked"}))
                releaser = self._current()
                if releaser is not None:
                    links.append((releaser.trace_id, releaser.sid, {"txcl.link": "released_by"}))
                span = self._new("txcl segment", 1, attrs, None, links)
            else:
                span = self._new("txcl segment", 1, attrs, self._current(), None)
            segment.span, segment.own = span, True
        run.traced = segment.span.sampled
        run.trace_span = segment.span
        return segment

    def open_scope(self, run):
        cdef Span span
        stack = run.stack
        found = self.fixed.get(stack)
        if found is None:
            found = self._remember(stack, (self.fixed_class({"txcl.stack": stack}), "txcl scope " + stack))
        rid, run_id = run.rid, run.run_id
        own = {"txcl.request_id": rid, "txcl.run_id": run_id} if run_id else {"txcl.request_id": rid}
        span = self._new(<str> found[1], 1, (found[0], own), self._current(), None)
        span.token = PyContextVar_Set(self.current_var, span)
        return span

    def close_scope(self, Span span):
        PyContextVar_Reset(self.current_var, span.token)
        span.token = None
        self._end(span, None)

    def local_scope(self, run, stack, double started):
        cdef Span parent = self._current()
        cdef int64_t duration_ns
        if parent is None or not parent.sampled:
            return
        duration_ns = <int64_t> ((self.perf_counter() - started) * 1e9)
        events = parent.events
        if events is None:
            events = parent.events = []
        if len(events) < 128:
            events.append((self.time_ns() - duration_ns, stack, duration_ns))

    def op(self, run, frame, op, transport, status, double started_wall, double duration_s, error, bytes_in,
           bytes_out):
        cdef Span parent = self._current()
        cdef uint64_t hi, lo, parent_sid, start
        if parent is not None:
            if not parent.sampled:
                return
            hi, lo, parent_sid = parent.trace_hi, parent.trace_lo, parent.sid
        else:
            hi, lo, parent_sid = self._next(), self._next() or 1, 0
            if not self._sampled(lo):
                return
        target = op.target
        key = (frame.stack, frame.scope, op.stack, op.name, transport, status,
               getattr(target, "url", None) if target is not None else None)
        found = self.fixed.get(key)
        if found is None:
            found = self._remember(key, (self.fixed_class(self.op_fixed(frame, op, transport, status)),
                                         "txcl op " + op.name))
        run_id = run.run_id
        own = {"txcl.request_id": run.rid, "txcl.fuel": int(run.budget.fuel_used)}
        if run_id:
            own["txcl.run_id"] = run_id
        if bytes_in is not None:
            own["txcl.bytes_in"] = bytes_in
        if bytes_out is not None:
            own["txcl.bytes_out"] = bytes_out
        start = <uint64_t> (started_wall * 1e9)
        failed = status not in ("ok", "pending", "completed")
        self._queue(_encode_live(hi, lo, self._next() or 1, parent_sid, <str> found[1], 1, start,
                                 start + <uint64_t> (duration_s * 1e9), (found[0], own), None,
                                 (2, error or status) if failed else None, None))
