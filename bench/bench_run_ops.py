"""Heartbeats and a cancellation storm on a real `txcl serve`, on each store backend, beside
the backend's bare single-row commits measured in the same run.

A test worker on 127.0.0.1 acks every dispatch 202 with a `cancel_url` and keeps each call's
callback URL and token. The stack's one op is `WITH mode = "async", heartbeat = "1h"`, so
every request parks.

1. **Heartbeats**: N parked runs; their workers POST `{"status": "running", "progress": …}`
   to the callback URLs, 16 in flight on kept-alive connections, in R rounds of M beats each
   (median of the rounds). Then every run is completed by its callback (the same 16 in flight):
   completion callbacks/s, and runs finished/s until the last resume finished. Each heartbeat
   and each completion is one transaction; the ratios compare them with raw commits/s.
2. **Cancellation storm** (K times, medians): S parked runs (default 1,000) are cancelled at once through
   `POST /_txc/admin/runs/<id>/cancel` (16 in flight): seconds until every cancel was answered,
   cancels/s, the median and 95th percentile of one cancel's latency, and seconds until the
   worker received all S cancellations at its cancel URL.

Run: python bench/bench_run_ops.py [--backend sqlite|postgresql|both] [--runs N] [--beats M]
     [--rounds R] [--storm S] [--storms K]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _backends import Backends, raw_commits  # noqa: E402
from _serve import start_serve  # noqa: E402

TOKEN = "bench-admin-token-0123456789abcdef"
IN_FLIGHT = 16


class Worker:
    """Acks 202 with a cancel URL; remembers (callback URL, token) per call; counts cancels."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.cancels = 0
        self.lock = threading.Lock()
        worker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # answer at once on kept-alive connections

            def log_message(self, *args):  # noqa: ANN002
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if self.path.startswith("/cancel/"):
                    with worker.lock:
                        worker.cancels += 1
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with worker.lock:
                    worker.calls.append((body["_txc"]["callback_url"], self.headers["X-Txco-Continuation-Token"]))
                    n = len(worker.calls)
                payload = json.dumps({"job_id": f"j{n}", "cancel_url": f"{worker.base}/cancel/{n}"}).encode()
                self.send_response(202)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket.listen(512)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


class Client(threading.local):
    conn: http.client.HTTPConnection | None = None


_client = Client()


def request(method: str, url: str, body: dict | None = None, headers: dict | None = None) -> int:
    """One request on this thread's kept-alive connection (reopened once when it broke)."""
    parts = urllib.parse.urlsplit(url)
    data = json.dumps(body).encode() if body is not None else None
    for _ in range(2):
        if _client.conn is None:
            _client.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            _client.conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), data,
                                 {"Content-Type": "application/json", **(headers or {})})
            response = _client.conn.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            _client.conn.close()
            _client.conn = None
    raise RuntimeError(f"{method} {url} failed twice")


def fan_out(pool: ThreadPoolExecutor, calls: list) -> tuple[float, list[int], list[float]]:
    """Run `calls` (method, url, body, headers) IN_FLIGHT at a time: (seconds, statuses, latencies)."""
    def one(call):
        t0 = time.perf_counter()
        status = request(*call)
        return status, time.perf_counter() - t0

    started = time.perf_counter()
    results = list(pool.map(one, calls))
    return time.perf_counter() - started, [r[0] for r in results], [r[1] for r in results]


def workspace(root: Path, url: str) -> Path:
    rule = root / "OPS" / "shop" / "100" / "job.txcl"
    rule.parent.mkdir(parents=True, exist_ok=True)
    rule.write_text(f'WITH mode = "async", heartbeat = "1h", timeout = "2h", into = "job"\nEXEC "{url}"\n')
    return root


def park(pool: ThreadPoolExecutor, base: str, worker: Worker, n: int) -> list[tuple[str, str]]:
    before = len(worker.calls)
    _, statuses, _ = fan_out(pool, [("GET", f"{base}/go", None, None)] * n)
    assert all(s == 202 for s in statuses), set(statuses)
    deadline = time.monotonic() + 60
    while len(worker.calls) < before + n and time.monotonic() < deadline:
        time.sleep(0.01)
    return worker.calls[before:before + n]


def wait_for(predicate, timeout: float = 300.0) -> float:
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > timeout:
            raise RuntimeError("timed out waiting")
        time.sleep(0.02)
    return time.perf_counter() - started


def storm(pool: ThreadPoolExecutor, base: str, worker: Worker, store, n: int) -> tuple[float, float, float, float]:
    """Park `n` runs, cancel them all at once: (seconds for the cancels, seconds until the worker
    had every cancellation, median and p95 ms of one cancel)."""
    park(pool, base, worker, n)
    runs = store.list_runs(status="waiting", limit=n + 10)
    assert len(runs) == n, len(runs)
    cancels_before = worker.cancels
    auth = {"Authorization": f"Bearer {TOKEN}"}
    seconds, statuses, latencies = fan_out(pool, [
        ("POST", f"{base}/_txc/admin/runs/{r.run_id}/cancel", {"reason": "storm"}, auth) for r in runs])
    assert all(s == 200 for s in statuses), set(statuses)
    delivered = seconds + wait_for(lambda: worker.cancels - cancels_before >= n)
    latencies.sort()
    return seconds, delivered, statistics.median(latencies) * 1000, latencies[int(len(latencies) * 0.95)] * 1000


def run_backend(name: str, db: str, raw: float, args: argparse.Namespace) -> None:
    from txcl.continuations.service import open_run_store

    worker = Worker()
    tmp = Path(db).parent if name == "sqlite" else Path(__import__("tempfile").mkdtemp())
    ws = workspace(tmp / f"ws-{name}", worker.base + "/jobs")
    proc, base = start_serve(str(ws), "--db", db, "--admin-token", TOKEN, "--continuation-sweep-period", "0",
                             "--trace-mode", "off")
    store = open_run_store(db, node_id="bench-reader")
    pool = ThreadPoolExecutor(IN_FLIGHT)
    try:
        calls = park(pool, base, worker, args.runs)
        rates = []
        for r in range(args.rounds):
            beats = [("POST", calls[i % len(calls)][0], {"status": "running", "progress": {"done": r, "total": 9}},
                      {"Authorization": f"Bearer {calls[i % len(calls)][1]}"}) for i in range(args.beats)]
            seconds, statuses, _ = fan_out(pool, beats)
            assert all(s == 200 for s in statuses), set(statuses)
            rates.append(args.beats / seconds)
        beat_rate = statistics.median(rates)
        done = [("POST", url, {"status": "completed", "output": {"ok": 1}}, {"Authorization": f"Bearer {token}"})
                for url, token in calls]
        seconds, statuses, _ = fan_out(pool, done)
        assert all(s == 200 for s in statuses), set(statuses)
        completion_rate = len(done) / seconds
        finished = seconds + wait_for(lambda: len(store.list_runs(status="completed", limit=args.runs + 1))
                                      >= args.runs)
        print(f"{name:<10} heartbeats admitted        {beat_rate:>9.0f}/s   (median of {args.rounds} rounds of "
              f"{args.beats}, {IN_FLIGHT} in flight)")
        print(f"{name:<10} completion callbacks       {completion_rate:>9.0f}/s   heartbeat : completion "
              f"{beat_rate / completion_rate:.2f}")
        print(f"{name:<10} runs finished (resumed)    {args.runs / finished:>9.0f}/s")
        print(f"{name:<10} raw single-row commits     {raw:>9.0f}/s   heartbeats : raw commits "
              f"{beat_rate / raw:.3f}")

        storms = [storm(pool, base, worker, store, args.storm) for _ in range(args.storms)]
        seconds = statistics.median(s[0] for s in storms)
        delivered = statistics.median(s[1] for s in storms)
        median_ms = statistics.median(s[2] for s in storms)
        p95_ms = statistics.median(s[3] for s in storms)
        print(f"{name:<10} cancellation storm         {args.storm} runs cancelled in {seconds:.2f} s "
              f"= {args.storm / seconds:.0f}/s; one cancel: median {median_ms:.1f} ms, p95 {p95_ms:.1f} ms "
              f"(medians of {args.storms} storms)")
        print(f"{name:<10} worker cancellations       all {args.storm} delivered {delivered:.2f} s after the storm "
              f"began; storm cancels : raw commits {args.storm / seconds / raw:.3f}")
    finally:
        pool.shutdown()
        proc.terminate()
        proc.wait(15)
        store.close()
        worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--runs", type=int, default=200, help="parked runs that send heartbeats")
    parser.add_argument("--beats", type=int, default=2000, help="heartbeats per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--storm", type=int, default=1000, help="runs cancelled at once")
    parser.add_argument("--storms", type=int, default=3, help="storms (medians are printed)")
    args = parser.parse_args()
    names = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with Backends(names) as backends:
        for name, fresh in backends:
            raw = raw_commits(name, fresh(), 500)
            run_backend(name, fresh(), raw, args)


if __name__ == "__main__":
    main()
