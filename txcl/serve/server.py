"""Running the app under uvicorn: our own listening socket (clean bind errors, port 0),
logging to stderr, and graceful shutdown.

On SIGTERM/SIGINT the server stops accepting connections, answers 503 to any request that
still arrives on an open connection, waits up to --shutdown-grace for in-flight requests
(uvicorn's graceful timeout), then runs the lifespan shutdown (extensions' background work,
trace flush, store close) and exits.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import sys
from typing import Any, Iterator

import uvicorn

from txcl.serve.app import ServeState, create_app, freeze_startup_heap

log = logging.getLogger("txcl.serve")


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound to (host, port); OSError when that fails."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP (not 0): asyncio only sets TCP_NODELAY on accepted sockets
    # whose proto says TCP, and without it keep-alive answers wait ~40 ms for delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def base_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def setup_logging(level: str = "info", fmt: str = "text") -> None:
    """txcl's own messages (`txcl: …`) on stderr, as text or one JSON object per line (see
    txcl.logs), redacted; uvicorn's only from warnings up."""
    from txcl.logs import handler as log_handler

    handler = log_handler(fmt, sys.stderr)
    logger = logging.getLogger("txcl")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
    for name in ("uvicorn", "uvicorn.error"):
        ulog = logging.getLogger(name)
        ulog.handlers[:] = [handler]
        ulog.setLevel(logging.WARNING if level != "debug" else logging.DEBUG)
        ulog.propagate = False


class TxclServer(uvicorn.Server):
    """uvicorn.Server that marks the state draining as soon as a shutdown signal arrives."""

    def __init__(self, config: uvicorn.Config, state: ServeState, url: str):
        super().__init__(config)
        self.txcl_state = state
        self.url = url

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self.txcl_state.draining:
            log.info("txcl: shutting down (grace %d ms)", self.txcl_state.settings.shutdown_grace)
        self.txcl_state.draining = True
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """As uvicorn's, but a handled SIGTERM/SIGINT ends in a normal exit (status 0) instead
        of re-raising the signal after the graceful shutdown."""
        with super().capture_signals():
            yield
            self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            state = self.txcl_state
            user_rules = sum(1 for op in state.tree.all_rules() if not op.stack.startswith("_"))
            log.info("txcl: serving %s on %s (%d rule%s%s)", state.workspace, self.url, user_rules,
                     "" if user_rules == 1 else "s", ", watching" if state.settings.watch else "")
            if state.settings.ui:
                log.info("txcl: dashboard on %s/_txc/ui/", self.url)


def uvicorn_config(app: Any, *, grace_s: float, log_level: str = "info", header_timeout_s: float | None = None,
                   max_connections: int | None = None) -> uvicorn.Config:
    """The uvicorn settings serve uses (the benchmark serves its bare endpoint with these too).
    `header_timeout_s`: close a connection whose request headers are not complete that long
    after its first byte; `max_connections`: past it, new connections are answered 503."""
    config = uvicorn.Config(app, lifespan="on", access_log=False, log_config=None,
                            log_level="warning" if log_level != "debug" else "debug",
                            timeout_graceful_shutdown=grace_s, server_header=False,
                            limit_concurrency=max_connections or None,
                            # remote_addr is the TCP peer , never X-Forwarded-For
                            proxy_headers=False)  # type: ignore[arg-type]
    if header_timeout_s:
        import importlib.util

        from txcl.serve.protocol import protocol_class

        http = "httptools" if importlib.util.find_spec("httptools") is not None else "h11"
        config.http = protocol_class(http, header_timeout_s)
    return config


def run_server(state: ServeState, sock: socket.socket, *, log_level: str = "info") -> bool:
    """Serve until a shutdown signal; blocks. False when the application failed to start
    (the reason is already logged)."""
    host, port = sock.getsockname()[:2]
    app = create_app(state)
    if not state.settings.watch:
        freeze_startup_heap()
    config = uvicorn_config(app, grace_s=state.settings.shutdown_grace / 1000.0, log_level=log_level,
                            header_timeout_s=state.settings.web_header_timeout / 1000.0 or None,
                            max_connections=state.settings.web_max_connections or None)
    server = TxclServer(config, state, base_url(host, port))
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn exits 3 on a failed startup; the caller decides the status
        if app.startup_error is None:
            raise
    return app.startup_error is None
