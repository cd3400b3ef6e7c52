"""The Starlette application of `txcl serve`.

    state = build_state(workspace, settings)      # loads the tree, checks routes (may raise)
    app = create_app(state)                       # a Starlette app; run it with uvicorn

Every HTTP request goes through `TxclHandler`, a raw ASGI callable: route, read the
body under the cap, build the envelope, walk under the request deadline while
watching for a client disconnect, shape the answer. Continuation endpoints plug
in through `extensions.py`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path
from typing import Any

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount

from txcl import metrics as _metrics
from txcl import otel as _otel
from txcl import runtime_codes as rc
from txcl.logs import log_context as _log_context
from txcl.ops.tree import OpsTree
from txcl.runtime.config import Settings
from txcl.runtime.interpreter import Completed, Failed, Interpreter, Suspended, UnknownStack
from txcl.runtime.stepping import Resumed, first_step
from txcl.runtime.walker import Walker
from txcl.serve import extensions as ext_mod
from txcl.serve.breakpoints import BREAK_PARAM, breakpoint_answer, parse_break
from txcl.serve.inlet import (
    BodyTooLarge,
    ClientGone,
    RequestHead,
    build_envelope,
    declared_length,
    json_body,
    read_body,
    request_head,
    request_id,
)
from txcl.serve.mount import load_serve_tree
from txcl.serve.routing import Route, Router, parse_routes
from txcl.serve.shaping import (
    Answer,
    error_answer,
    error_payload,
    finish,
    json_answer,
    shape_completed,
    store_unavailable_answer,
    suspended_answer,
)
from txcl.trace.async_writer import AsyncTraceWriter
from txcl.store.errors import StoreUnavailable

log = logging.getLogger("txcl.serve")
_NOT_LOOKED_UP = object()

DISCONNECT_WATCH_AFTER = 0.05  # seconds


@attrs.define(slots=False)
class ServeState:
    """Everything the handler needs; `tree`/`router` change on a --watch reload."""

    settings: Settings
    workspace: Path
    tree: OpsTree
    router: Router
    routes: list[Route]
    interp: Interpreter
    store: Any = None
    trace_writer: AsyncTraceWriter | None = None
    extensions: list[Any] = attrs.Factory(list)
    draining: bool = False
    inflight: int = 0
    generation: int = 1
    watcher: Any = None
    mcp: Any = None  # the /_txc/mcp endpoint with --mcp (txcl.serve.mcp_tools)
    ui: Any = None  # the dashboard on /_txc/ui with --ui (txcl.ui.app)
    metrics: Any = None  # the Prometheus recorder with --metrics (txcl.serve.metrics_endpoint)
    lmtp: Any = None  # the LMTP inlet with --lmtp (txcl.serve.lmtp)
    lmtp_socket: Any = None  # its listening socket, bound before start-up (txcl.serve.lmtp.bind_lmtp)
    lmtp_shared: bool = False  # the socket belongs to the parent of --workers (which removes its file)

    def install_tree(self, tree: OpsTree) -> None:
        """Use `tree` for requests that start from now on; in-flight ones keep theirs.

        Raises ConfigError (and changes nothing) when the routes no longer fit the tree."""
        router = Router.for_tree(tree, self.routes, self.settings.default_stack)
        interp = self.interp
        # The interpreter pins its tree in `walker` at the start of each drive(), so swapping
        # both attributes between requests is enough (no public swap API yet).
        interp.walker = Walker(tree, interp.services, interp.walker.hooks)
        interp.tree = tree
        self.tree = tree
        self.router = router
        self.generation += 1
        for ext in self.extensions:
            hook = getattr(ext, "tree_installed", None)
            if callable(hook):
                hook(self, tree)

    async def aclose(self) -> None:
        await self.interp.aclose_http()
        self.interp.close()
        if self.trace_writer is not None:
            self.trace_writer.close()
        if self.store is not None and hasattr(self.store, "close"):
            self.store.close()


def open_default_store(settings: Settings, workspace: Path) -> Any:
    from txcl.store import open_store

    return open_store(settings.db_path(workspace), busy_timeout_ms=settings.sqlite_busy_timeout)


def build_state(workspace: Path, settings: Settings, *, tree: OpsTree | None = None,
                store: Any = None, extensions: list[Any] | None = None) -> ServeState:
    """Load the tree (with system stacks), validate routes, open the store, build the
    interpreter. Raises TxclLoadError, ConfigError or OSError; nothing is left open then."""
    tree = tree if tree is not None else load_serve_tree(workspace)
    routes = parse_routes(settings.routes, settings.sources.get("routes", "configuration"))
    router = Router.for_tree(tree, routes, settings.default_stack)
    exts = ext_mod.load_extensions(settings, workspace) if extensions is None else extensions
    if store is None:
        opener = ext_mod.first(exts, "open_run_store")
        store = opener(settings, workspace) if opener is not None else None
        if store is None:
            store = open_default_store(settings, workspace)
    hooks_fn = ext_mod.first(exts, "walk_hooks")
    hooks = hooks_fn(store, settings) if hooks_fn is not None else None
    writer = AsyncTraceWriter(store) if store is not None and settings.trace_mode != "off" else None
    interp = Interpreter(tree, store=store, settings=settings, hooks=hooks, trace_sink=writer)
    state = ServeState(settings, workspace, tree, router, routes, interp, store, writer, exts)
    if settings.metrics:
        from txcl.serve.metrics_endpoint import setup_metrics

        state.metrics = setup_metrics(state)
    if settings.mcp or settings.ui:
        try:
            if settings.mcp:
                from txcl.serve.mcp_tools import build_endpoint

                state.mcp = build_endpoint(state)
            if settings.ui:
                from txcl.ui.app import build_dashboard

                state.ui = build_dashboard(state)
        except Exception:
            interp.close()
            if hasattr(store, "close"):
                store.close()
            raise
    return state


# ---------------------------------------------------------------- the handler

class TxclHandler:
    """Raw ASGI handler for every HTTP request."""

    def __init__(self, state: ServeState):
        self.state = state
        self._idle = asyncio.Event()
        self._idle.set()
        self._json_logs = state.settings.log_format == "json"  # only then is each request's context kept

    _input_validators: tuple[Any, dict] = (None, {})

    def _respond(self, outcome: Completed) -> Answer:
        """The answer of a completed walk, made before its trace is finished (the trace's
        `bytes_out` is this body's length; the envelope is encoded once)."""
        if self.state.settings.validate_output != "off":
            refused, note = self._invalid_output(outcome)
            answer = refused if refused is not None else shape_completed(outcome.envelope,
                                                                         private=self.state.settings.private)
            answer.trace_event = note
            return answer
        return shape_completed(outcome.envelope, private=self.state.settings.private)

    def _schemas(self) -> Any:
        from txcl.types.validate import TreeSchemas

        tree = self.state.interp.tree
        schemas = getattr(self, "_tree_schemas", None)
        if schemas is None or schemas[0] is not tree:
            schemas = (tree, TreeSchemas(Path(tree.workspace) / "OPS"))
            self._tree_schemas = schemas
        return schemas[1]

    def _invalid_input(self, stack: str | None, document: dict | None, not_json: str | None) -> Answer | None:
        """--validate-input: 422 txcl_invalid_input when the body breaks the stack's $defs.input."""
        tree = self.state.interp.tree
        known = self._input_validators
        if known[0] is not tree:  # a --watch reload: compiled again on use
            known = self._input_validators = (tree, {})
        validator = known[1].get(stack, _NOT_LOOKED_UP)
        if validator is _NOT_LOOKED_UP:
            validator = self._input_validator(stack)
            if isinstance(validator, Answer):
                return validator
            known[1][stack] = validator
        if validator is None:
            return None
        if not_json is not None:
            errors = [{"pointer": "", "message": not_json}]
        else:
            errors = validator.errors(document if document is not None else {})
        if not errors:
            return None
        name = stack or self.state.interp.default_stack()
        return error_answer(error_payload(rc.INVALID_INPUT.code, f"the input does not match the $defs.input of "
                                          f"stack {name} ({len(errors)} problem{'s' if len(errors) != 1 else ''})",
                                          errors=errors), 422)

    def _input_validator(self, stack: str | None) -> Any:
        """The compiled $defs.input of the request's stack (None: none; an Answer: unusable)."""
        from txcl.types.validate import SchemaProblem

        try:
            return self._schemas().validator(stack or self.state.interp.default_stack(), "input")
        except UnknownStack:
            return None  # the walk answers it
        except SchemaProblem as exc:
            log.error("txcl: --validate-input: stack %s: %s", stack, exc)
            return error_answer(error_payload(rc.INTERNAL_ERROR.code, "the stack's schema cannot be used; see the "
                                              "server log"), 500)

    def _invalid_output(self, outcome: Completed) -> tuple[Answer | None, Any]:
        """--validate-output: (500 answer when strict, else None; the trace event) when the
        answer breaks the stack's $defs.output; (None, None) when it does not."""
        from txcl.types.validate import SchemaProblem, answer_document

        txc = outcome.envelope.get("_txc") if isinstance(outcome.envelope.get("_txc"), dict) else {}
        stack = txc.get("stack")
        try:
            validator = self._schemas().validator(stack, "output") if isinstance(stack, str) else None
        except SchemaProblem as exc:
            log.error("txcl: --validate-output: stack %s: %s", stack, exc)
            return None, None
        if validator is None:
            return None, None
        errors = validator.errors(answer_document(outcome.envelope))
        if not errors:
            return None, None
        log.warning("txcl: request %s: the answer does not match the $defs.output of stack %s: %s", txc.get("rid"),
                    stack, "; ".join(f"{e['pointer'] or '/'}: {e['message']}" for e in errors))
        note = ("output.invalid", {"stack": stack, "errors": errors, "strict": self.state.settings.validate_output
                                   == "strict"})
        if self.state.settings.validate_output != "strict":
            return None, note
        return error_answer(error_payload(rc.INVALID_OUTPUT.code, f"the answer does not match the $defs.output of "
                                          f"stack {stack}", errors=errors), 500), note

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        state = self.state
        settings = state.settings
        rid = request_id(scope["headers"], settings.trust_request_id)
        head = request_head(scope)
        if state.draining:
            answer = error_answer(error_payload(rc.SHUTTING_DOWN.code, "the server is shutting down"), 503)
            await _send(send, finish(answer, head.method, rid))
            return
        state.inflight += 1
        self._idle.clear()
        started = time.perf_counter()
        recorder = _metrics.current
        # the request's own fields (its stack and fuel are added as the walk learns them), for
        # the JSON log lines and the request metrics; kept only when one of them is on
        context = _log_context.set({"request_id": rid}) if self._json_logs or recorder.enabled else None
        tracing = _otel.current
        span = (tracing.request(scope["headers"], head.method, head.path, rid,
                                head.method == "POST" and head.path.startswith(CALLBACK_PREFIX))
                if tracing.enabled else None)
        request_span = span.__enter__() if span is not None else None
        try:
            try:
                answer = await self._handle(scope, receive, send, head, rid)
            except StoreUnavailable as exc:
                log.warning("txcl: request %s: %s", rid, exc)
                answer = store_unavailable_answer(exc)
            except Exception:  # noqa: BLE001 - never a traceback to the client
                log.exception("txcl: request %s failed", rid)
                answer = error_answer(error_payload(rc.INTERNAL_ERROR.code, "internal error; see the server log",
                                                    rid=rid), 500)
            if recorder.enabled and answer is not None:  # before the answer leaves: a scrape right
                fields = _log_context.get() or {}  # after it sees this request counted
                if "stack" in fields:  # a request that ran a stack (not a callback, a poll, a 404)
                    recorder.request(fields["stack"], answer.status, time.perf_counter() - started,
                                     fields.get("fuel", 0))
            if request_span is not None and answer is not None:
                request_span.set_attribute("http.response.status_code", answer.status)
            if answer is not None:
                await _send(send, finish(answer, head.method, rid))
            if settings.access_log:
                latency = round((time.perf_counter() - started) * 1000.0, 3)
                status = answer.status if answer is not None else None
                log.info("txcl: %s %s %s %s %.1fms", head.method, head.path, status or "-", rid, latency,
                         extra={"event": "access", "method": head.method, "path": head.path, "status": status,
                                "latency_ms": latency, "request_id": rid})
        finally:
            if span is not None:
                span.__exit__(None, None, None)
            if context is not None:
                _log_context.reset(context)
            state.inflight -= 1
            if state.inflight == 0:
                self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def _handle(self, scope: dict, receive: Any, send: Any, head: RequestHead, rid: str) -> Answer | None:
        state = self.state
        settings = state.settings
        decision = state.router.resolve(head.method, head.host, head.path, head.has_continuation)
        if decision.kind == "callback":
            return await self._callback(scope, receive, send, decision.opc or "", rid)
        if decision.kind == "post-only":  # a callback URL asked with another method
            return json_answer(405, error_payload(rc.METHOD_NOT_ALLOWED.code, "a worker callback is a POST"),
                               [("allow", "POST")])
        try:
            body = await read_body(receive, settings.web_max_body_bytes, declared_length(scope["headers"]))
        except BodyTooLarge:
            return error_answer(error_payload(
                rc.BODY_TOO_LARGE.code, f"request body exceeds {settings.web_max_body_bytes} bytes",
                limit=settings.web_max_body_bytes), 413)
        except ClientGone:
            return None
        document, not_json = json_body(head, body) if (settings.web_json_body or settings.validate_input) \
            else (None, None)
        if settings.validate_input:
            refused = self._invalid_input(decision.stack, document, not_json)
            if refused is not None:
                return refused
        envelope = build_envelope(scope, head, body, rid, mock_header=settings.web_mock_header,
                                  document=document if settings.web_json_body else None)
        break_at = None
        if settings.debug_breakpoints:
            envelope["_txc"]["flag_breakpoint"] = True
            if BREAK_PARAM in head.query:
                break_at = parse_break(head.query[BREAK_PARAM][-1])
                if break_at is None:
                    return json_answer(400, error_payload(rc.BAD_BREAKPOINT.code, rc.BAD_BREAKPOINT.template))
        elif BREAK_PARAM in head.query:
            return json_answer(403, error_payload(rc.BREAKPOINTS_OFF.code, rc.BREAKPOINTS_OFF.template))
        accept = head.first("accept")
        try:
            context = _log_context.get()
            if context is not None:
                context["stack"] = decision.stack  # this request's own dict (set in __call__)
            outcome = await self._walk(envelope, decision.stack, rid, receive, len(body), break_at)
            if context is not None and outcome is not None:
                context["fuel"] = getattr(outcome, "fuel_used", 0)
        except UnknownStack as exc:  # only after a reload removed a stack mid-request
            return error_answer(error_payload(rc.UNKNOWN_STACK.code, str(exc)), 500)
        except StoreUnavailable as exc:
            log.warning("txcl: request %s: %s", rid, exc)
            return store_unavailable_answer(exc)
        except Exception:  # noqa: BLE001 - never a traceback to the client
            log.exception("txcl: request %s failed inside the runtime", rid)
            return error_answer(error_payload(rc.INTERNAL_ERROR.code, "internal error; see the server log",
                                              rid=rid), 500)
        if outcome is None:
            return None  # the client went away
        if isinstance(outcome, Completed):  # shaped during the walk (its size is in the trace)
            if outcome.breakpoint is not None:
                return breakpoint_answer(outcome)
            answer = outcome.answer if outcome.answer is not None else self._respond(outcome)
            if break_at is not None:
                answer.set_header("x-txcl-breakpoint", "not reached")
            return answer
        if isinstance(outcome, Failed):
            return error_answer(outcome.payload, outcome.http_status)
        if isinstance(outcome, Suspended):
            return await self._suspended(scope, receive, outcome, head, accept)
        return error_answer(error_payload(rc.INTERNAL_ERROR.code, f"unexpected outcome {outcome!r}"), 500)

    async def _walk(self, envelope: dict, stack: str | None, rid: str, receive: Any, bytes_in: int,
                    break_at: tuple[str | None, int] | None = None) -> Any:
        """Run the walk; a client disconnect cancels it (in-flight ops see CancelledError).
        The trace counts the request body's bytes in and the answer's body bytes out.

        A walk that finishes without waiting once (every scope in-process) has nothing a
        disconnect could cancel: it runs with no watch at all. Once it waits, the disconnect
        watcher starts when the walk has waited DISCONNECT_WATCH_AFTER, so a quick wait pays
        one timer instead of a task."""
        walk = self.state.interp.run(envelope, stack, src="http", rid=rid, from_json=True,
                                     bytes_in=bytes_in, respond=self._respond, break_at=break_at)
        done, first = first_step(walk)
        if done:
            return first
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        gone = False
        watcher: asyncio.Task | None = None

        async def watch() -> None:
            nonlocal gone
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    break
            gone = True
            if task is not None:
                task.cancel()

        def start_watch() -> None:
            nonlocal watcher
            watcher = loop.create_task(watch())

        timer = loop.call_later(DISCONNECT_WATCH_AFTER, start_watch)
        try:
            return await Resumed(walk, first)
        except asyncio.CancelledError:
            if gone and task is not None:
                task.uncancel()
                log.info("txcl: request %s cancelled: the client disconnected", rid)
                return None
            raise
        finally:
            timer.cancel()
            if watcher is not None:
                watcher.cancel()

    async def _callback(self, scope: dict, receive: Any, send: Any, opc: str, rid: str) -> Answer | None:
        handler = ext_mod.first(self.state.extensions, "callback")
        if handler is None:
            return json_answer(404, error_payload(rc.UNKNOWN_OP_CONTINUATION.code, "unknown op continuation"),
                               [("cache-control", "no-store")])
        result = await handler(Request(scope, receive), opc, self.state)
        if isinstance(result, Answer):
            if _metrics.current.enabled:
                _metrics.current.callback(*callback_outcome(result))
            return result
        if isinstance(result, Response):
            result.headers["x-request-id"] = rid
            await result(scope, receive, send)
            return None
        raise TypeError(f"callback handler returned {type(result).__name__}")

    async def _suspended(self, scope: dict, receive: Any, outcome: Suspended, head: RequestHead,
                         accept: str) -> Answer:
        handler = ext_mod.first(self.state.extensions, "suspended")
        if handler is not None:
            answer = await handler(Request(scope, receive), outcome, self.state)
            if answer is not None:
                return answer
        settings = self.state.settings
        return suspended_answer(outcome, path=head.path, accept=accept, query=head.query,
                                retry_after_ms=settings.poll_retry_after, private=settings.private)


def callback_outcome(answer: Answer) -> tuple[str, str]:
    """(outcome, code) of a callback's answer for the metrics: resumed, recorded, retrying,
    failed, running, cancelled or duplicate for a 200, rejected (with the error code) else."""
    from txcl.values.jsonio import loads

    try:
        body = loads(answer.body.decode("utf-8")) if answer.body else {}
    except (UnicodeDecodeError, ValueError):
        body = {}
    if answer.status >= 400:
        error = body.get("error") if isinstance(body, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return ("conflict" if answer.status == 409 else "rejected"), str(code or answer.status)
    if isinstance(body, dict) and body.get("duplicate"):
        return "duplicate", ""
    return str(body.get("status", "recorded") if isinstance(body, dict) else "recorded"), ""


async def _send(send: Any, answer: Answer) -> None:
    await send({"type": "http.response.start", "status": answer.status, "headers": answer.headers})
    await send({"type": "http.response.body", "body": answer.body})


# ---------------------------------------------------------------- the app

class TxclApp(Starlette):
    """Starlette (state, routes for extensions) with HTTP requests handed straight to the
    handler — it answers every error itself, so the middleware stack would only add cost on
    the hot path — and a lifespan that reports failures as one clean log line (uvicorn
    would print a traceback for an exception escaping a lifespan context manager)."""

    def __init__(self, handler: TxclHandler, **kwargs: Any):
        super().__init__(**kwargs)
        self.handler = handler
        self.txcl_state: ServeState = handler.state
        self.startup_error: BaseException | None = None
        self._watch_task: asyncio.Task | None = None
        self._metrics_task: asyncio.Task | None = None
        self._clock_tasks: list[asyncio.Task] = []  # the cron ticker and the scheduled-events poller

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            scope["app"] = self
            state = self.txcl_state
            if state.ui is not None and _under(scope["path"], UI_PATH):
                await state.ui(scope, receive, send)
                return
            if state.mcp is not None and _under(scope["path"], MCP_PATH):
                await state.mcp(scope, receive, send)
                return
            if state.settings.admin_token is not None and _under(scope["path"], ADMIN_PATH):
                await self._admin(scope, receive, send)
                return
            if scope["path"].startswith(QUEUES_PREFIX):
                await self._claim(scope, receive, send)
                return
            if state.metrics is not None and scope["path"] == METRICS_PATH and not state.settings.metrics_port:
                from txcl.serve.metrics_endpoint import metrics_answer

                await _send(send, finish(metrics_answer(scope, state), scope["method"],
                                         request_id(scope["headers"], False)))
                return
            await self.handler(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def _admin(self, scope: dict, receive: Any, send: Any) -> None:
        from txcl.serve.admin import handle

        state = self.txcl_state
        rid = request_id(scope["headers"], False)
        # on a store that takes one writer at a time (SQLite) through the continuation service's
        # store lane: operations of many operators at once share commits instead of fighting
        # for the database's one write lock; PostgreSQL takes them in parallel from worker threads
        service = next((ext.service for ext in state.extensions if getattr(ext, "service", None) is not None), None)
        lane = service if service is not None and getattr(state.store, "serialises_writers", False) else None
        try:
            answer = await handle(scope, receive, state.store, state.settings.admin_token, lane=lane)
        except StoreUnavailable as exc:
            answer = store_unavailable_answer(exc)
        await _send(send, finish(answer, scope["method"], rid))

    async def _claim(self, scope: dict, receive: Any, send: Any) -> None:
        """A worker's claim from a pull queue (txcl.serve.queues)."""
        state = self.txcl_state
        rid = request_id(scope["headers"], False)
        service = next((ext.service for ext in state.extensions if getattr(ext, "service", None) is not None), None)
        if service is None:
            answer = json_answer(404, error_payload(rc.NOT_FOUND.code, "this server runs no durable runs: no queues"))
        else:
            from txcl.serve.queues import handle_claim

            answer = await handle_claim(scope, receive, service)
        await _send(send, finish(answer, scope["method"], rid))

    async def _lifespan(self, receive: Any, send: Any) -> None:
        await receive()  # lifespan.startup
        try:
            await self.startup()
        except Exception as exc:  # noqa: BLE001 - reported, then the server exits
            self.startup_error = exc
            log.error("txcl: startup failed: %s: %s", type(exc).__name__, exc)
            await self.txcl_state.aclose()
            await send({"type": "lifespan.startup.failed", "message": ""})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await self.shutdown()
        except Exception as exc:  # noqa: BLE001
            log.error("txcl: shutdown failed: %s: %s", type(exc).__name__, exc)
            await send({"type": "lifespan.shutdown.failed", "message": ""})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def startup(self) -> None:
        state = self.txcl_state
        _otel.current.attach(asyncio.get_running_loop())  # spans sent from this loop, not a thread
        if state.settings.watch:
            from txcl.serve.watch import Watcher

            state.watcher = Watcher(state)
            self._watch_task = asyncio.ensure_future(state.watcher.run())
        for ext in state.extensions:
            start = getattr(ext, "startup", None)
            if callable(start):
                await start(state)
        if state.mcp is not None:
            await state.mcp.startup()
        service = next((ext.service for ext in state.extensions if getattr(ext, "service", None) is not None), None)
        if state.settings.cron_period and state.store is not None:
            from txcl.serve.cron import CronTicker

            self._clock_tasks.append(asyncio.ensure_future(CronTicker(state, service).run()))
        if state.settings.scheduled_poll and state.store is not None:
            from txcl.serve.scheduled import ScheduledPoller

            self._clock_tasks.append(asyncio.ensure_future(ScheduledPoller(state, service).run()))
        if state.settings.lmtp and state.store is not None:
            from txcl.serve.lmtp import LmtpServer

            state.lmtp = LmtpServer(state, service, state.lmtp_socket)
            await state.lmtp.start()
        if _metrics.current.enabled and service is not None:
            from txcl.serve.metrics_endpoint import refresh_open_work

            self._metrics_task = asyncio.ensure_future(refresh_open_work(state, service))

    async def shutdown(self) -> None:
        state = self.txcl_state
        state.draining = True
        grace = state.settings.shutdown_grace / 1000.0
        await self.handler.wait_idle(grace)
        if self._watch_task is not None:
            self._watch_task.cancel()
        if self._metrics_task is not None:
            self._metrics_task.cancel()
        for task in self._clock_tasks:
            task.cancel()
        if state.lmtp is not None:
            await state.lmtp.stop()
        if state.metrics is not None:
            from txcl.serve.metrics_endpoint import stop_metrics

            stop_metrics(state.metrics)
        if _otel.current.stopping:  # flush what is still batched
            await _otel.current.detach()
            await asyncio.get_running_loop().run_in_executor(None, _otel.shutdown)
        if state.mcp is not None:
            try:  # in this task: the SDK's task group must be left where it was entered
                await state.mcp.shutdown()
            except Exception as exc:  # noqa: BLE001
                log.warning("txcl: the MCP endpoint did not stop cleanly: %s: %s", type(exc).__name__, exc)
        for ext in reversed(state.extensions):
            stop = getattr(ext, "shutdown", None)
            if callable(stop):
                try:
                    await asyncio.wait_for(stop(state, grace), grace + 1.0)
                except Exception as exc:  # noqa: BLE001
                    log.warning("txcl: extension shutdown failed: %s: %s", type(exc).__name__, exc)
        await state.aclose()


def freeze_startup_heap() -> None:
    """Move everything alive once the server is built (modules, the OPS tree, compiled
    rules) out of the garbage collector's reach: it lives as long as the process, and a
    full collection would otherwise scan all of it again every few thousand requests (a
    served request with summary tracing: ~4 k instructions less on average, and shorter
    pauses). For a process that only serves (`txcl serve`), and not under --watch, where a
    reload leaves the old tree to be collected."""
    gc.collect()
    gc.freeze()


MCP_PATH = "/_txc/mcp"
UI_PATH = "/_txc/ui"
ADMIN_PATH = "/_txc/admin"
METRICS_PATH = "/_txc/metrics"
QUEUES_PREFIX = "/_txc/queues/"  # a worker's claim from a pull queue
CALLBACK_PREFIX = "/_txc/continuations/op/"  # a worker's callback (its span links to the worker's)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def create_app(state: ServeState) -> TxclApp:
    """A Starlette app serving `state`; its lifespan runs the extensions and --watch."""
    handler = TxclHandler(state)
    app = TxclApp(handler, routes=[Mount("", app=handler)])
    app.state.txcl = state
    app.state.handler = handler
    return app
