# cython: language_level=3, boundscheck=False, wraparound=False
"""The OTLP span encoder of txcl.otlp, compiled: the same bytes as `txcl.otlp.encode_traces`,
written into one C buffer instead of joined from Python bytes objects.

A traced request makes three spans; encoding them in Python costs about as much CPU as the
rest of tracing together, and it runs on the server's process. Built by `pip install` when a
C compiler is there (setup.py); without it txcl.otlp encodes in Python, with the same output
(tests/test_otlp_loop.py compares the two).
"""

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLongMask
from cpython.exc cimport PyErr_Occurred
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
    cdef Py_ssize_t start, inner
    trace_id, span_id, parent, name, kind, start_ns, end_ns, attrs, links, status, events = span
    w.id_(1, trace_id, 16)
    w.id_(2, span_id, 8)
    if parent:
        w.id_(4, parent, 8)
    w.string(5, name)
    w.byte(0x30)
    w.varint(<uint64_t> <int64_t> kind)
    w.byte(0x39)
    w.fixed64(<uint64_t> start_ns)
    w.byte(0x41)
    w.fixed64(<uint64_t> end_ns)
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
