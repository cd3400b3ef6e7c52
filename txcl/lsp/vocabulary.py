"""What an author can type, with one-line explanations: keywords, WITH keys the runtime
consumes, EXEC schemes and the function registry.

The language server (completion, hover) and the REPL (completion) both read this module,
so the two never offer different words.
"""

from __future__ import annotations

from typing import Iterator

import attrs

from txcl.vocabulary import CLAUSE_KEYWORDS, CONSTANTS, ITEM_WORDS, LOOP_MODIFIERS

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


from txcl.vocabulary import WITH_KEY_DOCS, WITH_KEYS, WithKey  # noqa: E402,F401 - the core's table


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
    for word in CLAUSE_KEYWORDS + ITEM_WORDS + LOOP_MODIFIERS + CONSTANTS:
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
    """The registry's functions in name order."""
    from txcl.functions.registry import REGISTRY

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

