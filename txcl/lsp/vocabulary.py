"""What an author can type, with one-line explanations: keywords, WITH keys the runtime
consumes, EXEC schemes and the function registry.

The language server (completion, hover) and the REPL (completion) both read this module,
so the two never offer different words.
"""

from __future__ import annotations

from typing import Iterator

import attrs

from txcl.highlight import CLAUSE_KEYWORDS, CONSTANTS, LOOP_MODIFIERS

KEYWORD_DOCS: dict[str, str] = {
    "WHEN": "Condition on the scope's envelope; no WHEN (or `WHEN *`) matches everything.",
    "SET": "Set-if-absent assignments: before SELECT they decorate the op's input (SET PRE), "
           "after it the merged envelope (SET POST). Inside LOOP: overwrite before each later pass.",
    "SELECT": "Projection: the op receives only the listed paths (`SELECT *` = everything). "
              "Items: `source [AS destination] [DEFAULT value]`.",
    "WITH": "Settings for the runtime and the op: `timeout`, `mode`, `into`, `method`, … "
            "Values are resolved against the input after SET PRE.",
    "PRIORITY": "Integer; among matching rules at a stage, the highest positive priority "
                "filters which rules run.",
    "EXEC": "The target: `txco://` builtin, `http(s)://` endpoint, `py://module:function`, "
            "`goto://…` or `<stack>/<scope>` stage jump.",
    "LOOP": "Repeat the EXEC until a condition holds: `UNTIL cond [SET …] [EVERY d] [MAX n]`.",
    "EMIT": "Overwrite-assignments onto the op's output before it merges into the envelope.",
    "AS": "SELECT item destination: `SELECT .source AS .dest`.",
    "DEFAULT": "SELECT item fallback when the source is missing or \"\": `DEFAULT value`.",
    "UNTIL": "LOOP stop condition (WHEN condition syntax), tested after every pass.",
    "EVERY": "LOOP wait between passes: a duration string (\"250ms\") or milliseconds (default 50 ms).",
    "MAX": "LOOP pass limit: a positive integer (default 10).",
    "TRUE": "Boolean literal true.",
    "FALSE": "Boolean literal false.",
    "NULL": "Null; only on the right of a comparison, where it compares as \"\".",
}


@attrs.frozen
class WithKey:
    name: str
    value: str
    doc: str
    snippet: str  # text inserted after `name = `


WITH_KEYS: tuple[WithKey, ...] = (
    WithKey("timeout", "number (ms) or duration", "Time limit of the op (default 5 s; with LOOP "
            "the whole loop, default 60 s; async/continuable: the worker's budget).", '"5s"'),
    WithKey("mode", '"sync" | "async" | "continuable"', "Absent = sync. async: an outside worker "
            "calls back (http(s) only). continuable: answer synchronously within continue_after, "
            "else suspend.", '"async"'),
    WithKey("continue_after", "number (ms) or duration", "continuable: synchronous wait before "
            "suspending (default 5 s).", '"5s"'),
    WithKey("join_at_scope", "integer", "async only: do not wait here; merge the result at the "
            "first scope at or above this number.", "500"),
    WithKey("each", "array (usually a path)", "async only: one worker call per element; needs "
            "into.", ".items"),
    WithKey("window", "integer 1–1024", "With each: at most this many calls in flight (default 32).",
            "32"),
    WithKey("on_item_error", '"fail" | "collect" | "tolerate"', "With each: fail fast (default), store an "
            "{\"error\": …} object for the failed item, or do that until more than tolerated_failures fail.",
            '"collect"'),
    WithKey("heartbeat", "duration", 'mode = "async": the worker must POST {"status": "running"} to its '
            "callback URL at least this often, else the call times out early.", '"30s"'),
    WithKey("join_deadline", "duration", "With join_at_scope: fail the run when the result is not in this "
            "long after the dispatch (at the join, or while parked there).", '"30s"'),
    WithKey("on_join_deadline", '"fail" | "continue"', "With join_deadline: fail the run (default), or "
            "run the join scope without the result (a late result is recorded, never merged).", '"continue"'),
    WithKey("join_wait", "duration", "With join_at_scope: at the join, wait in the request up to this long "
            "for a result that is nearly there before answering 202.", '"500ms"'),
    WithKey("cancel_url", "http(s) URL", 'mode = "async": POST {"status": "cancelled"} here when the flow '
            "gives up on the call (a worker's ack may name its own).", '"https://"'),
    WithKey("retries", "integer 0–100", 'mode = "async": send a call again when its dispatch fails (no ack in '
            'time, no connection, a 5xx) or the worker answers {"status": "failed", "retryable": true}; '
            "each attempt gets a fresh token (per item with each).", "3"),
    WithKey("retry_backoff", "duration", "With retries: the wait before the first retry (default 1 s), "
            "doubled for each later one, plus jitter.", '"2s"'),
    WithKey("tolerated_failures", 'integer or "N%"', 'With on_item_error = "tolerate": how many items may '
            "fail (a count, or a percentage of the items) before the op fails.", '"10%"'),
    WithKey("max_duration", "number (ms) or duration", "mode = \"async\": the worker's time budget "
            "(timeout is then ignored).", '"10m"'),
    WithKey("into", "path string", "Nest the op's whole output under this path before EMIT and "
            "merge.", '"result"'),
    WithKey("method", "string", "http(s): request method (default POST; GET, HEAD and DELETE send "
            "no body).", '"GET"'),
    WithKey("url", "string", "http(s): URL that replaces the EXEC target.", '"https://"'),
    WithKey("status_into", "path string", "http(s): write the response status here; a non-2xx "
            "answer is then not an op error.", '"status"'),
    WithKey("headers", "string per header", "http(s): extra request headers, `headers.<name> = "
            "\"value\"`.", '"value"'),
    WithKey("body_encoding", "string", "http(s): request body encoding (form encoding).", '"form"'),
    WithKey("body_path", "string", "http(s): send only this part of the input as the body.",
            '"body"'),
    WithKey("redact", "comma-separated path strings", "Trace only: mask these values in recorded "
            "traces.", '"password"'),
    WithKey("omit", "comma-separated path strings", "Trace only: leave these values out of "
            "recorded traces.", '"blob"'),
    WithKey("debug", "boolean", "Record extra detail for this op in the trace.", "true"),
)

WITH_KEY_DOCS: dict[str, WithKey] = {k.name: k for k in WITH_KEYS}

EXEC_SCHEMES: tuple[tuple[str, str], ...] = (
    ("txco://", "builtin op (trusted); txco://noop returns {}"),
    ("https://", "HTTP endpoint (untrusted output)"),
    ("http://", "HTTP endpoint (untrusted output)"),
    ("mcp+https://", "a tool on an MCP server: mcp+https://host/path#tool (untrusted output)"),
    ("mcp+http://", "a tool on an MCP server: mcp+http://host/path#tool (untrusted output)"),
    ("py://", "in-process Python function: py://module.path:function (untrusted output)"),
    ("goto://", "stage jump: goto://<scope> or goto://<stack>/<scope>"),
)


def keywords() -> list[str]:
    """Every keyword a rule author may type, upper case, in a stable order."""
    seen: dict[str, None] = {}
    for word in CLAUSE_KEYWORDS + ("AS", "DEFAULT") + LOOP_MODIFIERS + CONSTANTS:
        seen.setdefault(word, None)
    return list(seen)


@attrs.frozen
class FunctionInfo:
    name: str
    signature: str  # "now([fmt])"
    arity: str  # "takes 0 or 1 argument"
    doc: str
    deterministic: bool


def functions() -> Iterator[FunctionInfo]:
    """The registry's functions in name order (empty if the registry is not importable)."""
    try:
        from txcl.functions.registry import REGISTRY
    except ImportError:  # pragma: no cover - the registry ships with the package
        return iter(())
    return iter(
        FunctionInfo(spec.name, spec.signature, spec.arity_text(), spec.doc, spec.deterministic)
        for _, spec in sorted(REGISTRY.items())
    )


def function_info(name: str) -> FunctionInfo | None:
    for info in functions():
        if info.name == name:
            return info
    return None


def function_markdown(info: FunctionInfo) -> str:
    """Hover text of a function: signature, arity, doc."""
    extra = "" if info.deterministic else " Not deterministic."
    return f"```txcl\n&{info.signature}\n```\n{info.doc}\n\n_{info.arity}._{extra}"


def keyword_markdown(word: str) -> str | None:
    doc = KEYWORD_DOCS.get(word.upper())
    if doc is None:
        return None
    return f"**{word.upper()}** — {doc}"


# The `@` facts an author reads or writes most: offered by completion after `@`.
RESERVED_FACTS: tuple[tuple[str, str], ...] = (
    ("halt", "EMIT @halt = true: stop the flow after this scope"),
    ("goto", 'EMIT @goto = "stack/scope": jump after this scope'),
    ("delete", "EMIT @delete = [paths]: remove envelope paths after the merge"),
    ("ttl", "the remaining TTL budget (EMIT @ttl may only lower it)"),
    ("rid", "the request id"),
    ("src", "where the request came from (http, cli, continuation, …)"),
    ("stack", "the stack being walked"),
    ("web.req", "the HTTP request (method, url, headers, body)"),
    ("web.res", "the HTTP answer a rule may shape (status, headers, body)"),
)

