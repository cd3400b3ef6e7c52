"""Writing a txcl worker as a function (the worker SDK).

    from txcl.worker import Worker

    worker = Worker()

    @worker.op("score")
    async def score(job):
        await job.heartbeat(progress={"done": 0.5})
        if job.input.get("text") is None:
            raise job.Fail("no text")
        return {"score": len(job.input["text"])}

Serve it with `txcl worker serve module:worker --port 8770` and point a rule at it:

    WITH mode = "async"
    EXEC "http://127.0.0.1:8770/score"

The SDK keeps the worker contract: it acks each dispatch with 202 (and a `cancel_url` it
serves), runs the function as an asyncio task, sends heartbeats while it runs (at the pace
the op asks for with `WITH heartbeat`, and whenever the function reports progress), calls back
with the result or the failure, retrying the callback on connection errors, 500 and 503 until
it is accepted or refused for good, and cancels the task when txcl gives up on the job (a
cancel call, or a heartbeat answered `cancelled`). A dispatch repeated with the same
`Idempotency-Key` does not run the function twice.
"""

from txcl.worker.job import Fail, Job, Retry
from txcl.worker.app import Worker

__all__ = ["Worker", "Job", "Retry", "Fail"]
