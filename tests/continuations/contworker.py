"""A real test worker: an HTTP server on 127.0.0.1 that acks 202 and
calls back when the test tells it to, recording every request and its peak in-flight count.

    with TestWorker() as w:
        url = w.url("/jobs")              # EXEC target
        job = w.wait_job()                # blocks until a dispatch arrives
        w.callback(job, {"ok": 1})        # POST {"status": "completed", "output": …}

`mode` switches the ack: "ack" (202), "status:<n>" (that status), "hang" (never answers in
time), "callback-first" (calls back before acking, from the request thread). With
`cancel_urls=True` each ack names a cancel URL (`/cancel/<n>`); POSTs there are recorded in
`cancels` (not as jobs) and answered with the next of `cancel_statuses` (200 once those run out).
`ack_statuses` answers the first dispatches with those statuses (then 202).
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.define
class Job:
    path: str
    body: dict
    headers: dict
    received: float

    @property
    def opc(self) -> str:
        return self.body["_txc"]["op_continuation_id"]

    @property
    def token(self) -> str | None:
        return self.headers.get("x-txco-continuation-token")

    @property
    def callback_url(self) -> str | None:
        return self.body["_txc"].get("callback_url")


def post_json(url: str, payload: Any, token: str | None = None, *, raw: bytes | None = None,
              headers: dict | None = None, timeout: float = 10.0) -> tuple[int, Any]:
    data = raw if raw is not None else json.dumps(payload).encode("utf-8")
    req = urllib.request.Request(url, data=data, method="POST")
    req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body else None
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body) if body else None
        except ValueError:
            return exc.code, body.decode("utf-8", "replace")


class TestWorker:
    __test__ = False

    def __init__(self, mode: str = "ack", callback_output: Any = None, *, cancel_urls: bool = False,
                 cancel_statuses: tuple[int, ...] = (), ack_statuses: tuple[int, ...] = ()):
        self.mode = mode
        self.ack_statuses = list(ack_statuses)
        self.cancel_urls = cancel_urls
        self.cancel_statuses = list(cancel_statuses)
        self.cancels: list[Job] = []
        self.callback_output = callback_output
        self.jobs: list[Job] = []
        self.queue: "queue.Queue[Job]" = queue.Queue()
        self.in_flight = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.callbacks: list[tuple[int, Any]] = []
        worker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                job = Job(self.path, body, {k.lower(): v for k, v in self.headers.items()}, time.time())
                if self.path.startswith("/cancel/"):
                    with worker.lock:
                        worker.cancels.append(job)
                        answer = worker.cancel_statuses.pop(0) if worker.cancel_statuses else 200
                    self.send_response(answer)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with worker.lock:
                    worker.jobs.append(job)
                    worker.in_flight += 1
                    worker.peak = max(worker.peak, worker.in_flight)
                mode = worker.mode
                if mode == "hang":
                    time.sleep(3)
                if mode == "callback-first":
                    worker.callback(job, worker.callback_output or {"early": True})
                with worker.lock:
                    scripted = worker.ack_statuses.pop(0) if worker.ack_statuses else None
                if scripted is not None:
                    status, payload = scripted, b'{"error": "not now"}'
                elif mode.startswith("status:"):
                    status = int(mode.split(":", 1)[1])
                    payload = b'{"error": "no"}'
                else:
                    status = 202
                    ack: dict[str, Any] = {"job_id": f"job-{len(worker.jobs)}"}
                    if worker.cancel_urls:
                        ack["cancel_url"] = worker.url(f"/cancel/{len(worker.jobs)}")
                    payload = json.dumps(ack).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass
                worker.queue.put(job)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "TestWorker":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def url(self, path: str = "/jobs") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_job(self, timeout: float = 10.0) -> Job:
        return self.queue.get(timeout=timeout)

    def callback(self, job: Job, output: Any = None, *, status: str = "completed", error: Any = None,
                 token: str | None = "<job>", url: str | None = None, retryable: bool = False) -> tuple[int, Any]:
        body: dict[str, Any] = {"status": status}
        if status == "completed":
            body["output"] = output if output is not None else {}
        elif error is not None:
            body["error"] = error
        if retryable:
            body["retryable"] = True
        result = post_json(url or job.callback_url, body, job.token if token == "<job>" else token)
        with self.lock:
            self.in_flight -= 1
            self.callbacks.append(result)
        return result
