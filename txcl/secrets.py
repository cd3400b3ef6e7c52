"""Secrets: credentials a rule names, spliced into the outgoing request only.

A rule names a secret in its WITH clause; the value is looked up when the request is sent and
placed in that request — a header, or a field of the JSON body — and nowhere else:

    EXEC "https://api.stripe.com/v1/charges"
      WITH secrets.headers.authorization.secret = "STRIPE_KEY",
           secrets.headers.authorization.format = "Bearer {}"

The op's input view, the envelope, traces, run records, continuations and logs only ever see
the *name*. The names are read from the rule's text: a secret name computed from the envelope
is refused when the tree loads (TX114), so a request can never choose which secret is used.

Providers (the `secrets_provider` setting):

- ``env`` (default): the value of the environment variable ``TXCL_SECRET_<NAME>``;
- ``dir``: the file ``<secrets_dir>/<NAME>`` (``/run/secrets`` by default, the layout Docker
  and Kubernetes mount secrets in), one trailing newline removed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

import attrs

from txcl.logs import never_log

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
ENV_PREFIX = "TXCL_SECRET_"
PROVIDERS = ("env", "dir")
PLACES = ("headers", "body")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
MAX_VALUE_BYTES = 64 * 1024
MASK = "[secret]"


class SecretError(Exception):
    """A secret cannot be used; the message names the secret, never its value."""


@attrs.frozen
class SecretRef:
    """One `secrets.<place>.<path>.secret = "NAME"` of a rule."""

    place: str  # headers | body
    path: tuple[str, ...]  # the header name (one segment), or the body path
    name: str
    format: str | None = None  # with one "{}" the value fills
    optional: bool = False

    @property
    def where(self) -> str:
        return f"secrets.{self.place}.{'.'.join(self.path)}"


def refs_from_pairs(pairs: Iterable[tuple[tuple[str, ...], Any, bool]]) -> tuple[tuple[SecretRef, ...], list[str]]:
    """The secret references among a rule's WITH pairs, given as (key segments, literal value,
    is literal); and the problems, each a complete sentence. Used by the load check (TX114)
    and by the runtime, which reads only what this accepts."""
    fields: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    problems: list[str] = []
    for key, value, literal in pairs:
        if not key or key[0] != "secrets":
            continue
        shown = ".".join(key)
        if len(key) < 2 or key[1] not in PLACES:  # not a reference txcl splices (an op may read its own)
            if key[-1] == "secret" and not literal:
                problems.append(f"WITH {shown} must be a literal: a secret reference is never computed from the "
                                "envelope")
            continue
        if len(key) < 4 or key[-1] not in ("secret", "format", "optional"):
            problems.append(f"WITH {shown}: write secrets.headers.<header>.secret or secrets.body.<path>.secret "
                            "(with .format and .optional beside it)")
            continue
        place, path, field = key[1], tuple(key[2:-1]), key[-1]
        if place == "headers" and (len(path) != 1 or not _HEADER_NAME.match(path[0])):
            problems.append(f"WITH {shown}: secrets.headers.<header> names one header")
            continue
        if not literal:
            problems.append(f"WITH {shown} must be a literal: a secret reference is never computed from the envelope")
            continue
        if field == "secret" and not (isinstance(value, str) and NAME.match(value)):
            problems.append(f"WITH {shown}: a secret name is letters, digits, '_', '.' and '-' (got {value!r})")
            continue
        if field == "format" and not (isinstance(value, str) and value.count("{}") == 1):
            problems.append(f'WITH {shown}: the format holds exactly one "{{}}" for the value')
            continue
        if field == "optional" and not isinstance(value, bool):
            problems.append(f"WITH {shown} is true or false")
            continue
        fields.setdefault((place, path), {})[field] = value
    refs = []
    for (place, path), given in fields.items():
        if "secret" not in given:
            problems.append(f"WITH secrets.{place}.{'.'.join(path)} has no .secret naming the secret")
            continue
        refs.append(SecretRef(place, path, given["secret"], given.get("format"), bool(given.get("optional", False))))
    return tuple(refs), problems


def refs_from_directives(directives: Any) -> tuple[tuple[SecretRef, ...], list[str]]:
    """The references of an op's evaluated WITH (`{"secrets": {"headers": {…}}}`). The load
    check has made sure they were literals in the rule's text."""
    tree = directives.get("secrets") if isinstance(directives, dict) else None
    if tree is None:
        return (), []
    pairs: list[tuple[tuple[str, ...], Any, bool]] = []

    def walk(node: Any, key: tuple[str, ...]) -> None:
        if isinstance(node, dict) and len(key) < 64:
            for name, child in node.items():
                walk(child, key + (str(name),))
        else:
            pairs.append((key, node, True))

    walk(tree, ("secrets",))
    return refs_from_pairs(pairs)


# ---------------------------------------------------------------------- providers

@attrs.frozen
class SecretProvider:
    kind: str = "env"  # env | dir
    directory: str = "/run/secrets"

    @classmethod
    def from_settings(cls, settings: Any) -> "SecretProvider":
        return cls(getattr(settings, "secrets_provider", "env"), getattr(settings, "secrets_dir", "/run/secrets"))

    def describe(self, name: str) -> str:
        """Where the provider looks for `name` (for messages; never the value)."""
        if self.kind == "dir":
            return f"the file {Path(self.directory) / name}"
        return f"the environment variable {ENV_PREFIX}{name}"

    def lookup(self, name: str) -> str | None:
        """The value of `name`, or None when the provider does not have it."""
        if not NAME.match(name):
            return None
        if self.kind == "dir":
            path = Path(self.directory) / name
            try:
                if path.stat().st_size > MAX_VALUE_BYTES:
                    raise SecretError(f"secret {name}: {path} is larger than {MAX_VALUE_BYTES} bytes")
                data = path.read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                raise SecretError(f"secret {name}: cannot read {path}: {exc.strerror or type(exc).__name__}") from None
            text = data.decode("utf-8", "replace")
            return text[:-1] if text.endswith("\n") else text
        return os.environ.get(ENV_PREFIX + name)

    def has(self, name: str) -> bool:
        try:
            return self.lookup(name) is not None
        except SecretError:
            return False


@attrs.frozen
class Resolved:
    """The values of one call's references: header values, body overlays, and what to mask."""

    headers: dict[str, str]
    body: tuple[tuple[tuple[str, ...], str], ...]
    values: tuple[str, ...]  # every value used (masked out of the op's answer and of errors)


def resolve(refs: Iterable[SecretRef], provider: SecretProvider) -> Resolved:
    """Look every reference up; SecretError naming the first missing secret (an optional one
    that is missing is left out)."""
    headers: dict[str, str] = {}
    body: list[tuple[tuple[str, ...], str]] = []
    values: list[str] = []
    for ref in refs:
        value = provider.lookup(ref.name)
        if value is None:
            if ref.optional:
                continue
            raise SecretError(f"secret {ref.name} (WITH {ref.where}) is not set: txcl looked for "
                              f"{provider.describe(ref.name)}")
        text = ref.format.replace("{}", value, 1) if ref.format else value
        if ref.place == "headers":
            if any(c in text for c in "\r\n\0"):
                raise SecretError(f"secret {ref.name} (WITH {ref.where}) holds a line break or NUL, which a "
                                  "header cannot carry")
            headers[ref.path[0]] = text
        else:
            body.append((ref.path, text))
        values.append(value)
    used = tuple(v for v in values if v)
    never_log(used)
    return Resolved(headers, tuple(body), used)


def mask(value: Any, secrets: tuple[str, ...], depth: int = 0) -> Any:
    """`value` with every occurrence of a secret's text replaced by ``[secret]`` (an answer
    that echoes a request's headers must not carry the credential into the envelope)."""
    if not secrets or depth > 256:
        return value
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {mask(k, secrets, depth + 1): mask(v, secrets, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v, secrets, depth + 1) for v in value]
    return value


def mask_text(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text


__all__ = ["SecretRef", "SecretProvider", "SecretError", "Resolved", "refs_from_pairs", "refs_from_directives",
           "resolve", "mask",
           "mask_text", "PROVIDERS", "ENV_PREFIX", "MASK"]
