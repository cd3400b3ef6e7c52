"""`txcl serve --metrics`: the Prometheus endpoint and what feeds it.

`GET /_txc/metrics` answers the text exposition format (behind the admin token when one is
set), or, with `--metrics-port N`, a listener of its own on that port does (and the main port
has no metrics path). The gauges of open work — runs by state, parked runs by age, items per
itemized unit — are read from the store every `--metrics-refresh` (10 s) by one background
task, through indexes only, so scrapes cost the database nothing however often they come.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from txcl import metrics
from txcl import runtime_codes as rc
from txcl.ids import admin_token_matches
from txcl.serve.admin import bearer_token
from txcl.serve.shaping import Answer, error_payload, json_answer

log = logging.getLogger("txcl.serve")

PATH = "/_txc/metrics"


def setup_metrics(state: Any) -> Any:
    """Install the Prometheus recorder for this process (and its own listener with
    --metrics-port); the recorder, kept on the state."""
    from txcl.metrics_prometheus import PrometheusMetrics

    recorder = PrometheusMetrics()
    backend = getattr(state.store, "backend", None)
    if backend is not None and hasattr(backend, "retry_count"):
        recorder.watch_store(backend.retry_count)
    metrics.install(recorder)
    port = state.settings.metrics_port
    if port:
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=state.settings.host, registry=recorder.registry)
        recorder.listener = server
        log.info("txcl: Prometheus metrics at http://%s:%d/metrics", state.settings.host, server.server_port)
    return recorder


def stop_metrics(recorder: Any) -> None:
    listener = getattr(recorder, "listener", None)
    if listener is not None:
        listener.shutdown()
        listener.server_close()
    metrics.reset()


def metrics_answer(scope: dict, state: Any) -> Answer:
    token = state.settings.admin_token
    if token is not None:
        if not admin_token_matches(bearer_token(scope), token):
            return json_answer(401, error_payload(rc.UNAUTHORIZED.code, rc.UNAUTHORIZED.template),
                               [("www-authenticate", 'Bearer realm="txcl"'), ("cache-control", "no-store")])
    if scope.get("method") not in ("GET", "HEAD"):
        return json_answer(405, error_payload(rc.METHOD_NOT_ALLOWED.code, "method not allowed"), [("allow", "GET")])
    body, content_type = state.metrics.exposition()
    return Answer(200, [(b"content-type", content_type.encode("latin-1")), (b"cache-control", b"no-store")], body)


async def refresh_open_work(state: Any, service: Any) -> None:
    """Every --metrics-refresh: the open-work gauges from one indexed read (through the store
    lane, so it waits its turn like any store call)."""
    store = service.store
    period = max(0.1, state.settings.metrics_refresh / 1000.0)
    while True:
        try:
            snapshot = await service.call(store.open_work, store.now_ms())
            metrics.current.open_work(snapshot)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a database hiccup leaves the last numbers
            log.warning("txcl: metrics: reading open work failed: %s: %s", type(exc).__name__, exc)
        await asyncio.sleep(period)


__all__ = ["PATH", "setup_metrics", "stop_metrics", "metrics_answer", "refresh_open_work"]
