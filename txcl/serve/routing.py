"""Routing of web requests to stacks, first match wins:

1. `POST /_txc/continuations/op/<opc>/complete` → the callback endpoint (no rules run)
2. `GET|HEAD /_txc/healthz` → `_sys/health`
3. any request with the query parameter `_txc.continuation` → `_sys/continuation`
4. any other path under `/_txc/` → `_sys/notfound`
5. the `routes` table, in configuration order
6. `default_stack`, else the only stack of the tree that is neither a system nor an inlet stack (`_cron`, `_scheduled`, `_mail`)
7. `_sys/notfound`
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import attrs

from txcl.runtime.config import ConfigError
from txcl.ops.layout import is_inlet_stack

HEALTH, NOTFOUND, CONTINUATION = "_sys/health", "_sys/notfound", "_sys/continuation"
CALLBACK_RE = re.compile(r"^/_txc/continuations/op/([^/]+)/complete$")
_ROUTE_KEYS = {"stack", "host", "path", "methods"}


@attrs.frozen
class Route:
    """One `[[serve.routes]]` entry."""

    stack: str
    host: str | None = None  # lower-case; "*.suffix" matches any sub-domain of suffix
    path: str = "/"
    methods: frozenset[str] | None = None

    def matches(self, method: str, hostname: str, path: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        if self.host is not None:
            if self.host.startswith("*."):
                if not hostname.endswith(self.host[1:]) or len(hostname) <= len(self.host) - 1:
                    return False
            elif hostname != self.host:
                return False
        return path_has_prefix(path, self.path)


@attrs.frozen
class Decision:
    """Where a request goes: `kind` is "callback" (with `opc`) or "stack"."""

    kind: str
    stack: str | None = None
    opc: str | None = None


def path_has_prefix(path: str, prefix: str) -> bool:
    """Prefix match on whole segments: "/v1" matches "/v1", "/v1/" and "/v1/x", not "/v10"."""
    if prefix == "/" or prefix == "":
        return True
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def hostname_of(host: str) -> str:
    """Lower-case host without the port (IPv6 literals keep their brackets' content)."""
    from txcl.serve.inlet import split_host

    return split_host(host)[0].lower().rstrip(".")


def parse_routes(raw: Any, source: str = "configuration") -> list[Route]:
    """Validate the raw `routes` table; ConfigError naming the entry and `source`."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"invalid setting routes ({source}): must be an array of tables")
    routes: list[Route] = []
    for index, entry in enumerate(raw, start=1):
        where = f"routes entry {index} ({source})"
        if not isinstance(entry, dict):
            raise ConfigError(f"invalid {where}: must be a table")
        unknown = sorted(set(entry) - _ROUTE_KEYS)
        if unknown:
            raise ConfigError(f"invalid {where}: unknown key {unknown[0]!r} (keys: host, path, methods, stack)")
        stack = entry.get("stack")
        if not isinstance(stack, str) or not stack.strip("/"):
            raise ConfigError(f"invalid {where}: 'stack' is required and must be a stack name")
        host = entry.get("host")
        if host is not None and (not isinstance(host, str) or not host or host == "*."):
            raise ConfigError(f"invalid {where}: 'host' must be a host name or '*.suffix'")
        path = entry.get("path", "/")
        if not isinstance(path, str) or not path.startswith("/"):
            raise ConfigError(f"invalid {where}: 'path' must start with '/'")
        methods = entry.get("methods")
        if methods is not None:
            if (not isinstance(methods, list) or not methods
                    or not all(isinstance(m, str) and m.strip() for m in methods)):
                raise ConfigError(f"invalid {where}: 'methods' must be a non-empty array of method names")
            methods = frozenset(m.strip().upper() for m in methods)
        routes.append(Route(stack.strip("/"), hostname_of(host) if host and not host.startswith("*.")
                            else (host.lower() if host else None), path, methods))
    return routes


class Router:
    """Decides the stack of each request; `check(tree)` validates stack names at startup."""

    def __init__(self, routes: Iterable[Route] = (), default_stack: str | None = None,
                 fallback_stack: str | None = None):
        self.routes = tuple(routes)
        self.default_stack = default_stack
        self.fallback_stack = fallback_stack  # the single user stack, when there is one

    @classmethod
    def for_tree(cls, tree: Any, routes: Iterable[Route] = (), default_stack: str | None = None) -> "Router":
        """Build and validate against `tree`: routes and default naming unknown stacks fail."""
        router = cls(routes, default_stack)
        router.check(tree)
        users = [s for s in tree.user_stacks() if not is_inlet_stack(s)]
        router.fallback_stack = users[0] if default_stack is None and len(users) == 1 else None
        return router

    def check(self, tree: Any) -> None:
        problems: list[str] = []
        for index, route in enumerate(self.routes, start=1):
            if not tree.has_stack(route.stack):
                problems.append(f'routes entry {index} names unknown stack "{route.stack}"')
        if self.default_stack is not None and not tree.has_stack(self.default_stack):
            problems.append(f'default-stack names unknown stack "{self.default_stack}"')
        if problems:
            known = ", ".join(tree.user_stacks()) or "none"
            raise ConfigError("; ".join(problems) + f" (stacks: {known})")

    def resolve(self, method: str, host: str, path: str, has_continuation: bool) -> Decision:
        if path.startswith("/_txc/") or path == "/_txc":
            m = CALLBACK_RE.match(path)
            if m is not None:
                return Decision("callback", opc=m.group(1)) if method == "POST" else Decision("post-only")
            if path == "/_txc/healthz" and method in ("GET", "HEAD"):
                return Decision("stack", HEALTH)
            if has_continuation:
                return Decision("stack", CONTINUATION)
            return Decision("stack", NOTFOUND)
        if has_continuation:
            return Decision("stack", CONTINUATION)
        if self.routes:
            hostname = hostname_of(host)
            for route in self.routes:
                if route.matches(method, hostname, path):
                    return Decision("stack", route.stack)
        if self.default_stack is not None:
            return Decision("stack", self.default_stack)
        if self.fallback_stack is not None:
            return Decision("stack", self.fallback_stack)
        return Decision("stack", NOTFOUND)
