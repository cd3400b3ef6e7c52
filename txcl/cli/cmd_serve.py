"""`txcl serve [DIR] [flags]`: the web server.

Every runtime setting is a flag here (generated from the settings table, with the help texts
of `txcl.runtime.config.SETTING_HELP`, so the two never drift); values also come from `TXCL_*` environment variables and the `[serve]`
table of the configuration file, with flag > environment > file > default. Startup problems
(bad configuration, an OPS tree that fails to load, routes naming unknown stacks, a port
that cannot be bound, a database that cannot be opened) exit 2 with a message, never a
traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, Iterator

import click

from txcl.cli.common import DB_HELP, fail, print_error, require_extra

_BOOL_KEYS = {"watch", "trust_request_id", "web_mock_header", "private", "mcp", "ui", "validate_input", "access_log",
              "metrics", "debug_breakpoints"}
_ON_BY_DEFAULT = {"web_json_body"}  # a --x/--no-x pair
_SKIP_KEYS = {"workspace"}
_HELP = {"db": DB_HELP}
log = logging.getLogger("txcl.serve")


def _settings_options(func: Any) -> Any:
    from txcl.runtime.config import SETTING_HELP, setting_help, settings_keys

    for key in reversed([k for k in settings_keys() if k not in _SKIP_KEYS]):
        flag = "--" + key.replace("_", "-")
        help_text = _HELP.get(key) or setting_help(key)
        if key in _BOOL_KEYS:
            option = click.option(flag, key, is_flag=True, default=None, help=help_text)
        elif key in _ON_BY_DEFAULT:
            option = click.option(f"{flag}/--no-{flag[2:]}", key, default=None, help=help_text)
        elif key == "validate_output":
            option = click.option(flag, key, is_flag=False, flag_value="log", default=None, metavar="[strict]",
                                  type=click.Choice(["off", "log", "strict"]), help=help_text)
        else:
            unit = SETTING_HELP.get(key, ("", ""))[0]
            metavar = {"duration": "DURATION", "size": "SIZE", "count": "N"}.get(unit, "TEXT")
            option = click.option(flag, key, default=None, metavar=metavar, help=help_text)
        func = option(func)
    return func


@click.command("serve", context_settings={"show_default": False})
@click.argument("directory", default=None, required=False)
@click.option("--workspace", default=None, help="Same as DIR.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              help="Verbosity of the server's messages on stderr.")
@_settings_options
def command(directory: str | None, workspace: str | None, log_level: str, **flags: Any) -> None:
    """Serve the OPS tree of DIR over HTTP (binds 127.0.0.1:8080 by default)."""
    require_extra("serve", "txcl serve")
    from txcl.ops.tree import WorkspaceNotFound, find_workspace
    from txcl.runtime.config import ConfigError, load_settings
    from txcl.serve.server import base_url, bind_socket, is_loopback, setup_logging

    setup_logging(log_level)
    try:
        ws, _ = find_workspace(directory or workspace or ".")
    except WorkspaceNotFound as exc:
        fail(str(exc))
    try:
        settings = load_settings(ws, flags)
    except ConfigError as exc:
        fail(str(exc))
    if settings.metrics:
        require_extra("metrics", "txcl serve --metrics")
    if settings.nats_url:
        require_extra("nats", "txcl serve --nats-url")
    lmtp_sock = None
    if settings.lmtp:
        require_extra("mail", "txcl serve --lmtp")
        from txcl.serve.lmtp import bind_lmtp

        try:
            lmtp_sock = bind_lmtp(settings.lmtp, settings.lmtp_socket_mode)
        except (OSError, OverflowError) as exc:
            fail(f"cannot accept mail on {settings.lmtp}: {getattr(exc, 'strerror', None) or exc}")
    from txcl.logs import never_log

    never_log([settings.admin_token, settings.queue_token])
    if settings.log_format != "text":
        setup_logging(log_level, settings.log_format)
    from txcl.serve.workers import resolve_workers, reserve_port, reuse_port_available

    workers = resolve_workers(settings.workers)
    if workers > 1 and not hasattr(os, "fork"):
        fail("--workers above 1 needs a system that can fork processes (Linux, macOS, the BSDs)")
    reuse = workers > 1 and reuse_port_available()
    try:
        sock = reserve_port(settings.host, settings.port) if reuse else bind_socket(settings.host, settings.port)
    except (OSError, OverflowError) as exc:
        fail(f"cannot listen on {settings.host}:{settings.port}: {getattr(exc, 'strerror', None) or exc}")
    host, port = sock.getsockname()[:2]
    if settings.callback_base_url is None:
        if not is_loopback(settings.host):
            click.echo("txcl: warning: --callback-base-url is not set and the server does not bind a loopback "
                       f"address; workers will be told {base_url(host, port)}", err=True)
        settings = settings.evolve(callback_base_url=base_url(host, port))
    if workers == 1:
        if not _serve_one(ws, settings, sock, lmtp_sock, log_level):
            fail("the server could not start (see the message above)")
        return
    _preflight(ws, settings, sock)
    from txcl.serve.workers import Supervisor, worker_socket

    def serve_worker(index: int) -> int:
        own = sock
        if reuse:
            sock.close()  # the parent's reservation; this worker listens on its own socket
            own = worker_socket(host, port)
        changes: dict[str, Any] = {"workers": "1"}
        if settings.node_id:
            changes["node_id"] = f"{settings.node_id}-{index}"
        if settings.metrics_port:
            changes["metrics_port"] = settings.metrics_port + index - 1  # one port per worker
        return 0 if _serve_one(ws, settings.evolve(**changes), own, lmtp_sock, log_level, shared=True) else 2

    log.info("txcl: %d worker processes serve %s", workers, base_url(host, port))
    status = Supervisor(workers, serve_worker, settings.shutdown_grace / 1000).run()
    if lmtp_sock is not None and settings.lmtp.startswith("unix:"):
        from pathlib import Path

        Path(settings.lmtp[5:]).unlink(missing_ok=True)  # the workers share it; the parent removes it
    sys.exit(status)


def _serve_one(ws: Any, settings: Any, sock: Any, lmtp_sock: Any, log_level: str, shared: bool = False) -> bool:
    """One serving process (the only one, or a worker of --workers: `shared`, its LMTP socket
    is the parent's to remove): False when it failed to start."""
    from txcl import otel
    from txcl.serve.server import run_server

    if otel.configured():
        if otel.wants_sdk():
            require_extra("otel", "OpenTelemetry through the SDK (OTEL_TXCL_EXPORTER=sdk)")
        otel.setup()
    state = _build_state(ws, settings, sock)
    state.lmtp_socket = lmtp_sock
    state.lmtp_shared = shared
    try:
        return run_server(state, sock, log_level=log_level)
    except KeyboardInterrupt:
        return True


def _preflight(ws: Any, settings: Any, sock: Any) -> None:
    """Before forking the workers: the tree loads, the routes name its stacks, and the database
    opens and is migrated — once here (reported once, and the workers do not race to create
    the schema), closed again before the fork."""
    from txcl.serve.app import open_default_store
    from txcl.serve.mount import load_serve_tree
    from txcl.serve.routing import Router, parse_routes

    with _startup_errors(sock):
        tree = load_serve_tree(ws)
        Router.for_tree(tree, parse_routes(settings.routes, settings.sources.get("routes", "configuration")),
                        settings.default_stack)
        open_default_store(settings, ws).close()


@contextlib.contextmanager
def _startup_errors(sock: Any) -> Iterator[None]:
    """A start-up problem (a tree that fails to load, a bad route, a database that cannot be
    opened) exits 2 with its message, closing `sock`."""
    from txcl.errors import TxclLoadError
    from txcl.runtime.config import ConfigError
    from txcl.store.errors import StoreError

    try:
        yield
    except TxclLoadError as exc:
        sock.close()
        print_error(exc)
        n = len(exc.diagnostics)
        fail(f"the OPS tree failed to load ({n} error{'s' if n != 1 else ''})")
    except ConfigError as exc:
        sock.close()
        fail(str(exc))
    except StoreError as exc:  # unreachable server, refused login, newer schema, unwritable file
        sock.close()
        fail(f"--db: {exc}")


def _build_state(ws: Any, settings: Any, sock: Any) -> Any:
    """Load the tree, check routes, open the store; exit 2 (closing `sock`) on any problem."""
    from txcl.errors import TxclLoadError
    from txcl.runtime.config import ConfigError
    from txcl.serve.app import build_state
    from txcl.store.errors import StoreError

    with _startup_errors(sock):
        try:
            return build_state(ws, settings)
        except (TxclLoadError, ConfigError, StoreError):
            raise  # reported by _startup_errors
        except OSError as exc:
            sock.close()
            fail(f"cannot start: {exc}")
        except Exception as exc:  # noqa: BLE001 - a startup problem, not a crash
            sock.close()
            fail(f"cannot start: {type(exc).__name__}: {exc}")
