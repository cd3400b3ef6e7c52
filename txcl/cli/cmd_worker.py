"""`txcl worker serve MODULE:ATTRIBUTE [--host H] [--port P]`: serve a worker written with the
worker SDK (`txcl.worker.Worker`) over HTTP, so that `WITH mode = "async"` ops can reach it."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

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


def run_until_signalled(runner: Any, worker: Any) -> None:
    """Run a pull or NATS client until it ends; SIGINT/SIGTERM stop it taking jobs, and the jobs
    running finish first."""
    import asyncio
    import signal

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, runner.stop.set)
        try:
            await runner.run()
        finally:
            await worker.aclose()

    asyncio.run(main())


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


@command.command("pull")
@click.argument("target")
@click.option("--server", required=True, metavar="URL", help="The txcl server to claim jobs from (http://host:port).")
@click.option("--queue", "queues", multiple=True, metavar="NAME",
              help="A queue to claim from (repeatable; default: one per op of the worker, named as the op).")
@click.option("--token", envvar="TXCL_QUEUE_TOKEN", default=None, metavar="TEXT",
              help="The server's queue token (default: $TXCL_QUEUE_TOKEN; not needed on the server's own host).")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 1000),
              help="Jobs run at once, over every queue.")
@click.option("--wait", "wait_s", default=20.0, show_default=True, type=click.FloatRange(0, 300),
              help="Seconds a claim waits on the server when its queue is empty.")
@click.option("--lease", "lease_s", default=None, type=click.FloatRange(1, 3600), metavar="SECONDS",
              help="How long each job is held without a heartbeat (default: the server's --queue-lease).")
@click.option("--name", default=None, help="This worker's name in the traces and the dashboard (default: host and pid).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              help="Verbosity of the worker's messages on stderr.")
def pull(target: str, server: str, queues: tuple[str, ...], token: str | None, concurrency: int, wait_s: float,
         lease_s: float | None, name: str | None, log_level: str) -> None:
    """Run the worker TARGET (module:attribute) on the jobs of queue:// ops, claimed from --server."""
    import os
    import socket

    import logging

    from txcl.worker.pull import ClaimRefused, PullClient

    if not server.startswith(("http://", "https://")):
        fail(f"--server is the txcl server's URL, like http://127.0.0.1:8080 (got {server!r})")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is too many
    worker = load_worker(target)
    try:
        client = PullClient(worker, server, queues=queues or None, token=token, concurrency=concurrency,
                            wait_s=wait_s, lease_s=lease_s, name=name or f"{socket.gethostname()}-{os.getpid()}")
    except ValueError as exc:
        fail(str(exc))
    click.echo(f"txcl: worker {target} claiming from {server} (queues: {', '.join(client.queues)})", err=True)

    try:
        run_until_signalled(client, worker)
    except ClaimRefused as exc:
        fail(str(exc))


@command.command("nats")
@click.argument("target")
@click.option("--nats", "url", required=True, metavar="URL", help="The NATS server (with JetStream), like nats://127.0.0.1:4222.")
@click.option("--op", "ops", multiple=True, metavar="NAME",
              help="An op whose jobs to take (repeatable; default: every op of the worker). Its jobs are on txcl.jobs.<op>.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 1000),
              help="Jobs run at once, over every op.")
@click.option("--ack-wait", "ack_wait_s", default=60.0, show_default=True, type=click.FloatRange(1, 3600),
              help="Seconds JetStream waits for a job's answer (heartbeats restart it) before another worker gets it.")
@click.option("--name", default=None, help="This worker's connection name (default: host and pid).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              help="Verbosity of the worker's messages on stderr.")
def nats_command(target: str, url: str, ops: tuple[str, ...], concurrency: int, ack_wait_s: float,
                 name: str | None, log_level: str) -> None:
    """Run the worker TARGET (module:attribute) on the jobs of nats:// ops, taken from JetStream."""
    import logging
    import os
    import socket

    require_extra("nats", "txcl worker nats")
    from txcl.worker.natsclient import NatsWorker

    if not url.startswith(("nats://", "tls://")):
        fail(f"--nats is the NATS server's URL, like nats://127.0.0.1:4222 (got {url!r})")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = load_worker(target)
    try:
        taker = NatsWorker(worker, url, ops=ops or None, concurrency=concurrency, ack_wait_s=ack_wait_s,
                           name=name or f"{socket.gethostname()}-{os.getpid()}")
    except ValueError as exc:
        fail(str(exc))
    click.echo(f"txcl: worker {target} taking jobs from {url} (ops: {', '.join(taker.ops)})", err=True)

    from nats.errors import NoServersError

    try:
        run_until_signalled(taker, worker)
    except (OSError, NoServersError) as exc:
        fail(f"cannot reach NATS at {url}: {exc or type(exc).__name__}")
