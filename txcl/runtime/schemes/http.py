"""`http://` and `https://` sync ops through httpx."""

from __future__ import annotations

from typing import Any

import httpx

from txcl import __version__
from txcl import otel as _otel
from txcl.egress import DEFAULT_POLICY, EgressDenied, EgressPolicy, guarded_client
from txcl.runtime.dispatch import OpContext, OpError
from txcl.runtime_codes import EGRESS_DENIED, egress_denied_message
from txcl.secrets import Resolved, SecretError, SecretProvider, mask, mask_text, refs_from_directives, resolve
from txcl.values.jsonio import JsonError, dumps_utf8, loads
from txcl.values.paths import MISSING, PathError, read, split_path_string, write
from txcl.values.utf8 import decode_lossy

BODY_METHODS = {"POST", "PUT", "PATCH"}
ALLOWED_METHODS = {"GET", "HEAD", "DELETE", "POST", "PUT", "PATCH", "OPTIONS"}


def new_client(policy: EgressPolicy = DEFAULT_POLICY) -> httpx.AsyncClient:
    """One client per interpreter: no redirects, TLS verified, pooled connections, every
    connection through the egress policy."""
    return guarded_client(policy, follow_redirects=False, timeout=None,
                          limits=httpx.Limits(max_connections=200, max_keepalive_connections=50))


def egress_op_error(denial: EgressDenied, ctx: OpContext) -> OpError:
    """The op error of a refused connection: it names the code, the rule and the address."""
    return OpError(egress_denied_message(f"{ctx.stack}/{ctx.name}", denial), code=EGRESS_DENIED.code)


def _path_directive(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, str) or not value.strip():
        return None
    segs = split_path_string(value.strip())
    if not segs or any(s == "" for s in segs):
        return None
    return segs


def resolve_secrets(d: dict, provider: SecretProvider | None) -> Resolved | None:
    """The secret values an op's WITH names (None: it names none); OpError naming a missing
    or unusable secret, never its value."""
    if "secrets" not in d:
        return None
    refs, problems = refs_from_directives(d)
    if problems:
        raise OpError(problems[0])
    try:
        return resolve(refs, provider or SecretProvider())
    except SecretError as exc:
        raise OpError(str(exc)) from None


def _overlay(body: Any, path: tuple[str, ...], value: str) -> Any:
    """`body` with `value` written at `path` (a copy: the op's input view is never changed)."""
    if not isinstance(body, dict):
        body = {}
    out = dict(body)
    if len(path) == 1:
        out[path[0]] = value
    else:
        out[path[0]] = _overlay(out.get(path[0]), path[1:], value)
    return out


async def call_http(client: httpx.AsyncClient, target_url: str, op_input: dict, d: dict, ctx: OpContext,
                    payload_max: int, timeout_s: float, secrets: SecretProvider | None = None) -> Any:
    """Send the op input; return the raw answer (object, text or {}) with status_into applied
    by the caller after `into`. Raises OpError on transport errors, caps and non-2xx. Secrets
    the WITH clause names go into this request only, and are masked out of the answer."""
    spliced = resolve_secrets(d, secrets)
    try:
        raw, status, status_into = await _exchange(client, target_url, op_input, d, ctx, payload_max, timeout_s,
                                                   spliced)
    except OpError as exc:
        if spliced is not None:
            exc.message = mask_text(exc.message, spliced.values)
            exc.args = (exc.message,)
        raise
    if spliced is not None:
        raw = mask(raw, spliced.values)
    return raw, status, status_into


async def _exchange(client: httpx.AsyncClient, target_url: str, op_input: dict, d: dict, ctx: OpContext,
                    payload_max: int, timeout_s: float, spliced: Resolved | None) -> Any:
    url = d.get("url") if isinstance(d.get("url"), str) else target_url
    if not url.lower().startswith(("http://", "https://")):
        url = target_url
    method = d.get("method", "POST")
    method = method.upper() if isinstance(method, str) and method.upper() in ALLOWED_METHODS else "POST"
    headers = {"User-Agent": f"txcl/{__version__}", "X-Request-ID": ctx.rid}
    extra = d.get("headers")
    if isinstance(extra, dict):
        for name, value in extra.items():
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                headers[str(name)] = str(value)
    if spliced is not None:
        headers.update(spliced.headers)
    if _otel.current.enabled:  # W3C traceparent/tracestate of the current span
        _otel.current.inject(headers)
    content: bytes | None = None
    if method in BODY_METHODS:
        body_obj: Any = op_input
        urlencoded = d.get("body_encoding") == "urlencoded"
        if urlencoded:
            body_path = _path_directive(d.get("body_path"))
            if body_path is not None:
                found = read(op_input, body_path)
                body_obj = found if found is not MISSING else {}
        if spliced is not None:  # into the body sent, never into the op's input view
            for path, value in spliced.body:
                body_obj = _overlay(body_obj, path, value)
        if urlencoded:
            form = body_obj if isinstance(body_obj, dict) else {}
            from urllib.parse import urlencode

            from txcl.values.coerce import text_form

            content = urlencode([(k, text_form(v)) for k, v in form.items()]).encode("utf-8")
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        else:
            content = dumps_utf8(body_obj)
            headers.setdefault("Content-Type", "application/json")
        if len(content) > payload_max:
            raise OpError(f"http {url}: request body of {len(content)} bytes exceeds --op-payload-max ({payload_max})")
    try:
        request = client.build_request(method, url, content=content, headers=headers,
                                       timeout=httpx.Timeout(timeout_s))
        response = await client.send(request, stream=True)
    except EgressDenied as exc:
        raise egress_op_error(exc, ctx) from None
    except httpx.TimeoutException:
        raise OpError(f"http {url}: timed out", status="timeout") from None
    except (httpx.HTTPError, ValueError) as exc:
        raise OpError(f"http {url}: {type(exc).__name__}: {exc}") from None
    try:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > payload_max:
                raise OpError(f"http {url}: answer larger than --op-payload-max ({payload_max} bytes)")
            chunks.append(chunk)
    except httpx.TimeoutException:
        raise OpError(f"http {url}: timed out", status="timeout") from None
    except httpx.HTTPError as exc:
        raise OpError(f"http {url}: {type(exc).__name__}: {exc}") from None
    finally:
        await response.aclose()
    status = response.status_code
    status_into = _path_directive(d.get("status_into"))
    if not 200 <= status < 300 and status_into is None:
        raise OpError(f"http {url}: status {status}")
    raw = b"".join(chunks)
    return _body_value(raw, status), status, status_into


def _body_value(raw: bytes, status: int) -> Any:
    if status == 204 or not raw.strip():
        return {}
    text = decode_lossy(raw)
    try:
        return loads(text)
    except (JsonError, ValueError):
        return text


def apply_status_into(output: Any, status_into: tuple[str, ...] | None, status: int) -> Any:
    """Write the status at `status_into` (after `into`); a non-object output is left alone."""
    if status_into is None or not isinstance(output, dict):
        return output
    try:
        return write(output, status_into, status)
    except PathError:
        return output
