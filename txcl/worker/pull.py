"""The pull side of the worker SDK: claim jobs of `queue://` ops from txcl and run them.

    worker = Worker()

    @worker.op("resize")
    async def resize(job): ...

    await worker.pull("http://txcl.internal:8080", token=os.environ["TXCL_QUEUE_TOKEN"])

or `txcl worker pull module:worker --server http://txcl.internal:8080`. Each op name is a queue
name (`@worker.op("resize")` takes the jobs of `EXEC "queue://resize"`). The client long-polls
`POST /_txc/queues/<name>/claim` for as many jobs as it has free slots (`concurrency` in all),
runs each as the push side does (same `Job`, retries, failures, idempotency), heartbeats at a
third of the lease so the job stays its own, and stops a job whose heartbeat is answered 410
(its run was cancelled). Each answer asks for the queue's next job (`?claim=`): the job the
answer lets out comes back with its acknowledgement, without a claim request of its own. The worker needs no open port: it only makes outgoing requests.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import urlencode

import httpx

from txcl.worker.job import Job
from txcl.worker.slots import Slots, check_ops, run_fetch_loops

if TYPE_CHECKING:
    from txcl.worker.app import Worker

log = logging.getLogger("txcl.worker")

CLAIM_PATH = "/_txc/queues/{}/claim"
GATHER_S = 0.0


class ClaimRefused(Exception):
    """txcl refused the claims for good (a wrong token, a queue name it does not take)."""


def job_from_claim(body: dict, client: Any) -> Job:
    """A claimed job (see txcl.serve.queues) as the SDK's `Job`."""
    txc = body.get("_txc") if isinstance(body.get("_txc"), dict) else {}
    headers = {"x-txco-continuation-token": body.get("token") or "",
               "idempotency-key": body.get("idempotency_key") or ""}
    job = Job.from_dispatch({"input": body.get("input"), "_txc": txc}, headers, client)
    lease_ms = txc.get("lease_ms")
    if isinstance(lease_ms, int) and lease_ms > 0:  # heartbeats at a third of the lease, at least
        every = lease_ms * 2 // 3
        job.heartbeat_ms = min(job.heartbeat_ms, every) if job.heartbeat_ms else every
    return job


class PullClient:
    """Claims and runs the jobs of one worker's ops until `stop` is set."""

    def __init__(self, worker: "Worker", server: str, *, queues: Sequence[str] | None = None,
                 token: str | None = None, concurrency: int = 4, wait_s: float = 20.0,
                 lease_s: float | None = None, name: str | None = None) -> None:
        self.worker = worker
        self.server = server.rstrip("/")
        self.queues = check_ops(queues, worker.ops, "no op for queue")
        self.token = token
        self.slots = Slots(concurrency, len(self.queues), GATHER_S)
        self.wait_s = wait_s
        self.lease_s = lease_s
        self.name = name
        self.stop = asyncio.Event()
        self.tasks: set[asyncio.Task] = set()
        self.claimed = 0

    async def run(self) -> None:
        """Claim until `stop` is set (or a claim is refused for good), then let running jobs finish."""
        client = self.worker._client()
        await run_fetch_loops([self._claim_loop(client, q) for q in self.queues], self.stop, self.tasks)

    async def _claim_loop(self, client: httpx.AsyncClient, queue: str) -> None:
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        url = self.server + CLAIM_PATH.format(queue)
        backoff = 0.2
        while not self.stop.is_set():
            free = await self.slots.reserve()
            body: dict[str, Any] = {"max": free, "wait": self.wait_s}
            if self.lease_s is not None:
                body["lease"] = self.lease_s
            if self.name:
                body["worker"] = self.name
            jobs: list = []
            failed = True
            try:
                answer = await client.post(url, json=body, headers=headers, timeout=self.wait_s + 30)
                if answer.status_code in (400, 401, 403, 404):
                    raise ClaimRefused(f"claims from {url} refused ({answer.status_code}): {answer.text[:300]}")
                if answer.status_code == 200:
                    jobs = list(answer.json().get("jobs") or [])[:free]
                    failed = False
                else:
                    log.warning("txcl worker: claim from %s answered %d; trying again", queue, answer.status_code)
            except (httpx.HTTPError, ValueError) as exc:
                log.info("txcl worker: claim from %s failed (%s); trying again", queue, exc)
            finally:
                self.slots.give_back(free - len(jobs))
            for raw in jobs:
                self._start(client, queue, raw)
            if failed:  # the server is away or busy: wait longer each time (an empty answer waited already)
                await asyncio.sleep(backoff * (1 + random.random() / 2))
                backoff = min(backoff * 2, 5.0)
            else:
                backoff = 0.2

    def _start(self, client: httpx.AsyncClient, queue: str, raw: dict) -> None:
        self.claimed += 1
        job = job_from_claim(raw, client)
        if job.callback_url:  # its answer asks for the next job of the queue: one claim request less a job
            query = urlencode({"claim": queue, "max": 1, **({"worker": self.name} if self.name else {}),
                               **({"lease": self.lease_s} if self.lease_s is not None else {})})
            job.callback_url += ("&" if "?" in job.callback_url else "?") + query
            if self.token:
                job.extra_headers = {"x-txcl-queue-token": self.token}
            job.on_answer = lambda answer, q=queue: self._handed(client, q, answer)
        task = asyncio.get_running_loop().create_task(self._run(queue, job))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _handed(self, client: httpx.AsyncClient, queue: str, answer: dict) -> None:
        """Jobs that came back with a callback's answer: started at once, each in a slot of its
        own (the finishing job gives its slot back right after)."""
        jobs = answer.get("jobs")
        if not isinstance(jobs, list) or self.stop.is_set():
            return
        for raw in jobs:
            if isinstance(raw, dict):
                self.slots.take()
                self._start(client, queue, raw)

    async def _run(self, queue: str, job: Job) -> None:
        try:
            await self.worker.run_job(self.worker.ops[queue], job)
        finally:
            self.slots.give_back(1)


__all__ = ["PullClient", "ClaimRefused", "job_from_claim"]
