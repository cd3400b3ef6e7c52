"""The Prometheus side of txcl's metrics (the `metrics` extra: `prometheus_client`).

`txcl serve --metrics` installs a :class:`PrometheusMetrics`; `GET /_txc/metrics` (or the
`--metrics-port` listener) answers its registry in the text exposition format, written by
`prometheus_client`. Each serve process exports its own numbers; see the operating guide for
adding them up across processes and nodes.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from txcl.metrics import CATALOGUE, LATENCY_BUCKETS, NAMESPACE, Metrics

_APP_PREFIX = "app"  # application metrics: txcl_app_<name>
_MAX_APP_METRICS = 256


def _instrument(spec: Any, registry: CollectorRegistry) -> Any:
    name = spec.name.removesuffix("_total")
    if spec.kind == "counter":
        return Counter(name, spec.doc, spec.labels, namespace=NAMESPACE, registry=registry)
    if spec.kind == "histogram":
        return Histogram(name, spec.doc, spec.labels, namespace=NAMESPACE, registry=registry, buckets=LATENCY_BUCKETS)
    return Gauge(name, spec.doc, spec.labels, namespace=NAMESPACE, registry=registry)


class _StoreCounters(Collector):
    """Retries the store made, read from its own counter at each scrape (no cost per event)."""

    def __init__(self, read: Callable[[], int]) -> None:
        self.read = read

    def collect(self) -> Any:
        family = CounterMetricFamily(f"{NAMESPACE}_store_retries", "Store transactions tried again after a "
                                     "conflict or a busy database.")
        family.add_metric([], float(self.read()))
        yield family

    def describe(self) -> Any:
        return []


class _Series:
    """The numbers of one label set of a hot metric, kept without prometheus_client's per-call
    locking: the event loop's thread is the only writer (a scrape from another thread may see
    one observation half-counted, never a wrong total afterwards)."""

    __slots__ = ("counts", "total", "count")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * (buckets + 1)
        self.total = 0.0
        self.count = 0


class _HotMetrics(Collector):
    """The per-request metrics (requests, fuel, request/scope/op latency): a dict lookup, a
    bisect and two additions per event. prometheus_client still writes the exposition: these
    are collected as its metric families."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str], float] = {}
        self.fuel: dict[str, float] = {}
        self.latency: dict[str, dict[tuple[str, ...], _Series]] = {
            "request_duration_seconds": {}, "scope_duration_seconds": {}, "op_duration_seconds": {}}

    def series(self, name: str, labels: tuple[str, ...]) -> _Series:
        table = self.latency[name]
        found = table.get(labels)
        if found is None:
            found = table[labels] = _Series(len(LATENCY_BUCKETS))
        return found

    def collect(self) -> Any:
        from prometheus_client.core import HistogramMetricFamily

        from txcl.metrics import SPECS

        family = CounterMetricFamily(f"{NAMESPACE}_requests", SPECS["requests"].doc, labels=SPECS["requests"].labels)
        for (stack, status), value in list(self.requests.items()):
            family.add_metric([stack, status], value)
        yield family
        family = CounterMetricFamily(f"{NAMESPACE}_fuel_used", SPECS["fuel_used"].doc, labels=("stack",))
        for stack, value in list(self.fuel.items()):
            family.add_metric([stack], value)
        yield family
        bounds = [str(b) for b in LATENCY_BUCKETS] + ["+Inf"]
        for name, table in self.latency.items():
            spec = SPECS[name]
            hist = HistogramMetricFamily(f"{NAMESPACE}_{name}", spec.doc, labels=spec.labels)
            for labels, series in list(table.items()):
                running, buckets = 0, []
                for bound, count in zip(bounds, series.counts):
                    running += count
                    buckets.append((bound, running))
                hist.add_metric(list(labels), buckets, series.total)
            yield hist

    def describe(self) -> Any:
        return []


class PrometheusMetrics(Metrics):
    enabled = True

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry or CollectorRegistry()
        if process:
            from prometheus_client import GCCollector, PlatformCollector, ProcessCollector

            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        hot = ("requests", "fuel_used", "request_duration_seconds", "scope_duration_seconds", "op_duration_seconds")
        self.hot = _HotMetrics()
        self.registry.register(self.hot)
        self.m = {spec.name: _instrument(spec, self.registry) for spec in CATALOGUE
                  if spec.name != "store_retries" and spec.name not in hot}
        self._children: dict[tuple, Any] = {}  # (metric, labels) -> child: labels() costs more than inc()
        self._per_request: dict[str, _Series] = {}
        self._per_scope: dict[str, _Series] = {}
        self._per_op: dict[tuple[str, str], _Series] = {}
        self._app: dict[str, tuple[Any, tuple[str, ...]]] = {}
        self._item_labels: set[tuple[str, str, str]] = set()
        self._queue_labels: set[str] = set()

    def watch_store(self, read_retries: Callable[[], int]) -> None:
        """Export the store's retry counter (read at scrape time)."""
        self.registry.register(_StoreCounters(read_retries))

    def _child(self, name: str, *labels: str) -> Any:
        key = (name, labels)
        child = self._children.get(key)
        if child is None:
            metric = self.m[name]
            child = metric.labels(*labels) if labels else metric
            if len(self._children) < 10_000:
                self._children[key] = child
        return child

    # ------------------------------------------------------------------ events
    # the per-request events (see _HotMetrics)
    def request(self, stack: str, status: int, seconds: float, fuel: int) -> None:
        hot = self.hot
        key = (stack, str(status))
        hot.requests[key] = hot.requests.get(key, 0.0) + 1
        series = self._per_request.get(stack)
        if series is None:
            series = self._per_request[stack] = hot.series("request_duration_seconds", (stack,))
        series.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        series.total += seconds
        if fuel:
            hot.fuel[stack] = hot.fuel.get(stack, 0.0) + fuel

    def scope(self, stack: str, seconds: float) -> None:
        series = self._per_scope.get(stack)
        if series is None:
            series = self._per_scope[stack] = self.hot.series("scope_duration_seconds", (stack,))
        series.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        series.total += seconds

    def op(self, scheme: str, outcome: str, seconds: float) -> None:
        series = self._per_op.get((scheme, outcome))
        if series is None:
            series = self._per_op[(scheme, outcome)] = self.hot.series("op_duration_seconds", (scheme, outcome))
        series.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        series.total += seconds

    def callback(self, outcome: str, code: str = "") -> None:
        self._child("callbacks", outcome, code).inc()

    def sweeper(self, kind: str, count: int = 1) -> None:
        if count:
            self._child("sweeper_repairs", kind).inc(count)

    def commit(self, seconds: float) -> None:
        self._child("store_commit_duration_seconds").observe(seconds)

    def cancellation(self, outcome: str) -> None:
        self._child("cancellations", outcome).inc()

    def retry_sent(self, count: int = 1) -> None:
        self._child("retries_sent").inc(count)

    def dropped(self, reason: str) -> None:
        self._child("telemetry_dropped", reason).inc()

    def application(self, name: str, kind: str, value: float, attrs: dict[str, str], unit: str | None) -> None:
        """One application metric (validated already): a counter or histogram named
        `txcl_app_<name>` (dots become underscores), its attributes as labels. A metric keeps
        the label names it was first seen with; an intent with other names is dropped."""
        found = self._app.get(name)
        keys = tuple(sorted(attrs))
        if found is None:
            if len(self._app) >= _MAX_APP_METRICS:
                self.dropped("too_many_metrics")
                return
            metric_name = f"{_APP_PREFIX}_{name.replace('.', '_')}"
            doc = f"Application metric {name} (EMIT @telemetry.metrics)."
            try:
                metric = (Counter(metric_name, doc, keys, namespace=NAMESPACE, registry=self.registry)
                          if kind == "counter" else
                          Histogram(metric_name, doc, keys, namespace=NAMESPACE, registry=self.registry))
            except ValueError:  # the name collides with another metric
                self.dropped("name_conflict")
                return
            found = self._app[name] = (metric, keys)
        metric, labels = found
        if labels != keys:
            self.dropped("attrs_changed")
            return
        child = metric.labels(*(attrs[k] for k in keys)) if keys else metric
        if kind == "counter":
            child.inc(value)
        else:
            child.observe(value)

    def open_work(self, snapshot: dict) -> None:
        runs = self.m["runs"]
        for state in ("active", "waiting", "resuming"):
            runs.labels(state).set(snapshot.get("runs", {}).get(state, 0))
        parked = self.m["parked_runs"]
        for age in ("1m", "10m", "1h", "1d", "older"):
            parked.labels(age).set(snapshot.get("parked_by_age", {}).get(age, 0))
        self.m["oldest_parked_run_age_seconds"].set(snapshot.get("oldest_parked_s", 0.0))
        items = self.m["itemized_items"]
        seen: set[tuple[str, str, str]] = set()
        for unit_id, counts in snapshot.get("units", {}).items():
            for state in ("queued", "in_flight"):
                key = (str(counts.get("op", "")), unit_id, state)
                items.labels(*key).set(counts.get(state, 0))
                seen.add(key)
        for gone in self._item_labels - seen:  # a unit that settled leaves no stale series
            try:
                items.remove(*gone)
            except KeyError:
                pass
        self._item_labels = seen
        jobs, oldest = self.m["queue_jobs"], self.m["queue_oldest_ready_age_seconds"]
        queues = snapshot.get("queues", {})
        for name, depth in queues.items():
            for state in ("ready", "leased"):
                jobs.labels(name, state).set(depth.get(state, 0))
            oldest.labels(name).set(depth.get("oldest_ready_s", 0.0))
        for gone in self._queue_labels - set(queues):  # a queue with no jobs left shows 0, then goes
            for state in ("ready", "leased"):
                try:
                    jobs.remove(gone, state)
                except KeyError:
                    pass
            try:
                oldest.remove(gone)
            except KeyError:
                pass
        self._queue_labels = set(queues)

    # ------------------------------------------------------------------ exposition
    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


__all__ = ["PrometheusMetrics"]
