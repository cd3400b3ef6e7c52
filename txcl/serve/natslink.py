"""The NATS JetStream transport of `nats://<subject>` ops (`txcl serve --nats-url`; the `nats`
extra, nats-py).

Two work-queue streams, created when missing by every node and every SDK worker:

- ``TXCL_JOBS`` (subjects ``txcl.jobs.>``): each call of ``EXEC "nats://resize"`` is published
  to ``txcl.jobs.resize`` — the body a push worker would be sent, with ``_txc.reply_subject`` —
  and headers ``Txcl-Token`` (the call's token) and ``Nats-Msg-Id`` (JetStream drops a repeat
  of the same attempt). The call counts as acknowledged once JetStream has stored it.
- ``TXCL_DONE`` (subjects ``txcl.done.>``): the worker publishes its answer — the body of an
  HTTP callback (`{"status": "completed", "output": …}`, a failure, or a `running` heartbeat)
  with the ``Txcl-Token`` header — to the job's reply subject ``txcl.done.<unit id>.<opc>``.

The **live session**: the node that dispatched a unit reads its answers at once from a durable
consumer of its own (``txcl_<unit id>``), admits each through the callback admission (durably,
before anything else happens: the store promotes the next item into the freed window slot, and
it is published right away), and acknowledges the message only after the admission committed.
Nothing is lost when the session is: answers stay in the stream until acknowledged. Another
node attaches to the same consumer once the unit has waited longer than --reconcile-after (a
crashed dispatcher), every node retries its sessions through a broker restart, and a call
whose publication failed is published again by the sweeper's reconciliation. A redelivered or
repeated answer is a duplicate admission, which changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from txcl.continuations.worker_client import AckResult, dispatch_body
from txcl.natsstreams import DONE_PREFIX, DONE_STREAM, ensure_streams, fetch_ready, reply_subject, subject_of
from txcl.values.jsonio import dumps_utf8

if TYPE_CHECKING:
    from txcl.store.records import Dispatch

log = logging.getLogger("txcl.continuations")

SCAN_S = 1.0  # how often a node looks for units whose dispatcher is gone
FETCH_BATCH = 128
# an answer read by a session that died unacknowledged goes to another session after this long
# (admitting it twice is harmless: the second is a duplicate)
ACK_WAIT_S = 5


class NatsLink:
    """One serve process's connection to NATS: publishing calls and the units' sessions."""

    def __init__(self, service: Any, url: str) -> None:
        self.service = service
        self.url = url
        self._nc: Any = None
        self._js: Any = None
        self._connecting = asyncio.Lock()
        self.sessions: dict[str, asyncio.Task] = {}
        self._scanner: asyncio.Task | None = None
        self.closed = False

    async def jetstream(self) -> Any:
        async with self._connecting:
            if self._js is None:
                import nats

                self._nc = await nats.connect(self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.5,
                                              connect_timeout=3, allow_reconnect=True, name="txcl-serve")
                self._js = self._nc.jetstream()
                await ensure_streams(self._js)
            return self._js

    def start(self) -> None:
        """Start looking for units left without a session (a dispatcher that died)."""
        if self._scanner is None:
            self._scanner = asyncio.get_running_loop().create_task(self._scan_forever())

    async def publish(self, dispatches: list["Dispatch"]) -> tuple[list[tuple], list[AckResult]]:
        """Publish calls to their job subjects: (ack rows of the calls JetStream stored, and an
        empty list: nothing is refused for good). A call the broker did not take (it is away)
        stays `dispatching`; reconciliation publishes it again later."""
        acked: list[tuple] = []
        refused: list[AckResult] = []
        try:
            js = await self.jetstream()
        except Exception as exc:  # noqa: BLE001 - the broker is away: the calls wait for reconciliation
            log.warning("txcl: NATS at %s unreachable (%s); %d calls wait to be published", self.url, exc,
                        len(dispatches))
            return acked, refused
        for d in dispatches:
            subject = subject_of(d.exec_target) or ""
            body = dispatch_body(d, None)
            body["_txc"]["reply_subject"] = reply_subject(d.unit_id, d.opc)
            headers = {"Nats-Msg-Id": f"{d.opc}.{d.attempts}.{d.retry}", "Txcl-Token": d.token or ""}
            try:
                ack = await js.publish(subject, dumps_utf8(body), headers=headers, timeout=5)
            except Exception as exc:  # noqa: BLE001 - the broker is away or restarting (the streams exist)
                log.warning("txcl: publishing %s to %s failed (%s); reconciliation publishes it again",
                            d.opc, subject, exc)
                continue
            acked.append((d.opc, {"stream": ack.stream, "seq": ack.seq}))
            self.ensure_session(d.unit_id)
        return acked, refused

    # ------------------------------------------------------------------ sessions
    def ensure_session(self, unit_id: str) -> None:
        task = self.sessions.get(unit_id)
        if (task is None or task.done()) and not self.closed:
            # (tasks of their own, not the service's: a shutdown drains the service's tasks,
            # and a session lasts as long as its unit)
            self.sessions[unit_id] = asyncio.get_running_loop().create_task(self._session(unit_id))

    async def _session(self, unit_id: str) -> None:
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        durable = "txcl_" + unit_id
        subject = f"{DONE_PREFIX}{unit_id}.>"
        config = ConsumerConfig(durable_name=durable, filter_subject=subject, ack_policy=AckPolicy.EXPLICIT,
                                deliver_policy=DeliverPolicy.ALL, ack_wait=ACK_WAIT_S, max_ack_pending=10_000,
                                inactive_threshold=3600)
        backoff = 0.2
        while not self.closed:
            try:
                js = await self.jetstream()
                sub = await js.pull_subscribe(subject, durable=durable, stream=DONE_STREAM, config=config)
                while not self.closed:
                    try:
                        messages = await fetch_ready(sub, FETCH_BATCH, 1.0)
                    except NatsTimeout:
                        messages = []
                    if messages:  # admitted side by side: the store lane shares their commits
                        await asyncio.gather(*(self._deliver(m) for m in messages))
                    backoff = 0.2
                    if not messages and not await self._unit_waiting(unit_id):
                        await self._drop_consumer(js, durable)
                        return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the broker is away or restarting: attach again
                log.info("txcl: NATS session of unit %s interrupted (%s); attaching again", unit_id, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
        self.sessions.pop(unit_id, None)

    async def _deliver(self, message: Any) -> None:
        """Admit one answer, then acknowledge it (not before: an answer the store could not
        take now is delivered again)."""
        from txcl.serve.callbacks import admit_callback

        opc = message.subject.rsplit(".", 1)[-1]
        token = (message.headers or {}).get("Txcl-Token")
        data = message.data
        if len(data) > self.service.settings.callback_max_bytes:
            data = None
        answer = await admit_callback(self.service, opc, token, data)
        if answer.status >= 500:  # the store is unavailable: the broker delivers it again
            await message.nak(delay=1)
            return
        if answer.status >= 400 and answer.status not in (409, 410):
            log.warning("txcl: NATS answer for %s refused (%d): %s", opc, answer.status,
                        answer.body[:200].decode("utf-8", "replace"))
        await message.ack()

    async def _unit_waiting(self, unit_id: str) -> bool:
        unit = await self.service.call(self.service.store.get_unit, unit_id)
        return unit is not None and unit.status == "waiting"

    @staticmethod
    async def _drop_consumer(js: Any, durable: str) -> None:
        try:
            await js.delete_consumer(DONE_STREAM, durable)
        except Exception:  # noqa: BLE001 - gone already, or the broker expires it (inactive_threshold)
            pass

    async def _scan_forever(self) -> None:
        """Attach to the units other nodes dispatched and stopped reading (past --reconcile-after)."""
        store = self.service.store
        older = self.service.settings.reconcile_after
        while not self.closed:
            try:
                units = await self.service.call(store.open_units_of, "nats://", older_than_ms=older)
                for unit_id in units:
                    self.ensure_session(unit_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - tried again next period
                log.warning("txcl: looking for NATS units failed: %s", exc)
            await asyncio.sleep(SCAN_S)

    async def aclose(self) -> None:
        self.closed = True
        for task in [self._scanner, *self.sessions.values()]:
            if task is not None:
                task.cancel()
        if self._nc is not None:
            try:
                await self._nc.close()
            except Exception:  # noqa: BLE001
                pass


__all__ = ["NatsLink"]
