"""The dashboard and the playground: a Starlette app mounted on `/_txc/ui` by `txcl serve --ui`
(and served alone, playground only, by `txcl playground`).

    /_txc/ui/                     runs: counts per state, filters, pages, live updates
    /_txc/ui/runs/<run id>        one run: segments, scopes, ops, suspends, joins, units, items
    /_txc/ui/traces/<request id>  one trace: steps by scope, the envelope's changes per scope
    /_txc/ui/playground           a rule (or a stack) over an envelope, evaluated as you type
    /_txc/ui/login, /logout       the token form (with --admin-token)

Pages are rendered on the server (Jinja2); `?fragment=1` returns only the part a page
refreshes, which its script fetches every two seconds while there is something to watch. The
assets are files of the package: nothing is fetched from elsewhere.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from txcl import runtime_codes as rc
from txcl.ui import access, views

HERE = Path(__file__).parent
MAX_FORM = 64 * 1024


class Dashboard:
    """The ASGI app of `/_txc/ui` (see the module docstring). `state` is serve's ServeState, or
    None for the playground alone (`tree` then gives the stacks to run)."""

    def __init__(self, *, settings: Any, state: Any = None, tree: Any = None) -> None:
        self.settings = settings
        self.state = state
        self._tree = tree
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(prefix=access.PREFIX, runs_enabled=state is not None)
        routes = [
            Route("/", self.runs_page),
            Route("/runs/{run_id}", self.run_page),
            Route("/runs/{run_id}/cancel", self.cancel_run, methods=["POST"]),
            Route("/runs/{run_id}/retry", self.retry_run, methods=["POST"]),
            Route("/traces", self.traces_page),
            Route("/traces/{rid}", self.trace_page),
            Route("/traces/{rid}/why", self.why_page),
            Route("/schedules", self.schedules_page),
            Route("/stacks", self.stacks_page),
            Route("/playground", self.playground_page),
            Route("/playground/paths", self.playground_paths),
            Route("/playground/rule", self.playground_rule, methods=["POST"]),
            Route("/playground/stack", self.playground_stack, methods=["POST"]),
            Route("/login", self.login, methods=["GET", "POST"]),
            Route("/logout", self.logout, methods=["POST"]),  # not GET: a cross-site link cannot log out
            Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
        ]
        self.app = Starlette(routes=routes)

    @property
    def tree(self) -> Any:
        return self.state.tree if self.state is not None else self._tree

    @property
    def store(self) -> Any:
        return self.state.store if self.state is not None else None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        sub = path[len(access.PREFIX):] or "/"
        if self.settings.admin_token is None and not access.host_allowed(scope, self.settings.ui_allowed_hosts):
            # without a token, a loopback client is all the dashboard checks: a page served
            # under another name (DNS rebinding) must not reach it as same-origin
            await JSONResponse({"error": {"code": rc.MISDIRECTED_REQUEST.code, "message":
                                          f"this dashboard does not answer for the host {access.host_name(scope)!r}; "
                                          "use the address it serves (or allow the name with --ui-allowed-hosts)"}},
                               status_code=421, headers={"Cache-Control": "no-store"})(scope, receive, send)
            return
        verdict = access.decide(scope, self.settings.admin_token)
        open_paths = sub in ("/login", "/logout") or sub.startswith("/static/")
        if verdict == "loopback-only":
            response: Response = PlainTextResponse(
                "The dashboard answers only clients on this machine unless txcl serve is given --admin-token.",
                status_code=403)
            await response(scope, receive, send)
            return
        if verdict == "login" and not open_paths:
            await self._login_form(scope, receive, send, 401, error=None)
            return
        if path == access.PREFIX:
            await RedirectResponse(access.PREFIX + "/", status_code=308)(scope, receive, send)
            return
        child = dict(scope)
        child["root_path"] = access.PREFIX  # Starlette routes on the path below it
        await self.app(child, receive, send)

    # ------------------------------------------------------------------ pages
    def _page(self, request: Request, name: str, context: dict, status: int = 200) -> Response:
        fragment = request.query_params.get("fragment") == "1"
        context = {**context, "fragment": fragment}
        if fragment and name in ("runs.html", "run.html"):
            name = name.replace(".html", "_live.html")  # only the part the page refreshes
        return self.templates.TemplateResponse(request, name, context, status_code=status,
                                               headers={"Cache-Control": "no-store"})

    async def _read(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A store read off the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def runs_page(self, request: Request) -> Response:
        if self.store is None:
            return RedirectResponse(f"{access.PREFIX}/playground", status_code=303)
        q = request.query_params
        limit = q.get("limit", "")
        view = await self._read(views.runs_view, self.store, state=q.get("state"), stack=q.get("stack"),
                                text=q.get("q"), cursor=q.get("before"), limit=int(limit) if limit.isdigit() else None,
                                stacks=sorted(self.tree.user_stacks()) if self.tree is not None else None)
        return self._page(request, "runs.html", {"view": view, "title": "Runs"})

    async def run_page(self, request: Request) -> Response:
        if self.store is None:
            return PlainTextResponse("no store in the playground", status_code=404)
        run_id = request.path_params["run_id"]
        view = await self._read(views.run_view, self.store, run_id, self._redactor_for)
        if view is None:
            return self._page(request, "missing.html", {"what": f"run {run_id}", "title": "Not found"}, 404)
        return self._page(request, "run.html", {"view": view, "title": f"Run {run_id}"})

    def _refuse_operation(self, request: Request) -> Response | None:
        """Run operations come from the dashboard's own buttons: their script sends a header no
        other site can send without a preflight this server never grants, so another page
        cannot press them."""
        if self.store is None:
            return JSONResponse({"error": "no store"}, status_code=404)
        if request.headers.get("x-txcl-ui") != "1":
            return JSONResponse({"error": {"code": rc.FORBIDDEN.code, "message": "use the dashboard's button"}},
                                status_code=403)
        return None

    async def retry_run(self, request: Request) -> Response:
        """The run page's Retry button (a failed or expired run)."""
        from txcl.continuations.operator import retry_by_id

        refused = self._refuse_operation(request)
        if refused is not None:
            return refused
        found = await self._read(retry_by_id, self.store, request.path_params["run_id"])
        if found is None:
            return JSONResponse({"error": {"code": rc.UNKNOWN_RUN.code, "message": "no such run"}}, status_code=404)
        run_id, result = found
        return JSONResponse({"run_id": run_id, "status": result.outcome, "reason": result.reason,
                             "calls": result.calls}, status_code=200 if result.outcome == "retried" else 409)

    async def cancel_run(self, request: Request) -> Response:
        """The run page's Cancel button."""
        from txcl.continuations.operator import cancel_by_id

        refused = self._refuse_operation(request)
        if refused is not None:
            return refused
        data = await self._json_body(request) or {}
        reason = str(data.get("reason") or "").strip()[:500] or "cancelled from the dashboard"
        result = await self._read(cancel_by_id, self.store, request.path_params["run_id"], reason)
        if result == "unknown":
            return JSONResponse({"error": {"code": rc.UNKNOWN_RUN.code, "message": "no such run"}}, status_code=404)
        status, run_id = result
        return JSONResponse({"run_id": run_id, "status": status}, status_code=200 if status == "cancelled" else 409)

    async def trace_page(self, request: Request) -> Response:
        if self.store is None:
            return PlainTextResponse("no store in the playground", status_code=404)
        rid = request.path_params["rid"]
        view = await self._read(views.trace_view, self.store, rid)
        if view is None:
            return self._page(request, "missing.html", {"what": f"trace {rid}", "title": "Not found"}, 404)
        return self._page(request, "trace.html", {"view": view, "title": f"Trace {rid}"})

    async def why_page(self, request: Request) -> Response:
        """Why the request went the way it did (txcl.explain): walked again with its recorded op
        answers through the tree being served, nothing called."""
        if self.store is None or self.tree is None:
            return PlainTextResponse("no store in the playground", status_code=404)
        from txcl.explain import explain

        rid = request.path_params["rid"]
        record = await self._read(self.store.get_trace, rid)
        if record is None:
            return self._page(request, "missing.html", {"what": f"trace {rid}", "title": "Not found"}, 404)
        why = await explain(self.tree, self.settings, record)
        return self._page(request, "why.html", {"why": why, "title": f"Why {rid}"})

    def _redactor_for(self, stack: str) -> Any:
        from txcl.trace.redact import Redactor

        if self.state is None:
            return None
        try:
            omit, redact = self.state.interp.walker.redaction_paths(stack)
        except Exception:  # noqa: BLE001 - a stack no longer in the tree: the default rules
            return None
        return Redactor(omit, redact)

    async def traces_page(self, request: Request) -> Response:
        """The newest requests, synchronous ones included (they have a trace but no run)."""
        if self.store is None:
            return RedirectResponse(f"{access.PREFIX}/playground", status_code=303)
        q = request.query_params
        view = await self._read(views.traces_view, self.store, stack=q.get("stack"), before=q.get("before"),
                                stacks=sorted(self.tree.user_stacks()) if self.tree is not None else None,
                                status=q.get("status"), rid=q.get("rid"), since=q.get("since"), until=q.get("until"))
        return self._page(request, "traces.html", {"view": view, "title": "Requests"})

    async def schedules_page(self, request: Request) -> Response:
        """The scheduled events (EXEC "txco://schedule"): pending ones soonest first."""
        if self.store is None:
            return RedirectResponse(f"{access.PREFIX}/playground", status_code=303)
        view = await self._read(views.schedules_view, self.store, status=request.query_params.get("status"))
        return self._page(request, "schedules.html", {"view": view, "title": "Schedules"})

    async def stacks_page(self, request: Request) -> Response:
        """Each stack's schema (typed envelopes): what a request brings and what it answers."""
        stacks = await asyncio.to_thread(views.stacks_view, self.tree)
        return self._page(request, "stacks.html", {"stacks": stacks, "title": "Stacks"})

    async def playground_paths(self, request: Request) -> Response:
        """The paths a stack's `$defs.input` declares (the envelope box completes them)."""
        stack = request.query_params.get("stack", "")
        paths = await asyncio.to_thread(views.schema_paths, self.tree, stack)
        return JSONResponse({"stack": stack, "paths": paths})

    async def playground_page(self, request: Request) -> Response:
        stacks = self.tree.user_stacks() if self.tree is not None else []
        return self._page(request, "playground.html", {"stacks": stacks, "title": "Playground"})

    async def _json_body(self, request: Request) -> dict | None:
        body = await request.body()
        if len(body) > 4 * 256 * 1024:
            return None
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    async def playground_rule(self, request: Request) -> Response:
        from txcl.ui.playground import evaluate_rule

        data = await self._json_body(request)
        if data is None:
            return JSONResponse({"error": "send a JSON object"}, status_code=400)
        answer = await asyncio.to_thread(evaluate_rule, str(data.get("rule", "")), str(data.get("envelope", "")),
                                         str(data.get("output", "")))
        return JSONResponse(answer)

    async def playground_stack(self, request: Request) -> Response:
        from txcl.ui.playground import run_stack

        data = await self._json_body(request)
        if data is None or self.tree is None:
            return JSONResponse({"error": "send a JSON object"}, status_code=400)
        answer = await run_stack(self.tree, str(data.get("stack", "")), str(data.get("envelope", "")))
        return JSONResponse(answer)

    # ------------------------------------------------------------------ the token form
    async def _login_form(self, scope: dict, receive: Any, send: Any, status: int, error: str | None) -> None:
        request = Request(scope, receive)
        response = self.templates.TemplateResponse(request, "login.html", {"error": error, "title": "Sign in",
                                                                           "fragment": False},
                                                   status_code=status, headers={"Cache-Control": "no-store"})
        await response(scope, receive, send)

    async def login(self, request: Request) -> Response:
        token = self.settings.admin_token
        if token is None:
            return RedirectResponse(f"{access.PREFIX}/", status_code=303)
        if request.method == "GET":
            return self.templates.TemplateResponse(request, "login.html", {"error": None, "title": "Sign in",
                                                                           "fragment": False})
        body = await request.body()
        given = parse_qs(body[:MAX_FORM].decode("utf-8", "replace")).get("token", [""])[0]
        if not access.token_matches(given.strip(), token):
            return self.templates.TemplateResponse(request, "login.html", {"error": "That is not the token.",
                                                                           "title": "Sign in", "fragment": False},
                                                   status_code=401)
        response = RedirectResponse(f"{access.PREFIX}/", status_code=303)
        secure = request.url.scheme == "https"
        response.headers.append("Set-Cookie", access.cookie_header(token, secure))
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse(f"{access.PREFIX}/login", status_code=303)
        response.headers.append("Set-Cookie", access.logout_cookie_header())
        return response


def build_dashboard(state: Any) -> Dashboard | None:
    """The dashboard of `txcl serve` when --ui is on, else None."""
    if not state.settings.ui:
        return None
    try:
        import jinja2  # noqa: F401 - the ui extra
    except ImportError:
        from txcl.install import missing_extra
        from txcl.runtime.config import ConfigError

        raise ConfigError(missing_extra("--ui", "ui")) from None
    return Dashboard(settings=state.settings, state=state)


def playground_app(tree: Any, settings: Any) -> Any:
    """`txcl playground`: the playground alone (`/` leads to it)."""
    dashboard = Dashboard(settings=settings, tree=tree)

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            while message["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
                message = await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        path = scope.get("path", "/")
        if path == access.PREFIX or path.startswith(access.PREFIX + "/"):
            await dashboard(scope, receive, send)
        elif path == "/":
            await RedirectResponse(f"{access.PREFIX}/playground", status_code=303)(scope, receive, send)
        else:
            await PlainTextResponse("not found", status_code=404)(scope, receive, send)

    return app


__all__ = ["Dashboard", "build_dashboard", "playground_app"]
