"""The NATS JetStream layout that txcl serve and the worker SDK share (the `nats` extra).

- ``TXCL_JOBS`` (subjects ``txcl.jobs.>``, work-queue retention, file storage): the jobs of
  ``nats://<subject>`` ops, on ``txcl.jobs.<subject>``;
- ``TXCL_DONE`` (subjects ``txcl.done.>``, the same): the workers' answers, on each job's reply
  subject ``txcl.done.<unit id>.<opc>``.

Messages are kept at most a week; a message is removed once its consumer acknowledges it.
"""

from __future__ import annotations

from typing import Any
JOBS_STREAM, DONE_STREAM = "TXCL_JOBS", "TXCL_DONE"
JOBS_PREFIX, DONE_PREFIX = "txcl.jobs.", "txcl.done."
STREAM_MAX_AGE_S = 7 * 86_400
DRAIN_S = 0.005  # how long a fetch that has its first message waits for the rest


def subject_of(exec_target: str | None) -> str | None:
    """The job subject of a `nats://<subject>` target (None: not one)."""
    if exec_target and exec_target[:7].lower() == "nats://":
        return JOBS_PREFIX + exec_target[7:]
    return None


def reply_subject(unit_id: str, opc: str) -> str:
    return f"{DONE_PREFIX}{unit_id}.{opc}"


async def ensure_streams(js: Any) -> None:
    """Create the two streams when missing (a stream that exists is left as it is)."""
    from nats.js.api import RetentionPolicy, StorageType, StreamConfig
    from nats.js.errors import BadRequestError

    for name, subjects in ((JOBS_STREAM, [JOBS_PREFIX + ">"]), (DONE_STREAM, [DONE_PREFIX + ">"])):
        try:
            await js.stream_info(name)
            continue
        except Exception:  # noqa: BLE001 - missing (NotFoundError), or the broker is away: try to create it
            pass
        try:
            await js.add_stream(StreamConfig(name=name, subjects=subjects, retention=RetentionPolicy.WORK_QUEUE,
                                             storage=StorageType.FILE, max_age=STREAM_MAX_AGE_S))
        except BadRequestError:  # another node created it meanwhile
            pass


async def fetch_ready(sub: Any, batch: int, wait_s: float) -> list:
    """Up to `batch` messages of a pull subscription, returned as soon as one is there: the
    first is waited for (up to `wait_s`, else nats' TimeoutError), then whatever else is
    already stored comes with it. (A plain fetch of a batch waits until the batch is full or
    its time is up, holding the first message back meanwhile.)"""
    from nats.errors import TimeoutError as NatsTimeout

    first = await sub.fetch(1, timeout=wait_s)
    if batch <= 1:
        return first
    try:
        return first + await sub.fetch(batch - 1, timeout=DRAIN_S)
    except NatsTimeout:
        return first


__all__ = ["fetch_ready", "JOBS_STREAM", "DONE_STREAM", "JOBS_PREFIX", "DONE_PREFIX", "subject_of", "reply_subject",
           "ensure_streams"]
