"""`txcl lsp`: run the TXCL language server over stdio (editors start it)."""

from __future__ import annotations

import logging

import click


@click.command("lsp")
@click.option("--stdio", is_flag=True, help="Talk over stdin/stdout (the default; accepted for editor clients).")
@click.option("--log-file", type=click.Path(dir_okay=False), help="Write the server's log to this file.")
@click.option("-v", "--verbose", is_flag=True, help="Log debug detail (with --log-file).")
def command(stdio: bool, log_file: str | None, verbose: bool) -> None:
    """Start the language server: diagnostics, hover, completion, outline, formatting."""
    from txcl.cli.common import require_extra

    require_extra("lsp", "txcl lsp")
    if log_file:
        logging.basicConfig(filename=log_file, level=logging.DEBUG if verbose else logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from txcl.lsp.server import server

    server.start_io()
