"""The worker contract's dispatch side (CONTINUATIONS.md §3.1–§3.2).

`post_dispatch` sends one interaction: always POST, JSON body `{"input": …, "_txc": {…}}`
with the callback URL, expiry, ids and (for itemized ops) the item index and count; headers
carry the single-use token (`X-Txco-Continuation-Token`) and `Idempotency-Key: <opc>`. The
worker must answer exactly 202 within the ack timeout; anything else is a failed ack whose
message follows §3.2. The token is never logged and never put in an error message.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import attrs
import httpx

from txcl.store.continuations_base import Dispatch

try:
    from importlib.metadata import version as _pkg_version

    _VERSION = _pkg_version("txcl")
except Exception:  # noqa: BLE001 - running from a source tree
    _VERSION = "0"

USER_AGENT = f"txcl/{_VERSION}"


@attrs.frozen
class AckResult:
    opc: str
    ok: bool
    ack: Any = None  # the ack body ({"job_id": …} or {})
    error: str | None = None

    @property
    def job_id(self) -> Any:
        return self.ack.get("job_id") if isinstance(self.ack, dict) else None


def iso_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    moment = _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def callback_url(base: str | None, opc: str) -> str | None:
    if not base:
        return None
    return base.rstrip("/") + f"/_txc/continuations/op/{opc}/complete"


def worker_url(dispatch: Dispatch) -> str:
    directives = dispatch.directives if isinstance(dispatch.directives, dict) else {}
    url = directives.get("url")
    if isinstance(url, str) and url.strip():
        return url.strip()
    return dispatch.exec_target or ""


def dispatch_body(dispatch: Dispatch, base_url: str | None) -> dict:
    """The JSON body of §3.1 (the identity stamp is not added to `input`)."""
    stack = (dispatch.stage or "").rsplit("/", 1)[0] if dispatch.stage else dispatch.op_stack
    txc: dict[str, Any] = {
        "op_continuation_id": dispatch.opc,
        "callback_url": callback_url(base_url, dispatch.opc),
        "expires_at": iso_ms(dispatch.deadline_ms),
        "run_id": dispatch.run_id,
        "stack": stack,
        "stage": dispatch.stage,
        "op": f"{dispatch.op_stack}/{dispatch.op_name}" if dispatch.op_stack else dispatch.op_name,
    }
    if dispatch.kind == "itemized":
        txc["item_index"] = dispatch.item_index
        txc["item_count"] = dispatch.item_count
    return {"input": dispatch.input, "_txc": txc}


def dispatch_headers(dispatch: Dispatch, origin_rid: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, "Idempotency-Key": dispatch.opc}
    if origin_rid:
        headers["X-Request-ID"] = origin_rid
    directives = dispatch.directives if isinstance(dispatch.directives, dict) else {}
    extra = directives.get("headers")
    if isinstance(extra, dict):
        for name, value in extra.items():
            if isinstance(name, str) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                if name.lower() not in ("x-txco-continuation-token", "idempotency-key", "content-type"):
                    headers[name] = str(value)
    if dispatch.token:
        headers["X-Txco-Continuation-Token"] = dispatch.token
    return headers


async def post_dispatch(client: httpx.AsyncClient, dispatch: Dispatch, *, base_url: str | None,
                        ack_timeout_ms: int, origin_rid: str | None = None) -> AckResult:
    """POST one interaction and wait for the 202 (never raises for worker problems)."""
    from txcl.values.jsonio import dumps, loads

    url = worker_url(dispatch)
    body = dumps(dispatch_body(dispatch, base_url)).encode("utf-8")
    seconds = ack_timeout_ms / 1000.0
    try:
        response = await client.post(url, content=body, headers=dispatch_headers(dispatch, origin_rid),
                                     timeout=httpx.Timeout(seconds))
    except httpx.TimeoutException:
        return AckResult(dispatch.opc, False, error=f"async worker {url}: no answer within {_fmt(ack_timeout_ms)}")
    except (httpx.HTTPError, OSError, ValueError) as exc:
        reason = str(exc) or type(exc).__name__
        return AckResult(dispatch.opc, False, error=f"async worker {url}: {reason}")
    if response.status_code != 202:
        return AckResult(dispatch.opc, False, error=f"async worker {url}: expected 202, got {response.status_code}")
    ack: Any = {}
    if response.content:
        try:
            parsed = loads(response.text)
            if isinstance(parsed, dict) and "job_id" in parsed:
                ack = {"job_id": parsed["job_id"]}
        except Exception:  # noqa: BLE001 - an unreadable ack body is ignored
            ack = {}
    return AckResult(dispatch.opc, True, ack=ack)


def _fmt(ms: int) -> str:
    if ms % 1000 == 0 and ms >= 1000:
        return f"{ms // 1000}s"
    return f"{ms}ms"
