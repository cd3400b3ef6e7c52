"""The server's metrics: what happens (requests, ops, callbacks, store commits, …) recorded
through one object, exported by whichever backends are on.

`current` is the process's recorder. It is a :class:`Metrics` whose methods do nothing until
`txcl serve --metrics` (the Prometheus endpoint, :mod:`txcl.metrics_prometheus`) or the
OpenTelemetry meter (:mod:`txcl.otel`) installs a real one, so the code that reports an
event costs one method call when metrics are off. Several backends at once are a
:class:`Fanout`.

Every metric, its labels and its meaning are listed in :data:`CATALOGUE`, the one source of
the Prometheus names, the OpenTelemetry instruments and the metrics table of the operating
guide.
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs


NAMESPACE = "txcl"  # every metric's name starts with it: txcl_requests_total, …


@attrs.frozen
class MetricSpec:
    name: str  # without the namespace (NAMESPACE) and the _total suffix a counter gets
    kind: str  # counter | histogram | gauge
    labels: tuple[str, ...]
    doc: str
    unit: str = ""  # seconds | "" (the OpenTelemetry unit is derived)


CATALOGUE: tuple[MetricSpec, ...] = (
    MetricSpec("requests", "counter", ("stack", "status"),
               "Requests answered, by the stack they ran and the HTTP status of the answer."),
    MetricSpec("request_duration_seconds", "histogram", ("stack",),
               "Time from a request's first byte to its answer (a suspended request: to its 202).", "seconds"),
    MetricSpec("scope_duration_seconds", "histogram", ("stack",),
               "Time one scope of a stack took, from entering it to leaving it.", "seconds"),
    MetricSpec("op_duration_seconds", "histogram", ("scheme", "outcome"),
               "Time of one op call, by how it ran (http, mcp, py, txco for builtins, mock, async for a "
               "dispatch) and its outcome (ok, error, timeout, cancelled; pending for an async dispatch).",
               "seconds"),
    MetricSpec("fuel_used", "counter", ("stack",), "Fuel the requests of each stack used."),
    MetricSpec("runs", "gauge", ("state",), "Open durable runs by state (active, waiting, resuming)."),
    MetricSpec("parked_runs", "gauge", ("age",),
               "Runs waiting at a suspend, by how long they have waited (1m, 10m, 1h, 1d, older)."),
    MetricSpec("oldest_parked_run_age_seconds", "gauge", (),
               "How long the longest-waiting parked run has waited.", "seconds"),
    MetricSpec("itemized_items", "gauge", ("op", "unit", "state"),
               "Items of each open itemized unit: queued behind the window, or in flight at a worker."),
    MetricSpec("queue_jobs", "gauge", ("queue", "state"),
               "Jobs of each pull queue (queue:// ops): ready for a worker to claim, or leased to one."),
    MetricSpec("queue_oldest_ready_age_seconds", "gauge", ("queue",),
               "How long the oldest ready job of each pull queue has waited for a worker.", "seconds"),
    MetricSpec("callbacks", "counter", ("outcome", "code"),
               "Worker callbacks by outcome (resumed, recorded, duplicate, conflict, rejected) and, "
               "for a rejected one, its error code."),
    MetricSpec("sweeper_repairs", "counter", ("kind",), "Repairs the sweeper made, by kind."),
    MetricSpec("store_commit_duration_seconds", "histogram", (),
               "Time of one store transaction, from its start to its commit.", "seconds"),
    MetricSpec("store_retries", "counter", (), "Store transactions tried again after a conflict or a busy database."),
    MetricSpec("cancellations", "counter", ("outcome",),
               "Cancel calls to workers by outcome (delivered, retry, abandoned)."),
    MetricSpec("retries_sent", "counter", (), "Async calls sent again under WITH retries."),
    MetricSpec("telemetry_dropped", "counter", ("reason",),
               "Application metric intents (EMIT @telemetry.metrics) dropped, by reason."),
)
SPECS = {spec.name: spec for spec in CATALOGUE}

#: histogram buckets (seconds): from a fused local scope to a slow remote op
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The recorder's interface; this base class records nothing (metrics off)."""

    enabled = False

    def request(self, stack: str, status: int, seconds: float, fuel: int) -> None: ...
    def scope(self, stack: str, seconds: float) -> None: ...
    def op(self, scheme: str, outcome: str, seconds: float) -> None: ...
    def callback(self, outcome: str, code: str = "") -> None: ...
    def sweeper(self, kind: str, count: int = 1) -> None: ...
    def commit(self, seconds: float) -> None: ...
    def store_retry(self) -> None: ...
    def cancellation(self, outcome: str) -> None: ...
    def retry_sent(self, count: int = 1) -> None: ...
    def dropped(self, reason: str) -> None: ...
    def application(self, name: str, kind: str, value: float, attrs: dict[str, str], unit: str | None) -> None: ...
    def open_work(self, snapshot: dict) -> None: ...


class Fanout(Metrics):
    """Every event to each of several recorders."""

    enabled = True

    def __init__(self, parts: Iterable[Metrics]) -> None:
        self.parts = tuple(parts)

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name in ("parts", "enabled"):
            return object.__getattribute__(self, name)
        parts = object.__getattribute__(self, "parts")

        def each(*args: Any, **kwargs: Any) -> None:
            for part in parts:
                getattr(part, name)(*args, **kwargs)
        return each


OFF = Metrics()
current: Metrics = OFF


def install(recorder: Metrics) -> None:
    """Add a recorder (the Prometheus registry, the OpenTelemetry meter) to the process's."""
    global current
    if current is OFF:
        current = recorder
    elif isinstance(current, Fanout):
        current = Fanout((*current.parts, recorder))
    else:
        current = Fanout((current, recorder))


def reset() -> None:
    """Metrics off again (tests, and a server that stops)."""
    global current
    current = OFF


__all__ = ["NAMESPACE", "Metrics", "Fanout", "MetricSpec", "CATALOGUE", "SPECS", "LATENCY_BUCKETS", "current", "install",
           "reset", "OFF"]
