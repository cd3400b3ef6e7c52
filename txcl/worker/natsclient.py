"""The NATS side of the worker SDK: take the jobs of `nats://` ops from JetStream and answer them.

    await worker.nats("nats://127.0.0.1:4222", concurrency=16)

or `txcl worker nats module:worker --nats nats://127.0.0.1:4222`. Each op name is a subject:
`@worker.op("resize")` takes the jobs txcl publishes to `txcl.jobs.resize` for
`EXEC "nats://resize"`, through the durable consumer `txcl_worker_resize` of the stream
`TXCL_JOBS` (shared by every worker of that op: each job goes to one of them). A job runs as
on the other sides (same `Job`, retries, failures, idempotency); its answer is published to the
job's reply subject with its token, retried until JetStream stores it, and only then is the
job acknowledged. Heartbeats are published too (txcl records their progress) and tell
JetStream the job is still being worked on. A worker that dies leaves its jobs
unacknowledged: JetStream hands them to another worker after the ack wait.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any, Sequence

from txcl.natsstreams import JOBS_PREFIX, JOBS_STREAM, fetch_ready
from txcl.values.jsonio import dumps_utf8, loads
from txcl.worker.job import Job
from txcl.worker.slots import Slots, check_ops, run_fetch_loops

if TYPE_CHECKING:
    from txcl.worker.app import Worker

log = logging.getLogger("txcl.worker")


def consumer_name(op: str) -> str:
    return "txcl_worker_" + op.replace(".", "_")


class NatsWorker:
    """Takes and runs the jobs of one worker's ops from NATS until `stop` is set."""

    def __init__(self, worker: "Worker", url: str, *, ops: Sequence[str] | None = None, concurrency: int = 4,
                 ack_wait_s: float = 60.0, name: str | None = None) -> None:
        self.worker = worker
        self.url = url
        self.ops = check_ops(ops, worker.ops, "no op")
        self.slots = Slots(concurrency, len(self.ops))
        self.ack_wait_s = ack_wait_s
        self.name = name
        self.stop = asyncio.Event()
        self.tasks: set[asyncio.Task] = set()
        self.js: Any = None
        self.taken = 0

    async def run(self) -> None:
        import nats

        from txcl.natsstreams import ensure_streams

        nc = await nats.connect(self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.5,
                                name=self.name or "txcl-worker")
        self.js = nc.jetstream()
        await ensure_streams(self.js)
        try:
            await run_fetch_loops([self._take_loop(op) for op in self.ops], self.stop, self.tasks)
        finally:
            await nc.close()

    async def _take_loop(self, op: str) -> None:
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.api import AckPolicy, ConsumerConfig

        subject = JOBS_PREFIX + op
        config = ConsumerConfig(durable_name=consumer_name(op), filter_subject=subject, ack_policy=AckPolicy.EXPLICIT,
                                ack_wait=self.ack_wait_s, max_ack_pending=-1)
        backoff = 0.2
        while not self.stop.is_set():
            try:
                sub = await self.js.pull_subscribe(subject, durable=consumer_name(op), stream=JOBS_STREAM, config=config)
                while not self.stop.is_set():
                    free = await self.slots.reserve()
                    messages: list = []
                    try:
                        messages = await fetch_ready(sub, free, 2.0)
                    except NatsTimeout:
                        pass
                    finally:
                        self.slots.give_back(free - len(messages))
                    for message in messages:
                        self._start(op, message)
                    backoff = 0.2
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the broker is away or restarting: attach again
                log.info("txcl worker: taking jobs of %s interrupted (%s); trying again", op, exc)
                await asyncio.sleep(backoff * (1 + random.random() / 2))
                backoff = min(backoff * 2, 5.0)

    def _start(self, op: str, message: Any) -> None:
        self.taken += 1
        task = asyncio.get_running_loop().create_task(self._run(op, message))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, op: str, message: Any) -> None:
        try:
            job = self._job(message)
            if job is None:
                await message.ack()  # not a job txcl wrote: nothing can answer it
                return
            await self.worker.run_job(self.worker.ops[op], job)
            await message.ack()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - left unacknowledged: JetStream delivers it again
            log.exception("txcl worker: a job of %s failed to run", op)
        finally:
            self.slots.give_back(1)

    def _job(self, message: Any) -> Job | None:
        try:
            body = loads(message.data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            log.warning("txcl worker: a message on %s is not JSON; dropped", message.subject)
            return None
        txc = body.get("_txc") if isinstance(body, dict) and isinstance(body.get("_txc"), dict) else None
        if txc is None or not txc.get("reply_subject"):
            log.warning("txcl worker: a message on %s is not a txcl job; dropped", message.subject)
            return None
        headers = message.headers or {}
        job = Job.from_dispatch({"input": body.get("input"), "_txc": txc},
                                {"x-txco-continuation-token": headers.get("Txcl-Token", ""),
                                 "idempotency-key": str(txc.get("op_continuation_id") or "")}, None)
        reply = str(txc["reply_subject"])
        token = headers.get("Txcl-Token", "")
        beats = max(1000, int(self.ack_wait_s * 1000 * 2 // 3))
        job.heartbeat_ms = min(job.heartbeat_ms, beats) if job.heartbeat_ms else beats

        async def post(answer: dict) -> Any:
            if answer.get("status") == "running":
                try:
                    await message.in_progress()  # the ack wait starts again
                except Exception:  # noqa: BLE001 - the broker is away: the heartbeat below may still go
                    pass
            wait = 0.2
            while True:
                try:
                    await self.js.publish(reply, dumps_utf8(answer), headers={"Txcl-Token": token}, timeout=5)
                    return {}
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - stored or not, it is sent again until it is
                    if answer.get("status") == "running":
                        return None  # a heartbeat is not worth waiting for
                    log.info("txcl worker: publishing the answer of %s failed (%s); trying again", job.opc, exc)
                    await asyncio.sleep(wait * (1 + random.random() / 2))
                    wait = min(wait * 2, 5.0)

        job.poster = post
        return job


__all__ = ["NatsWorker", "consumer_name"]
