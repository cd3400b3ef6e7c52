"""`txcl worker serve MODULE:ATTRIBUTE [--host H] [--port P]`: serve a worker written with the
worker SDK (`txcl.worker.Worker`) over HTTP, so that `WITH mode = "async"` ops can reach it."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from txcl.cli.common import fail, require_extra


def load_worker(target: str):
    """The `Worker` named by `module:attribute` (the module found from the current folder)."""
    from txcl.worker import Worker

    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        fail(f"name the worker as module:attribute (like workers.scoring:worker), got {target!r}")
    sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        fail(f"cannot import {module_name}: {exc}")
    worker = getattr(module, attribute, None)
    if not isinstance(worker, Worker):
        fail(f"{target} is not a txcl.worker.Worker (got {type(worker).__name__})")
    if not worker.ops:
        fail(f"{target} has no ops: register them with @{attribute}.op(\"name\")")
    return worker


@click.group("worker")
def command() -> None:
    """Run workers written with the worker SDK (txcl.worker)."""


@command.command("serve")
@click.argument("target")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8770, show_default=True, type=click.IntRange(0, 65535), help="The port.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              help="Verbosity of the worker's messages on stderr.")
def serve(target: str, host: str, port: int, log_level: str) -> None:
    """Serve the worker TARGET (module:attribute): each op at POST /<op name>."""
    require_extra("serve", "txcl worker serve")
    import uvicorn

    from txcl.serve.server import bind_socket, setup_logging

    setup_logging(log_level)
    worker = load_worker(target)
    try:
        sock = bind_socket(host, port)
        sock.listen(2048)  # connections wait in the backlog until the server takes them: none refused
    except (OSError, OverflowError) as exc:
        fail(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}")
    bound = sock.getsockname()[1]
    click.echo(f"txcl: worker {target} on http://{host}:{bound} (ops: {', '.join(sorted(worker.ops))})", err=True)
    server = uvicorn.Server(uvicorn.Config(worker, log_level="warning", access_log=False, lifespan="on"))
    server.run(sockets=[sock])
