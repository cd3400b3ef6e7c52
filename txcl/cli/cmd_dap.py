"""`txcl dap [--port N]`: the step debugger, as a Debug Adapter Protocol server."""

from __future__ import annotations

import sys

import click


@click.command("dap")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Serve one session over TCP on 127.0.0.1:PORT instead of stdio (0: any free port, printed).")
def command(port: int | None) -> None:
    """Serve the step debugger for one session (VS Code, Neovim's nvim-dap, any DAP client).

    A launch starts a stack on an input, one case of a rule test file, or a stored request
    walked again with its recorded op answers. Breakpoints stand on a rule file's clauses (with
    TXCL conditions, hit counts and log messages) or on `stack/scope`; the walk stops, steps
    clause by clause, and shows the envelope, the op's input and answer, and each WHEN
    condition. Nothing is sent over the network unless the launch allows it. See
    docs/debugging.md.
    """
    import logging

    from txcl.debug.adapter import Adapter
    from txcl.debug.wire import Writer

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    if port is None:
        out = sys.stdout.buffer
        sys.stdout = sys.stderr  # the protocol owns standard output: a stray print must not break it
        status = Adapter(sys.stdin.buffer, Writer(out)).serve()
        sys.exit(status)
    import socket

    with socket.create_server(("127.0.0.1", port)) as server:
        click.echo(f"txcl dap: listening on 127.0.0.1:{server.getsockname()[1]}", err=True)
        conn, _ = server.accept()
        with conn, conn.makefile("rb") as reader, conn.makefile("wb") as writer:
            status = Adapter(reader, Writer(writer)).serve()
    sys.exit(status)
