"""Which stack a recipient's mail goes to, first match wins:

1. an exact override (`recipients = {"vip@acme.example" = "exec_inbox"}` in `[lmtp]`);
2. a domain override (`"@partner.example" = "partners"`);
3. for a host of `--lmtp-default-hosts`: `<stack>[+tag]@host` goes to `<stack>` when the OPS
   tree has that stack; any other recipient of the host goes to `_mail` when it exists;
4. nothing: the recipient is refused (550 5.1.1) before the message is sent.

Addresses compare without regard to case. The `+tag` (RFC 5233 subaddress) is ignored for
routing; rules read it from `@lmtp.rcpt`.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

import attrs

MAIL_STACK = "_mail"
_STACK_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@attrs.frozen
class Route:
    stack: str
    via: str  # recipient | domain | default-host | catch-all


@attrs.frozen
class MailRouter:
    overrides: dict[str, str]  # lower-cased address or "@domain" -> stack
    default_hosts: frozenset[str]
    has_stack: Callable[[str], bool]

    @classmethod
    def build(cls, overrides: Iterable[tuple[str, str]], default_hosts: Iterable[str],
              has_stack: Callable[[str], bool]) -> "MailRouter":
        return cls({a.lower(): s for a, s in overrides}, frozenset(h.lower().strip(".") for h in default_hosts),
                   has_stack)

    def route(self, address: str) -> Route | None:
        text = address.strip().strip("<>").lower()
        local, at, host = text.rpartition("@")
        if not at or not local or not host:
            return None
        if text in self.overrides:
            return Route(self.overrides[text], "recipient")
        if "@" + host in self.overrides:
            return Route(self.overrides["@" + host], "domain")
        if host.strip(".") in self.default_hosts:
            stack = local.split("+", 1)[0]
            if _STACK_NAME.match(stack) and self.has_stack(stack):
                return Route(stack, "default-host")
            if self.has_stack(MAIL_STACK):
                return Route(MAIL_STACK, "catch-all")
        return None


__all__ = ["MailRouter", "Route", "MAIL_STACK"]
