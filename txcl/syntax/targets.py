"""Classify an EXEC target string (the schemes of docs/language.md, "EXEC").

`classify_exec_target` is used by the per-rule load checks (TX103–TX105) and by the
runtime to pick a dispatch scheme, so both agree on what a target means.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import urlsplit

import attrs

__all__ = ["ASYNC_KINDS", "WORKER_TAKES", "ExecTarget", "TargetError", "classify_exec_target", "is_stage_jump"]

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_STACK_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_SCOPE = re.compile(r"[0-9]{1,9}")
_SUPPORTED = "use txco://, http(s)://, mcp+http(s)://…#tool, queue://, nats://, py://, goto:// or <stack>/<scope>"
_TOOL_NAME = re.compile(r"[A-Za-z0-9_./-]{1,128}")
#: The kinds of target an op can wait for with mode = "async": a worker calls back (http),
#: txcl calls the tool itself (mcp), a worker claims the job from a pull queue (queue) or takes
#: it from a NATS JetStream stream (nats).
ASYNC_KINDS = frozenset({"http", "mcp", "queue", "nats"})
#: The kinds whose jobs a worker takes (from txcl's pull queue, or from NATS): async only.
WORKER_TAKES = frozenset({"queue", "nats"})
QUEUE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
NATS_SUBJECT = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){0,15}")


@attrs.frozen(slots=True)
class ExecTarget:
    """A valid EXEC target.

    kind: "builtin" (txco://name), "http" (http/https URL), "mcp" (a tool on a Model Context
    Protocol server: `url` is the server's endpoint, `tool` the name after `#`), "queue" (a job
    in the pull queue `queue` that workers claim from txcl), "nats" (a job published to NATS
    JetStream, subject `txcl.jobs.<queue>`), "py" (py://module:function),
    "goto" (goto://[stack/]scope) or "stage" (<stack>/<scope>).
    """

    kind: str
    target: str
    builtin: str | None = None
    url: str | None = None
    module: str | None = None
    function: str | None = None
    stack: str | None = None  # None for goto://<scope>: the current stack
    scope: int | None = None
    tool: str | None = None  # mcp: the tool's name
    queue: str | None = None  # queue: the queue's name; nats: the subject (under txcl.jobs.)

    @property
    def trusted(self) -> bool:
        return self.kind in ("builtin", "goto", "stage") and self.builtin != "mock"

    @property
    def text(self) -> str:
        """The EXEC string as written."""
        return self.target

    @property
    def name(self) -> str | None:
        """A builtin's name (``txco://name``)."""
        return self.builtin

    @property
    def transport(self) -> str:
        """How a call goes out, as traces name it: txco, mock, http(s), mcp, py or goto."""
        if self.kind == "builtin":
            return "mock" if self.builtin == "mock" else "txco"
        if self.kind == "http":
            return "https" if self.target.lower().startswith("https://") or (self.url or "").lower().startswith(
                "https://") else "http"
        if self.kind in ("goto", "stage"):
            return "goto"
        return self.kind

    @property
    def is_jump(self) -> bool:
        return self.kind in ("goto", "stage")

    @property
    def stamped(self) -> bool:
        """Sync dispatches to txco/http/py get the identity stamp."""
        return self.kind in ("builtin", "http", "py")

    @property
    def is_stage_jump(self) -> bool:
        return self.kind in ("goto", "stage") or (
            self.kind == "builtin" and (self.builtin or "").startswith("route"))


@attrs.frozen(slots=True)
class TargetError:
    """Why a target is rejected: `code` is TX103, TX104, TX105 or TX113; `message` is complete."""

    code: str
    message: str


def _stage(text: str) -> tuple[str | None, int] | None:
    """(stack, scope) of `[stack/]scope`, stack None when absent; None when malformed."""
    stack, _, scope = text.rpartition("/")
    if not _SCOPE.fullmatch(scope):
        return None
    if not stack and "/" not in text:
        return None, int(scope)
    if not stack or len(stack) > 128:
        return None
    if not all(_STACK_SEGMENT.fullmatch(seg) for seg in stack.split("/")):
        return None
    return stack, int(scope)


@functools.lru_cache(maxsize=4096)
def classify_exec_target(target: str) -> ExecTarget | TargetError:
    """Kind and parts of an EXEC target, or the TX103/TX104/TX105 error for it (cached)."""
    def bad(reason: str) -> TargetError:
        return TargetError("TX104", f'EXEC "{target}": {reason}')

    m = _SCHEME.match(target)
    if m is None:
        if not target:
            return bad("the target is empty")
        stage = _stage(target)
        if stage is None or stage[0] is None:
            return bad("not a target; use txco://<name>, http(s)://…, py://<module>:<function>, "
                       "goto://<scope> or <stack>/<scope>")
        return ExecTarget("stage", target, stack=stage[0], scope=stage[1])
    scheme = m.group(1).lower()
    rest = target[m.end():]
    if scheme == "txco":
        if not rest:
            return bad("a txco:// target needs a builtin name")
        if any(ch.isspace() for ch in rest):
            return bad("a builtin name cannot contain whitespace")
        return ExecTarget("builtin", target, builtin=rest)
    if scheme in ("http", "https"):
        if not _is_absolute_url(target):
            return bad("not an absolute URL with a host")
        return ExecTarget("http", target, url=target)
    if scheme == "py":
        module, sep, function = rest.partition(":")
        if not sep or not _MODULE.fullmatch(module) or not _IDENT.fullmatch(function):
            return bad("a Python target is py://<module>:<function> (dotted module, "
                       "function name)")
        return ExecTarget("py", target, module=module, function=function)
    if scheme == "goto":
        stage = _stage(rest)
        if stage is None:
            return TargetError("TX105", f'EXEC "{target}": a goto target is goto://<scope> or '
                               "goto://<stack>/<scope>")
        return ExecTarget("goto", target, stack=stage[0], scope=stage[1])
    if scheme in ("mcp+http", "mcp+https"):
        return _mcp_target(target)
    if scheme == "queue":
        if not QUEUE_NAME.fullmatch(rest):
            return bad("a queue target is queue://<name> (letters, digits, \"_\", \"-\" and \".\"; at most 128)")
        return ExecTarget("queue", target, queue=rest)
    if scheme == "nats":
        if len(rest) > 128 or not NATS_SUBJECT.fullmatch(rest):
            return bad("a NATS target is nats://<subject>: tokens of letters, digits, \"_\" and \"-\" "
                       "joined by \".\" (no wildcards; at most 128)")
        return ExecTarget("nats", target, queue=rest)
    return TargetError("TX103", f"EXEC scheme '{m.group(1)}://' is not supported; {_SUPPORTED}")


def _is_absolute_url(url: str) -> bool:
    """A URL with a host, a valid port if any, and no whitespace."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return False
    return bool(host) and not any(ch.isspace() for ch in url)


def _mcp_target(target: str) -> ExecTarget | TargetError:
    """`mcp+https://host/path#tool`: the server's endpoint and the tool to call on it."""
    endpoint, sep, tool = target[len("mcp+"):].partition("#")
    if not _is_absolute_url(endpoint) or any(ch.isspace() for ch in target):
        return TargetError("TX104", f'EXEC "{target}": not an absolute URL with a host')
    if not sep or not tool:
        return TargetError("TX113", f'EXEC "{target}": an MCP target names its tool after "#" '
                           f'(mcp+{endpoint}#<tool>)')
    if not _TOOL_NAME.fullmatch(tool):
        return TargetError("TX113", f'EXEC "{target}": the tool name "{tool}" may hold letters, digits, '
                           '"_", "-", "." and "/" (at most 128)')
    return ExecTarget("mcp", target, url=endpoint, tool=tool)


def is_stage_jump(target: str) -> bool:
    result = classify_exec_target(target)
    return isinstance(result, ExecTarget) and result.is_stage_jump
