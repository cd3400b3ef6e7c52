"""`txcl check --mcp-schemas`: the ops that call a tool on an MCP server, checked against the
tools that server lists.

For every rule whose EXEC is `mcp+http(s)://…#tool`:

- TX250: the server does not list the tool;
- TX251: the rule's SELECT gives the tool none of an argument its input schema requires (a
  rule without SELECT, or with `SELECT *`, passes the whole envelope and is not checked);
- TX252 (warning): the server could not be asked (unreachable, not an MCP endpoint).

Servers are asked once per run through the official SDK (`initialize`, `tools/list`); the
answers are kept in `.txcl-data/cache/mcp-schemas.json` for an hour, so a second check does not
ask again (`--mcp-schemas-refresh` always asks). The file is plain JSON sealed with this user's
cache key (txcl.safecache) and validated when read: one that someone else wrote is ignored.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, Iterable

from txcl.errors import Diagnostic

CODES = frozenset({"TX250", "TX251", "TX252"})  # reported only with --mcp-schemas
CACHE_NAME = "mcp-schemas.json"
CACHE_TTL_S = 3600.0
PROBE_TIMEOUT_S = 10.0


def _mcp_ops(sources: dict[str, str]) -> list[tuple[str, Any, Any, str]]:
    """(file, rule, classified target, source) of every rule calling an MCP tool."""
    from txcl.errors import TxclError
    from txcl.syntax.parser import parse_rule
    from txcl.syntax.targets import ExecTarget, classify_exec_target

    found = []
    for shown, source in sources.items():
        if "mcp+" not in source or not shown.endswith(".txcl"):
            continue
        try:
            rule = parse_rule(source, shown)
        except (TxclError, ValueError):
            continue  # its own diagnostics say why
        if rule.exec is None:
            continue
        target = classify_exec_target(rule.exec.target)
        if isinstance(target, ExecTarget) and target.kind == "mcp":
            found.append((shown, rule, target, source))
    return found


_PURPOSE = b"txcl mcp schemas"
_MAX_CACHE_BYTES = 64 * 1024 * 1024


def _valid_entry(entry: Any) -> bool:
    """A cached server answer of the shape txcl writes: tools by name, each with its schemas."""
    if not isinstance(entry, dict) or not isinstance(entry.get("tools"), dict):
        return False
    if not isinstance(entry.get("at"), (int, float)) or isinstance(entry.get("at"), bool):
        return False
    for name, tool in entry["tools"].items():
        if not isinstance(name, str) or not isinstance(tool, dict):
            return False
        if not all(isinstance(tool.get(k, {}), dict) for k in ("input", "output")):
            return False
    return True


def _load_cache(path: Path | None) -> dict:
    """The cached answers by server URL (only entries of the right shape; {} for a file that is
    missing, damaged or not this user's)."""
    from txcl.safecache import CacheDataError, loads, unseal

    if path is None or not path.exists():
        return {}
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_CACHE_BYTES + 1)
        if len(raw) > _MAX_CACHE_BYTES:
            return {}
        data = loads(unseal(raw, _PURPOSE))
    except (OSError, ValueError, CacheDataError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {url: entry for url, entry in data.items() if isinstance(url, str) and _valid_entry(entry)}


def _save_cache(path: Path | None, data: dict) -> None:
    from txcl.safecache import dumps, seal

    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(seal(dumps(data), _PURPOSE))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass  # a cache that cannot be written is only slower next time


async def _ask_all(urls: Iterable[str]) -> dict[str, dict]:
    from txcl.mcpclient import McpCallError, probe

    async def ask(url: str) -> tuple[str, dict]:
        try:
            info = await probe(url, timeout_s=PROBE_TIMEOUT_S)
        except McpCallError as exc:
            message = exc.message
            prefix = f"mcp {url}: "
            return url, {"error": message[len(prefix):] if message.startswith(prefix) else message}
        except Exception as exc:  # noqa: BLE001 - reported as TX252
            return url, {"error": f"{type(exc).__name__}: {exc}"}
        return url, {"tools": {t.name: _tool_schemas(t) for t in info.tools}}

    return dict(await asyncio.gather(*(ask(u) for u in urls)))


def _tool_schemas(tool: Any) -> dict:
    """A listed tool's input and output schemas ({} where it gives none or not an object)."""
    schemas = {}
    for key, attr in (("input", "input_schema"), ("output", "output_schema")):
        value = getattr(tool, attr, None)
        schemas[key] = value if isinstance(value, dict) else {}
    return schemas


def server_tools(urls: set[str], cache_path: Path | None, *, refresh: bool = False) -> dict[str, dict]:
    """{url: {"tools": {name: {"input": schema, "output": schema}}} or {"error": reason}}, from the
    cache when fresh."""
    cache = _load_cache(cache_path)
    now = time.time()
    answers: dict[str, dict] = {}
    todo = []
    for url in sorted(urls):
        entry = cache.get(url)
        if not refresh and isinstance(entry, dict) and "tools" in entry and now - entry.get("at", 0) < CACHE_TTL_S:
            answers[url] = entry
        else:
            todo.append(url)
    if todo:
        fresh = asyncio.run(_ask_all(todo))
        for url, entry in fresh.items():
            answers[url] = entry
            if "tools" in entry:
                cache[url] = {**entry, "at": now}
        _save_cache(cache_path, cache)
    return answers


def _provided(rule: Any) -> set[str] | None:
    """The top-level argument names the rule's SELECT gives (None: the whole envelope)."""
    select = rule.select
    if select is None or select.star:
        return None
    names = set()
    for item in select.items:
        segments = item.target.segments
        if segments and segments[0] != "_txc":
            names.add(segments[0])
    return names


def mcp_findings(sources: dict[str, str], cache_dir: Path | None, *, refresh: bool = False) -> list[Diagnostic]:
    """The TX250–TX252 findings of the MCP ops among `sources` ({shown path: text})."""
    ops = _mcp_ops(sources)
    if not ops:
        return []
    cache_path = cache_dir / ".txcl-data" / "cache" / CACHE_NAME if cache_dir is not None else None
    servers = server_tools({target.url for _, _, target, _ in ops}, cache_path, refresh=refresh)
    out: list[Diagnostic] = []
    for shown, rule, target, source in ops:
        span = rule.exec.target_span
        entry = servers.get(target.url, {})
        if "error" in entry:
            out.append(Diagnostic("TX252", f"could not read the tools of {target.url}: {entry['error']}",
                                  shown, span, source=source))
            continue
        tools = entry.get("tools", {})
        if target.tool not in tools:
            from txcl.suggest import did_you_mean

            close = did_you_mean(target.tool, list(tools))
            hint = f'did you mean "{close}"?' if close else (
                f"it lists: {', '.join(sorted(tools))}" if tools else "it lists no tools")
            out.append(Diagnostic("TX250", f'the MCP server {target.url} has no tool "{target.tool}"',
                                  shown, span, hint=hint, source=source))
            continue
        provided = _provided(rule)
        schema = tools[target.tool].get("input", {})
        required = [r for r in schema.get("required", []) if isinstance(r, str)]
        if provided is None:
            continue
        missing = [r for r in required if r not in provided]
        if missing:
            shown_missing = ", ".join(f'"{m}"' for m in missing)
            out.append(Diagnostic(
                "TX251", f'SELECT gives the tool "{target.tool}" no {shown_missing}, which its input schema '
                         "requires", shown, rule.select.span, source=source,
                hint=f"select a value under that name, e.g. SELECT …, .<path> AS .{missing[0]}"))
    return out


__all__ = ["mcp_findings", "server_tools", "CACHE_NAME", "CODES"]
