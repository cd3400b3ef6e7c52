"""`txcl mcp doctor URL`: ask a Model Context Protocol server who it is and which tools it has."""

from __future__ import annotations

import click

from txcl.cli.common import fail


def endpoint_of(text: str) -> str:
    """The server endpoint of `URL`, `mcp+URL` or `mcp+URL#tool`."""
    url = text.strip()
    if url.lower().startswith("mcp+"):
        url = url[4:]
    return url.split("#", 1)[0]


@click.group("mcp")
def command() -> None:
    """Work with Model Context Protocol servers (the targets of EXEC "mcp+https://…#tool")."""


@command.command("doctor")
@click.argument("url")
@click.option("--header", "-H", "headers", multiple=True, metavar="NAME:VALUE",
              help="Send this HTTP header (repeatable), e.g. -H 'Authorization: Bearer …'.")
@click.option("--timeout", default="10s", show_default=True, help="How long to wait for the server.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def doctor(url: str, headers: tuple[str, ...], timeout: str, as_json: bool) -> None:
    """Run the initialize handshake with URL (a server's streamable-HTTP endpoint; an EXEC
    target `mcp+https://host/path#tool` works too) and print the server's name, version and
    protocol version, then its tools with their input schemas. Exit 1 when the server cannot be
    reached or does not speak MCP."""
    import asyncio

    from txcl.cli.common import require_extra
    from txcl.values.coerce import duration_to_ms

    require_extra("mcp", "txcl mcp doctor")
    endpoint = endpoint_of(url)
    if not endpoint.lower().startswith(("http://", "https://")):
        fail(f"{url}: give the server's http(s):// endpoint (or an mcp+http(s):// EXEC target)")
    ms = duration_to_ms(timeout)
    if ms is None or ms <= 0:
        fail(f"--timeout: {timeout!r} is not a duration (e.g. 10s, 1500ms)")
    sent: dict[str, str] = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            fail(f"--header: {header!r} is not NAME:VALUE")
        sent[name.strip()] = value.strip()
    from txcl.mcpclient import McpCallError, probe

    try:
        info = asyncio.run(probe(endpoint, headers=sent, timeout_s=ms / 1000.0))
    except McpCallError as exc:  # unreachable, not MCP, or the SDK is not installed
        fail(exc.message, code=1)
    if as_json:
        from txcl.values.jsonio import dumps

        click.echo(dumps({"endpoint": endpoint, "server": {"name": info.name, "version": info.version},
                          "protocol_version": info.protocol_version,
                          "tools": [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                                    for t in info.tools]}, indent=2))
        return
    from txcl.values.jsonio import dumps

    click.echo(f"endpoint   {endpoint}")
    click.echo(f"server     {info.name} {info.version}")
    click.echo(f"protocol   {info.protocol_version}")
    click.echo(f"tools      {len(info.tools)}")
    for tool in info.tools:
        click.echo("")
        click.echo(f"  {tool.name}" + (f" — {' '.join(tool.description.split())}" if tool.description else ""))
        required = set(tool.input_schema.get("required", []) or [])
        props = tool.input_schema.get("properties", {}) or {}
        for name, schema in props.items():
            kind = schema.get("type", "any") if isinstance(schema, dict) else "any"
            mark = " (required)" if name in required else ""
            click.echo(f"    {name}: {kind if isinstance(kind, str) else '|'.join(map(str, kind))}{mark}")
        click.echo(f"    schema: {dumps(tool.input_schema)}")
        click.echo(f"    EXEC \"mcp+{endpoint}#{tool.name}\"")
