"""The language's vocabulary that the core needs (no editor dependencies): the WITH keys the
runtime consumes, with their value kind and a one-line explanation. `txcl check` (TX214's
did-you-mean) reads it; the language server and the REPL complete and explain from it.
"""

from __future__ import annotations

import attrs


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
    WithKey("validate", "boolean", "Check the op's answer against its <name>.schema.json $defs.output; a "
            "violation is an op error (typed envelopes).", "true"),
)

WITH_KEY_DOCS: dict[str, WithKey] = {k.name: k for k in WITH_KEYS}

__all__ = ["WithKey", "WITH_KEYS", "WITH_KEY_DOCS"]
