"""The Debug Adapter Protocol side of `txcl dap`: requests in, responses and events out.

One session debugs one walk (one thread, id 1, named "walk"). The order is the protocol's:
`initialize` → `launch` → breakpoints → `configurationDone` (the walk starts) → stops, looks and
steps → `terminated` when the walk ends, or `disconnect`.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any, BinaryIO

from txcl.debug.breakpoints import EXCEPTION_FILTERS, BadBreakpoint, evaluate_text
from txcl.debug.engine import DebugAborted, Debugger, Events
from txcl.debug.frames import StopView
from txcl.debug.launch import Launch, LaunchError, prepare
from txcl.debug.wire import WireError, Writer, read_message

log = logging.getLogger("txcl.dap")
THREAD_ID = 1

CAPABILITIES = {
    "supportsConfigurationDoneRequest": True,
    "supportsFunctionBreakpoints": True,
    "supportsConditionalBreakpoints": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsLogPoints": True,
    "supportsEvaluateForHovers": True,
    "supportsTerminateRequest": True,
    "supportTerminateDebuggee": True,
    "supportsExceptionInfoRequest": False,
    "exceptionBreakpointFilters": EXCEPTION_FILTERS,
}


class RequestError(Exception):
    """A request that cannot be answered as asked (the message goes back to the client)."""


class Adapter(Events):
    """Serves one debug session over a byte stream pair."""

    def __init__(self, reader: BinaryIO, writer: Writer) -> None:
        self.reader = reader
        self.writer = writer
        self.debugger = Debugger(self)
        self.launch: Launch | None = None
        self.view: StopView | None = None
        self.walk_thread: threading.Thread | None = None
        self.ended = threading.Event()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # ------------------------------------------------------------ the loop
    def serve(self) -> int:
        """Answer requests until the client disconnects or the stream ends; the exit status."""
        status = 0
        while True:
            try:
                message = read_message(self.reader)
            except WireError as exc:
                log.error("txcl dap: %s", exc)
                status = 2
                break
            if message is None:
                break
            if message.get("type") != "request":
                continue
            command = str(message.get("command") or "")
            handler = getattr(self, f"on_{command}", None)
            if handler is None:
                self.writer.response(message, error=f"txcl dap does not support the {command!r} request")
                continue
            args = message.get("arguments")
            try:
                body = handler(args if isinstance(args, dict) else {})
            except (RequestError, LaunchError, BadBreakpoint) as exc:
                self.writer.response(message, error=str(exc))
                continue
            except Exception as exc:  # noqa: BLE001 - a bug of ours: the session goes on, said in one line
                log.exception("txcl dap: %s failed", command)
                self.writer.response(message, error=f"internal error in {command}: {type(exc).__name__}: {exc}")
                continue
            self.writer.response(message, body)
            if command == "initialize":
                self.writer.event("initialized")
            if command == "disconnect":
                break
        self._stop_walk()
        return status

    # ------------------------------------------------------------ events (from the walk's thread)
    def stopped(self, reason: str, text: str | None, hit_ids: list[int]) -> None:
        point = self.debugger.stopped
        self.view = StopView(point, self.debugger.path_of) if point is not None else None
        body: dict[str, Any] = {"reason": reason, "threadId": THREAD_ID, "allThreadsStopped": True}
        if text:
            body["text"] = text
            body["description"] = text
        if hit_ids:
            body["hitBreakpointIds"] = hit_ids
        self.writer.event("stopped", body)

    def output(self, text: str, category: str = "console") -> None:
        self.writer.event("output", {"category": category, "output": text})

    # ------------------------------------------------------------ requests
    def on_initialize(self, args: dict) -> dict:
        return dict(CAPABILITIES)

    def on_launch(self, args: dict) -> dict:
        if self.launch is not None:
            raise RequestError("this session has launched already")
        stop_at = args.get("stopAt") or []
        if not isinstance(stop_at, list) or not all(isinstance(n, str) for n in stop_at):
            raise RequestError('"stopAt" must be a list of stack/scope or stack/scope/rule names')
        launch = prepare(args)
        self.launch = launch
        self.debugger.root = str(launch.workspace)
        if args.get("stopOnEntry") is True:
            self.debugger.mode = "entry"
        self.debugger.launch_breakpoints = self.debugger.named_breakpoints(
            [{"name": n} for n in stop_at], lambda: next(self._ids), launch.scope_problem)
        for bp in self.debugger.launch_breakpoints:
            if not bp.verified:
                self.output(f"txcl: stopAt {bp.name}: {bp.message}\n", "stderr")
        self.output(f"txcl: debugging {self.launch.title} in {self.launch.workspace}\n")
        return {}

    def on_attach(self, args: dict) -> dict:
        raise RequestError("txcl dap starts its own walks: use a launch configuration")

    def on_setBreakpoints(self, args: dict) -> dict:
        source = args.get("source") if isinstance(args.get("source"), dict) else {}
        path = source.get("path")
        if not isinstance(path, str) or not path:
            raise RequestError("setBreakpoints needs source.path")
        specs = args.get("breakpoints")
        if not isinstance(specs, list):
            specs = [{"line": line} for line in args.get("lines") or [] if isinstance(line, int)]
        specs = [s for s in specs if isinstance(s, dict)]
        found = self.debugger.set_line_breakpoints(path, specs, lambda: next(self._ids))
        return {"breakpoints": [bp.as_dap(source) for bp in found]}

    def on_setFunctionBreakpoints(self, args: dict) -> dict:
        specs = [s for s in args.get("breakpoints") or [] if isinstance(s, dict)]
        known = self.launch.scope_problem if self.launch is not None else (lambda name: None)
        found = self.debugger.set_function_breakpoints(specs, lambda: next(self._ids), known)
        return {"breakpoints": [bp.as_dap() for bp in found]}

    def on_setExceptionBreakpoints(self, args: dict) -> dict:
        names = {f["filter"] for f in EXCEPTION_FILTERS}
        chosen = [f for f in args.get("filters") or [] if isinstance(f, str)]
        unknown = [f for f in chosen if f not in names]
        self.debugger.exception_filters = {f for f in chosen if f in names}
        return {"breakpoints": [{"verified": f in names, **({} if f in names else {"message": "no such filter"})}
                                for f in chosen]} if unknown else {}

    def on_configurationDone(self, args: dict) -> dict:
        if self.launch is None:
            raise RequestError("launch first: there is nothing to walk")
        if self.walk_thread is None:
            self.walk_thread = threading.Thread(target=self._walk, name="txcl-dap-walk", daemon=True)
            self.walk_thread.start()
        return {}

    def on_threads(self, args: dict) -> dict:
        return {"threads": [{"id": THREAD_ID, "name": "walk"}]}

    def _view(self) -> StopView:
        view = self.view
        if view is None or self.debugger.stopped is None:
            raise RequestError("the walk is not stopped")
        return view

    def on_stackTrace(self, args: dict) -> dict:
        view = self.view if self.debugger.stopped is not None else None
        if view is None:
            return {"stackFrames": [], "totalFrames": 0}
        body = view.stack_trace()
        start = args.get("startFrame") or 0
        levels = args.get("levels") or 0
        frames = body["stackFrames"][start:]
        if levels:
            frames = frames[:levels]
        return {"stackFrames": frames, "totalFrames": body["totalFrames"]}

    def on_scopes(self, args: dict) -> dict:
        return {"scopes": self._view().scopes(args.get("frameId"))}

    def on_variables(self, args: dict) -> dict:
        return {"variables": self._view().variables(args.get("variablesReference"))}

    def on_evaluate(self, args: dict) -> dict:
        text = args.get("expression")
        if not isinstance(text, str) or not text.strip():
            raise RequestError("nothing to evaluate")
        view = self._view()
        frame = view.frame(args.get("frameId")) if args.get("frameId") is not None else None
        envelope = frame.envelope if frame is not None else view.point.envelope
        value, _ = evaluate_text(text.strip(), envelope)
        return view.value_body(value)

    def _resume(self, mode: str) -> dict:
        if self.debugger.stopped is None:
            raise RequestError("the walk is not stopped")
        self.view = None
        self.debugger.resume(mode)
        return {"allThreadsContinued": True}

    def on_continue(self, args: dict) -> dict:
        return self._resume("run")

    def on_next(self, args: dict) -> dict:
        return self._resume("next")

    def on_stepIn(self, args: dict) -> dict:
        return self._resume("in")

    def on_stepOut(self, args: dict) -> dict:
        return self._resume("out")

    def on_pause(self, args: dict) -> dict:
        self.debugger.pause()
        return {}

    def on_terminate(self, args: dict) -> dict:
        self._stop_walk()
        return {}

    def on_disconnect(self, args: dict) -> dict:
        self._stop_walk()
        return {}

    # ------------------------------------------------------------ the walk
    def _walk(self) -> None:
        assert self.launch is not None
        try:
            result = self.launch.start(self.debugger)
        except DebugAborted:
            result = None
        except Exception as exc:  # noqa: BLE001 - told to the client, the session ends cleanly
            log.debug("txcl dap: the walk failed", exc_info=True)
            self.output(f"txcl: the walk could not run: {type(exc).__name__}: {exc}\n", "stderr")
            self.writer.event("exited", {"exitCode": 1})
        else:
            if result is not None:
                self.output(result.summary + "\n")
                self.writer.event("exited", {"exitCode": result.exit_code})
        self._end()

    def _end(self) -> None:
        with self._lock:
            if self.ended.is_set():
                return
            self.ended.set()
        self.writer.event("terminated")

    def _stop_walk(self) -> None:
        self.debugger.abort()
        thread = self.walk_thread
        if thread is not None and thread.is_alive():
            thread.join(10.0)
        if thread is not None:
            self._end()
