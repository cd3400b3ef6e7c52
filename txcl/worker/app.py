"""The worker SDK's `Worker`: the push side, an ASGI application that takes txcl's dispatches
(the pull side, claiming from `queue://` ops, is txcl.worker.pull).

Routes: `POST /<op name>` (a dispatch: 202 and the job runs), `POST /_txc/cancel/<opc>` (txcl
gives up on a job: its task is cancelled), `GET /_txc/health`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any, Awaitable, Callable

import attrs

from txcl.asgi_body import read_capped_body
from txcl.worker.job import Fail, Job, Retry

log = logging.getLogger("txcl.worker")

MAX_DISPATCH_BYTES = 16 * 1024 * 1024
CANCEL_PREFIX = "/_txc/cancel/"
OpFunction = Callable[[Job], "Awaitable[Any] | Any"]


@attrs.frozen
class OpSpec:
    name: str
    fn: OpFunction
    input_validator: Any = None  # jsonschema_rs validators, when schemas are given
    output_validator: Any = None


def _validator(schema: dict | None) -> Any:
    if schema is None:
        return None
    import jsonschema_rs

    return jsonschema_rs.validator_for(schema)


def _op_schemas(path: Path, given_input: dict | None, given_output: dict | None) -> tuple[dict | None, dict | None]:
    """The input and output schemas of an op's schema file (a schema given as an argument wins)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the op schema {path}: {exc}") from None
    defs = document.get("$defs") if isinstance(document, dict) else None
    if not isinstance(defs, dict) or not ({"input", "output"} & set(defs)):
        raise ValueError(f"{path} has no $defs.input or $defs.output")

    def part(key: str) -> dict | None:
        return {"$ref": f"#/$defs/{key}", "$defs": defs} if key in defs else None
    return given_input or part("input"), given_output or part("output")


def _problems(validator: Any, value: Any) -> str | None:
    if validator is None:
        return None
    errors = [f"{'/'.join(str(p) for p in e.instance_path) or '(root)'}: {e.message}"
              for e in validator.iter_errors(value)]
    return "; ".join(errors[:5]) or None


class Worker:
    """A set of ops served over HTTP (`txcl worker serve module:worker`, or any ASGI server)."""

    def __init__(self, *, remember: int = 10_000) -> None:
        self.ops: dict[str, OpSpec] = {}
        self.running: dict[str, Job] = {}  # by idempotency key
        self.finished: OrderedDict[str, dict] = OrderedDict()  # idempotency key -> the callback body sent
        self.remember = remember
        self.client: Any = None

    def op(self, name: str, *, input_schema: dict | None = None, output_schema: dict | None = None,
           schema_file: str | Path | None = None) -> Callable[[OpFunction], OpFunction]:
        """Register `fn(job)` as the op `name` (served at `POST /<name>`). With schemas, the
        job's input is checked before it runs (a mismatch fails the op at once, with what did
        not match) and its output before it is sent (a mismatch fails the job). `schema_file`:
        the op's `<name>.schema.json` from the OPS tree, whose `$defs.input` and `$defs.output`
        are the schemas (refs inside the file are followed; an itemized op's are one item's)."""
        clean = name.strip("/")
        if not clean or clean.startswith("_txc"):
            raise ValueError(f"an op name is a path that does not start with _txc, got {name!r}")
        if schema_file is not None:
            input_schema, output_schema = _op_schemas(Path(schema_file), input_schema, output_schema)

        def register(fn: OpFunction) -> OpFunction:
            self.ops[clean] = OpSpec(clean, fn, _validator(input_schema), _validator(output_schema))
            return fn
        return register

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/_txc/health" and method in ("GET", "HEAD"):
            await _answer(send, 200, {"status": "ok", "running": len(self.running)})
            return
        if method != "POST":
            await _answer(send, 405, {"error": "POST a dispatch"})
            return
        body = await read_capped_body(receive, MAX_DISPATCH_BYTES)
        if body is None:
            await _answer(send, 413, {"error": f"a dispatch is at most {MAX_DISPATCH_BYTES} bytes"})
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if path.startswith(CANCEL_PREFIX):
            status, answer = self._cancel(path[len(CANCEL_PREFIX):], headers)
        else:
            status, answer = await self._dispatch(path.strip("/"), body, headers, scope)
        await _answer(send, status, answer)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._client()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _client(self) -> Any:
        if self.client is None:
            import httpx

            self.client = httpx.AsyncClient()
        return self.client

    async def aclose(self) -> None:
        for job in list(self.running.values()):
            if job.task is not None:
                job.task.cancel()
        if self.client is not None:
            await self.client.aclose()
            self.client = None

    # ------------------------------------------------------------------ dispatches
    async def _dispatch(self, name: str, raw: bytes, headers: dict[str, str], scope: dict) -> tuple[int, dict]:
        spec = self.ops.get(name)
        if spec is None:
            return 404, {"error": f"no op {name!r} here (ops: {', '.join(sorted(self.ops)) or 'none'})"}
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {"error": "the dispatch is not JSON"}
        if not isinstance(body, dict) or not isinstance(body.get("_txc"), dict):
            return 400, {"error": "a dispatch is a JSON object with _txc (see the worker guide)"}
        job = Job.from_dispatch(body, headers, self._client())
        if not job.opc:
            return 400, {"error": "the dispatch has no _txc.op_continuation_id"}
        ack = {"job_id": job.opc, "cancel_url": _base(scope, headers) + CANCEL_PREFIX + job.opc}
        problem = _problems(spec.input_validator, job.input)
        if problem is not None:  # acked, then failed for good with the reason (which a refusal would lose)
            asyncio.get_running_loop().create_task(job._post(
                {"status": "failed", "error": {"message": f"the input does not match the op's schema: {problem}"}}))
            return 202, ack
        key = job.idempotency_key
        if key in self.running:  # sent again while it runs: the running task answers for both
            self.running[key].token = job.token or self.running[key].token
            self.running[key].callback_url = job.callback_url or self.running[key].callback_url
            return 202, {**ack, "duplicate": True}
        if key in self.finished:  # sent again after it finished (its callback was lost): the same answer
            sent = self.finished[key]
            asyncio.get_running_loop().create_task(job._post(sent))
            return 202, {**ack, "duplicate": True}
        self.running[key] = job
        job.task = asyncio.get_running_loop().create_task(self._run(spec, job))
        return 202, ack

    async def run_job(self, spec: OpSpec, job: Job) -> None:
        """Run a job claimed from a pull queue (txcl.worker.pull) to its end: the checks a
        dispatch gets (input schema, a job already running or finished under its idempotency
        key), then the function, as a task that a cancelled heartbeat cancels."""
        problem = _problems(spec.input_validator, job.input)
        if problem is not None:
            await job._post({"status": "failed", "error": {"message": f"the input does not match the op's "
                                                                     f"schema: {problem}"}})
            return
        key = job.idempotency_key
        if key in self.running:  # claimed again while it runs (a lease ran out): the running task answers
            self.running[key].token = job.token or self.running[key].token
            return
        if key in self.finished:  # claimed again after it finished (its answer was lost): the same answer
            await job._post(self.finished[key])
            return
        self.running[key] = job
        job.task = asyncio.get_running_loop().create_task(self._run(spec, job))
        await asyncio.wait([job.task])

    async def pull(self, server: str, **options: Any) -> None:
        """Claim and run the jobs of this worker's ops from the txcl server at `server` until
        cancelled (see txcl.worker.pull.PullClient for the options)."""
        from txcl.worker.pull import PullClient

        client = PullClient(self, server, **options)
        try:
            await client.run()
        finally:
            await self.aclose()

    async def nats(self, url: str, **options: Any) -> None:
        """Take and run the jobs of this worker's ops from the NATS server at `url` until
        cancelled (see txcl.worker.natsclient.NatsWorker for the options)."""
        from txcl.worker.natsclient import NatsWorker

        await NatsWorker(self, url, **options).run()

    async def _run(self, spec: OpSpec, job: Job) -> None:
        beats = asyncio.get_running_loop().create_task(self._beat(job)) if job.heartbeat_ms else None
        body: dict | None = None
        try:
            result = spec.fn(job)
            if inspect.isawaitable(result):
                result = await result
            problem = _problems(spec.output_validator, result)
            if problem is not None:
                body = {"status": "failed", "error": {"message": f"the output does not match the op's schema: "
                                                                 f"{problem}"}}
            else:
                body = {"status": "completed", "output": result}
        except Retry as exc:
            body = {"status": "failed", "retryable": True, "error": {"message": str(exc) or "retry"}}
        except Fail as exc:
            body = {"status": "failed", "error": {"message": str(exc) or "failed"}}
        except asyncio.CancelledError:
            if not job.cancelled:  # the worker itself is stopping: txcl sends the job again
                raise
            body = None  # txcl gave up on it: nothing to report
        except Exception as exc:  # noqa: BLE001 - the op fails with what went wrong
            log.exception("txcl worker: op %s failed", spec.name)
            body = {"status": "failed", "error": {"message": f"{type(exc).__name__}: {exc}"}}
        finally:
            if beats is not None:
                beats.cancel()
        try:
            if body is not None:
                await job._post(body)
                self.finished[job.idempotency_key] = body
                while len(self.finished) > self.remember:
                    self.finished.popitem(last=False)
        finally:
            self.running.pop(job.idempotency_key, None)

    async def _beat(self, job: Job) -> None:
        """Heartbeats at half the op's heartbeat interval while the job runs."""
        every = max(0.05, (job.heartbeat_ms or 0) / 2000)
        while True:
            await asyncio.sleep(every)
            await job.heartbeat()

    def _cancel(self, opc: str, headers: dict[str, str]) -> tuple[int, dict]:
        job = next((j for j in self.running.values() if j.opc == opc), None)
        if job is None:
            return 404, {"error": "no such job running"}
        token = headers.get("authorization", "").removeprefix("Bearer ").strip() or \
            headers.get("x-txco-continuation-token", "")
        if job.token and token != job.token:
            return 401, {"error": "the token does not match the job's"}
        job.cancel("txcl cancelled it")
        return 200, {"status": "cancelled"}


def _base(scope: dict, headers: dict[str, str]) -> str:
    host = headers.get("host")
    if not host:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}"


async def _answer(send: Any, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


__all__ = ["Worker", "OpSpec"]
