"""TX241 egress-refused-target: an EXEC target the configured egress policy refuses;
TX242 secret-not-found: a secret the configured provider does not have. Both depend on the
configuration (and TX242 on the environment), so they are computed from cached facts."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from txcl.errors import Diagnostic


def target_host(target: str) -> str | None:
    """The host an http(s) or mcp+http(s) EXEC target connects to (None: another scheme)."""
    text = target[len("mcp+"):] if target.lower().startswith("mcp+") else target
    if not text.lower().startswith(("http://", "https://")):
        return None
    try:
        host = urlsplit(text).hostname
    except ValueError:
        return None
    return host or None


def egress_findings(facts: Any, policy: Any, file: str, source: str | None) -> list[Diagnostic]:
    """TX241 for one file. It depends on `[egress]` of the configuration, so it is computed
    from the cached facts, not cached itself. Only what the text decides is reported: a
    literal address or a denied host name (a name's addresses are known only at run time)."""
    from txcl.check.facts import span_of
    from txcl.egress import DEFAULT_POLICY

    if not facts or not isinstance(facts.get("exec"), str) or not facts.get("exec_span"):
        return []
    host = target_host(facts["exec"])
    if host is None:
        return []
    reason = (policy or DEFAULT_POLICY).literal_refusal(host)
    if reason is None:
        return []
    return [Diagnostic("TX241", f"the egress policy refuses {host}: {reason}", file=file,
                       span=span_of(facts["exec_span"]), source=source,
                       hint="call a host the policy permits, or add it to allow in [egress] of txcl.toml")]


def secret_findings(facts: Any, provider: Any, file: str, source: str | None) -> list[Diagnostic]:
    """TX242 for one file: each named secret the provider `txcl serve` would use does not have
    (the environment of this `txcl check`, or the secrets directory). A secret marked
    `.optional = true` is reported too: the rule then runs without it."""
    from txcl.check.facts import span_of
    from txcl.secrets import SecretProvider

    if not facts or not facts.get("secrets"):
        return []
    provider = provider or SecretProvider()
    out = []
    for name, span in facts["secrets"]:
        if not provider.has(name):
            out.append(Diagnostic("TX242", f"secret {name} is not set: txcl would look for {provider.describe(name)}",
                                  file=file, span=span_of(span), source=source,
                                  hint=("set it in the environment of txcl serve (txcl check looks in its own)"
                                        if provider.kind == "env" else "add the file, or correct the name")))
    return out


__all__ = ["egress_findings", "secret_findings", "target_host"]
