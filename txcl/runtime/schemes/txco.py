"""`txco://` builtins: in-process functions (input, directives, ctx) → object.

The registry is open: `register("name", fn)` adds a builtin (the continuations package
registers `continuation-result`). An unknown name is an op error at dispatch. A builtin
defined with `def` returns its output and is called in place, inside the walk of its scope;
one that waits for something is an `async def` and is awaited under the op's timeout.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import inspect
import mimetypes
import os
from pathlib import Path
from typing import Any, Awaitable, Callable

from txcl.ops.layout import is_system_stack, lineage
from txcl.runtime.config import parse_duration_ms
from txcl.runtime.dispatch import OpContext, OpError
from txcl.values.coerce import text_form
from txcl.values.merge import deep_copy
from txcl.values.paths import MISSING, PathError, read, split_path_string, write

Builtin = Callable[[dict, dict, OpContext], "dict | Awaitable[dict]"]
BUILTINS: dict[str, Builtin] = {}


def register(name: str, fn: Builtin) -> None:
    BUILTINS[name] = fn


def builtin(name: str) -> Callable[[Builtin], Builtin]:
    def deco(fn: Builtin) -> Builtin:
        register(name, fn)
        return fn
    return deco


_PLAIN: dict[str, tuple[Builtin, bool]] = {}  # name → (its function, whether a plain `def`)


def plain_builtin(name: str | None) -> bool:
    """Whether builtin `name` is registered and a plain function (not an `async def`), so a
    walk may call it in place. Asked per call: the registry may change while a tree is
    loaded (a builtin registered at startup, or replaced)."""
    fn = BUILTINS.get(name) if name is not None else None
    if fn is None:
        return False
    known = _PLAIN.get(name)  # type: ignore[arg-type]
    if known is None or known[0] is not fn:
        known = _PLAIN[name] = (fn, not inspect.iscoroutinefunction(fn))  # type: ignore[index]
    return known[1]


def start_builtin(name: str, op_input: dict, directives: dict, ctx: OpContext) -> Any:
    """Call builtin `name`: its output, or for a builtin that waits, an awaitable of it."""
    fn = BUILTINS.get(name)
    if fn is None:
        raise OpError(f"op not found: txco://{name}")
    return fn(op_input, directives, ctx)


def _path(value: Any, what: str, op: str) -> tuple[str, ...]:
    if not isinstance(value, str) or not value.strip():
        raise OpError(f"txco://{op}: WITH {what} (a path string) is required")
    segs = _path_segments(value)
    if segs is None:
        raise OpError(f"txco://{op}: WITH {what} is not a valid path")
    return segs


@functools.lru_cache(maxsize=1024)
def _path_segments(value: str) -> tuple[str, ...] | None:
    """The segments of a WITH path string (`.a.b`, `@x` for `_txc.x`), None when one is
    empty. Cached: a rule's WITH paths are the same strings on every call."""
    text = value.strip()
    if text.startswith("@"):
        text = "_txc." + text[1:]
    elif text.startswith("."):
        text = text[1:]
    segs = split_path_string(text)
    if not segs or any(s == "" for s in segs):
        return None
    return segs


# ---------------------------------------------------------------- simple builtins

@builtin("noop")
def _noop(op_input: dict, directives: dict, ctx: OpContext) -> dict:
    return {}


@builtin("mock")
def _mock(op_input: dict, directives: dict, ctx: OpContext) -> dict:
    fixture = ctx.fixtures.get("mock-response.json")
    if fixture is None:
        raise OpError(f"txco://mock: no mock-response.json for {ctx.op_stack}/{ctx.scope}/{ctx.name}")
    return deep_copy(fixture)


@builtin("copy")
def _copy(op_input: dict, directives: dict, ctx: OpContext) -> dict:
    source = _path(directives.get("from"), "from", "copy")
    dest = _path(directives.get("to"), "to", "copy")
    value = read(op_input, source)
    if value is MISSING:
        value = None
    try:
        return write({}, dest, deep_copy(value))
    except PathError as exc:
        raise OpError(f"txco://copy: {exc}") from None


# ---------------------------------------------------------------- kv

def _kv(ctx: OpContext):
    if ctx.kv is None:
        raise OpError("txco://kv: no store is configured")
    return ctx.kv


def _ttl(directives: dict) -> int | None:
    ttl = directives.get("ttl")
    if ttl is None:
        return None
    try:
        value = parse_duration_ms(ttl)
    except ValueError:
        return None  # invalid consumed values are ignored
    return value or None


@builtin("kv/get")
def _kv_get(op_input: dict, d: dict, ctx: OpContext) -> dict:
    return _kv(ctx).get(d.get("key"), d.get("ns"))


@builtin("kv/set")
def _kv_set(op_input: dict, d: dict, ctx: OpContext) -> dict:
    return _kv(ctx).set(d.get("key"), d.get("value"), d.get("ns"), _ttl(d))


@builtin("kv/delete")
def _kv_delete(op_input: dict, d: dict, ctx: OpContext) -> dict:
    return _kv(ctx).delete(d.get("key"), d.get("ns"))


@builtin("kv/incr")
def _kv_incr(op_input: dict, d: dict, ctx: OpContext) -> dict:
    return _kv(ctx).incr(d.get("key"), d.get("by", 1), d.get("ns"))


@builtin("kv/cas")
def _kv_cas(op_input: dict, d: dict, ctx: OpContext) -> dict:
    return _kv(ctx).cas(d.get("key"), d.get("value"), d.get("expect_version"), d.get("ns"))


@builtin("kv/list")
def _kv_list(op_input: dict, d: dict, ctx: OpContext) -> dict:
    return _kv(ctx).list(d.get("prefix", ""), d.get("limit", 100), d.get("ns"))


# ---------------------------------------------------------------- hmac

_ALGS = {"sha256": hashlib.sha256, "sha1": hashlib.sha1, "sha512": hashlib.sha512}


def _hmac_digest(d: dict, op: str) -> tuple[bytes, str]:
    key = d.get("key")
    if key is None and d.get("key_env") is not None:
        env_name = d.get("key_env")
        if not isinstance(env_name, str) or not env_name.startswith("TXCL_SECRET_"):
            raise OpError(f"txco://{op}: key_env must name a variable starting with TXCL_SECRET_")
        key = os.environ.get(env_name)
        if key is None:
            raise OpError(f"txco://{op}: environment variable {env_name} is not set")
    if key is None:
        raise OpError(f"txco://{op}: WITH key or key_env is required")
    message = d.get("message")
    if message is None:
        raise OpError(f"txco://{op}: WITH message is required")
    alg = d.get("alg", "sha256")
    if alg not in _ALGS:
        alg = "sha256"
    encoding = d.get("encoding", "hex")
    if encoding not in ("hex", "base64", "base64url"):
        encoding = "hex"
    digest = hmac.new(text_form(key).encode("utf-8"), text_form(message).encode("utf-8"), _ALGS[alg]).digest()
    return digest, encoding


def _encode(digest: bytes, encoding: str) -> str:
    if encoding == "base64":
        return base64.b64encode(digest).decode("ascii")
    if encoding == "base64url":
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")
    return digest.hex()


def _name(d: dict, default: str) -> str:
    name = d.get("name", default)
    return name if isinstance(name, str) and name else default


@builtin("hmac-sign")
def _hmac_sign(op_input: dict, d: dict, ctx: OpContext) -> dict:
    digest, encoding = _hmac_digest(d, "hmac-sign")
    return {"_txc": {"computed": {_name(d, "hmac"): _encode(digest, encoding)}}}


@builtin("hmac-verify")
def _hmac_verify(op_input: dict, d: dict, ctx: OpContext) -> dict:
    digest, encoding = _hmac_digest(d, "hmac-verify")
    signature = d.get("signature")
    expected = _encode(digest, encoding)
    given = signature if isinstance(signature, str) else ""
    if encoding == "hex":
        given = given.lower()
    elif encoding == "base64url":
        given = given.rstrip("=")
    valid = hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace"))
    return {"_txc": {"computed": {_name(d, "hmac_valid"): valid}}}


# ---------------------------------------------------------------- web

def _status(value: Any, default: int = 200) -> int:
    if isinstance(value, bool):
        return default
    try:
        status = int(value)
    except (TypeError, ValueError):
        return default
    return status if 100 <= status <= 599 else default


def _headers(d: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    headers = d.get("headers")
    if isinstance(headers, dict):
        for name, value in headers.items():
            if isinstance(value, list):
                out[name.lower()] = [str(v) for v in value]
            elif value is not None:
                out[name.lower()] = [str(value)]
    return out


@builtin("web-render")
def _web_render(op_input: dict, d: dict, ctx: OpContext) -> dict:
    if isinstance(d.get("body_b64"), str):
        body = d["body_b64"]
    else:
        raw = d.get("body", "")
        body = base64.b64encode(text_form(raw if raw is not None else "").encode("utf-8")).decode("ascii")
    headers = _headers(d)
    content_type = d.get("content_type", "text/html; charset=utf-8")
    headers.setdefault("content-type", [str(content_type)])
    return {"_txc": {"web": {"res": {"status": _status(d.get("status")), "headers": headers, "body": body}},
                     "halt": True}}


@builtin("static")
def _static(op_input: dict, d: dict, ctx: OpContext) -> dict:
    req = ctx.web_req or {}
    if ctx.src != "http":
        return {}
    method = str(req.get("method", "")).upper()
    if method not in ("GET", "HEAD"):
        return {}
    url = req.get("url") if isinstance(req.get("url"), dict) else {}
    path = url.get("path", "/") if isinstance(url.get("path"), str) else "/"
    raw = str(url.get("full", ""))
    if "%2f" in raw.lower() or "%5c" in raw.lower():
        return {}
    prefix = d.get("prefix", "/")
    if not isinstance(prefix, str) or not prefix:
        prefix = "/"
    if not path.startswith(prefix):
        return {}
    rest = path[len(prefix):].strip("/")
    segments = [s for s in rest.split("/") if s]
    if any(s.startswith("_") or s.startswith(".") or s == ".." or "\\" in s for s in segments):
        return {}
    index = d.get("index", "index.html")
    if not isinstance(index, str) or "/" in index:
        index = "index.html"
    for root in _asset_roots(ctx):
        candidate = root.joinpath(*segments) if segments else root
        if candidate.is_dir():
            candidate = candidate / index
        try:
            resolved = candidate.resolve()
            resolved.relative_to(root.resolve())
        except (OSError, ValueError):
            continue
        if resolved.is_file() and not candidate.is_symlink():
            return _serve_file(resolved, req)
    return {}


def _asset_roots(ctx: OpContext) -> list[Path]:
    roots: list[Path] = []
    tree = ctx.tree
    assets = getattr(tree, "assets", {}) if tree is not None else {}
    if not is_system_stack(ctx.stack):
        for stack in lineage(ctx.stack):
            if stack in assets:
                roots.append(assets[stack])
    if ctx.workspace is not None and (ctx.workspace / "FILES").is_dir():
        roots.append(ctx.workspace / "FILES")
    return roots


def _serve_file(path: Path, req: dict) -> dict:
    data = path.read_bytes()
    etag = '"' + hashlib.sha256(data).hexdigest() + '"'
    ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
        ctype += "; charset=utf-8"
    headers = req.get("headers") if isinstance(req.get("headers"), dict) else {}
    inm = headers.get("if-none-match")
    inm_values = inm if isinstance(inm, list) else [inm] if isinstance(inm, str) else []
    matches = any(etag in [t.strip() for t in str(v).split(",")] or str(v).strip() == "*" for v in inm_values)
    res: dict[str, Any] = {"headers": {"etag": [etag], "content-type": [ctype]}}
    if matches:
        res["status"] = 304
        res["body"] = ""
    else:
        res["status"] = 200
        res["body"] = base64.b64encode(data).decode("ascii")
    return {"_txc": {"web": {"res": res}, "halt": True}}


@builtin("continuation-result")
def _continuation_result(op_input: dict, d: dict, ctx: OpContext) -> dict:
    if not is_system_stack(ctx.op_stack or ctx.stack):
        raise OpError("txco://continuation-result runs only in system stacks")
    raise OpError("txco://continuation-result: continuations are not available in this process")


# ---------------------------------------------------------------- schedule

@builtin("schedule")
def _schedule(op_input: dict, d: dict, ctx: OpContext) -> dict:
    """Schedule (or with `cancel = true`, cancel) a one-shot event for the `_scheduled` stack."""
    from txcl.scheduling import ScheduleError, check_key, parse_schedule_at, rfc3339

    store = getattr(ctx.kv, "store", None)
    if store is None or not hasattr(store, "schedule_event"):
        raise OpError("txco://schedule: no store is configured")
    try:
        key = check_key(d.get("idempotency_key"))
        if d.get("cancel") is True:
            status, event = store.cancel_event(key)
            return {"idempotency_key": key, "status": status,
                    "event_id": event.event_id if event is not None else None}
        at_ms = parse_schedule_at(d.get("schedule_at"))
    except ScheduleError as exc:
        raise OpError(f"txco://schedule: {exc}") from None
    payload = d.get("payload", {})
    if not isinstance(payload, dict):
        raise OpError("txco://schedule: payload must be a JSON object")
    from txcl.values.jsonio import dumps

    if len(dumps(payload).encode("utf-8")) > ctx.kv.payload_max:
        raise OpError(f"txco://schedule: payload is larger than --op-payload-max ({ctx.kv.payload_max} bytes)")
    result = store.schedule_event(key, at_ms, payload, origin_stack=ctx.envelope_stack or ctx.stack,
                                  origin_rid=ctx.rid)
    return {"idempotency_key": key, "status": result.status, "event_id": result.event.event_id,
            "schedule_at": rfc3339(result.event.schedule_at_ms)}
