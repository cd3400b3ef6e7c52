"""Who may see the dashboard.

- `--ui` without `--admin-token`: clients on a loopback address only (anyone else gets 403);
- with `--admin-token T`: any client that sends `Authorization: Bearer T`, or that logged in
  through the form (which sets a session cookie: HttpOnly, SameSite=Strict, scoped to the
  dashboard's path). Everything else gets 401 and sees nothing but the form.

Tokens are compared in constant time; the cookie holds an HMAC of the token, never the token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from txcl.ids import admin_token_matches as token_matches

COOKIE = "txcl_ui"
PREFIX = "/_txc/ui"


def session_value(token: str) -> str:
    """The cookie value of a logged-in browser (changes when the token changes)."""
    return hmac.new(token.encode("utf-8"), b"txcl-dashboard-session", hashlib.sha256).hexdigest()


def is_loopback_client(scope: dict) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        return ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return client[0] in ("localhost", "testclient")


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _cookie(scope: dict, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    for part in raw.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def host_name(scope: dict) -> str:
    """The host name the client asked for (the Host header without its port), lower-case."""
    host = (_header(scope, b"host") or "").strip().lower()
    if host.startswith("["):  # an IPv6 literal: [::1]:8080
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def host_allowed(scope: dict, allowed: tuple[str, ...] = ()) -> bool:
    """Whether the Host header names this server: a loopback name, the address it is bound
    to, or a host the operator allowed. A page whose name an attacker controls (DNS
    rebinding: evil.example resolving to 127.0.0.1) is refused, so it never becomes
    same-origin with the dashboard."""
    name = host_name(scope)
    if not name:
        return False
    server = scope.get("server")
    bound = str(server[0]).lower() if server else ""
    return name in LOOPBACK_NAMES or name == bound or name in {a.lower() for a in allowed}


def decide(scope: dict, token: str | None) -> str:
    """"ok", "login" (a token is set and this client has not shown it) or "loopback-only"."""
    if token is None:
        return "ok" if is_loopback_client(scope) else "loopback-only"
    auth = _header(scope, b"authorization") or ""
    if auth[:7].lower() == "bearer " and token_matches(auth[7:].strip(), token):
        return "ok"
    if token_matches(_cookie(scope, COOKIE), session_value(token)):
        return "ok"
    return "login"


def cookie_header(token: str, secure: bool) -> str:
    flags = f"; Path={PREFIX}; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
    return f"{COOKIE}={session_value(token)}{flags}"


def logout_cookie_header() -> str:
    return f"{COOKIE}=; Path={PREFIX}; HttpOnly; SameSite=Strict; Max-Age=0"


__all__ = ["host_allowed", "host_name", "decide", "session_value", "token_matches", "cookie_header", "logout_cookie_header", "COOKIE", "PREFIX",
           "is_loopback_client"]
