"""`txcl playground [DIR]`: the rule playground alone, on this machine only."""

from __future__ import annotations

import click

from txcl.cli.common import fail, require_extra


@click.command("playground")
@click.argument("directory", default=".", required=False)
@click.option("--port", default=8090, show_default=True, type=click.IntRange(0, 65535),
              help="Port on 127.0.0.1 (0 picks a free one).")
def command(directory: str, port: int) -> None:
    """Serve the playground on 127.0.0.1: type a rule and an envelope and see WHEN per
    condition, the op input, the output and the envelope after the merge as you type; or run a
    stack of DIR's OPS tree with every EXEC mocked. Nothing it runs calls the network or writes
    a database. DIR without OPS/ gives the one-rule mode only."""
    require_extra("ui", "txcl playground")
    import uvicorn

    from txcl.errors import TxclLoadError
    from txcl.ops.tree import WorkspaceNotFound, find_workspace, load_ops
    from txcl.runtime.config import Settings
    from txcl.serve.server import base_url, bind_socket, setup_logging
    from txcl.ui.app import playground_app

    setup_logging("warning")
    tree = None
    try:
        workspace, _ = find_workspace(directory)
        tree = load_ops(workspace)
    except WorkspaceNotFound:
        tree = None
    except TxclLoadError as exc:
        from txcl.cli.common import print_error

        print_error(exc)
        fail("the OPS tree failed to load; fix it or start the playground elsewhere")
    try:
        sock = bind_socket("127.0.0.1", port)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    url = base_url("127.0.0.1", sock.getsockname()[1])
    click.echo(f"txcl: playground on {url}/_txc/ui/playground (Ctrl-C stops it)", err=True)
    app = playground_app(tree, Settings())
    config = uvicorn.Config(app, lifespan="on", access_log=False, log_config=None, log_level="warning",
                            server_header=False)
    uvicorn.Server(config).run(sockets=[sock])
