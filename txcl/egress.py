"""The egress policy: which addresses an op, an async dispatch or a cancel call may reach.

Every outgoing HTTP connection txcl opens for a rule (http(s) ops, `mcp+` ops, async worker
dispatches, cancel calls) goes through :class:`EgressPolicy`. The policy is applied to the
address actually connected to: the host name is resolved once, each resolved address is
checked, and the connection is made to a permitted address itself, so a name that resolves
differently a moment later (DNS rebinding) cannot slip past. Redirects are checked the same
way, since every hop opens its own connection.

The rules, in order:

1. a host or address on the deny list is refused;
2. a host or address on the allow list is permitted;
3. link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254, …)
   are refused;
4. private (10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10) and loopback (127/8, ::1)
   addresses are refused when the setting says so (they are permitted by default, so a worker
   on the same machine or network works out of the box);
5. anything else is permitted.

An IPv4-mapped IPv6 address (``::ffff:169.254.169.254``) is judged as the IPv4 address it
carries; decimal, octal and short IPv4 spellings (``2852039166``, ``0251.0376.0251.0376``) are
read as the system resolver reads them, so they are judged by the address they name.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import socket
from typing import Any, Iterable

import attrs
import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Link-local and the metadata services of the clouds: refused unless allowed by name.
METADATA_NETWORKS: tuple[IPNetwork, ...] = tuple(ipaddress.ip_network(n) for n in (
    "169.254.0.0/16",      # IPv4 link-local; AWS, GCP, Azure, OpenStack metadata at .169.254
    "fe80::/10",           # IPv6 link-local
    "fd00:ec2::254/128",   # AWS metadata over IPv6
    "100.100.100.200/32",  # Alibaba Cloud metadata
    "0.0.0.0/8",           # "this network": connects to the local host on many systems
    "::/128",
))
PRIVATE_NETWORKS: tuple[IPNetwork, ...] = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7",
))
LOOPBACK_NETWORKS: tuple[IPNetwork, ...] = tuple(ipaddress.ip_network(n) for n in ("127.0.0.0/8", "::1/128"))

MODES = ("allow", "deny")


class EgressDenied(Exception):
    """A connection the policy refuses; the message names the host, the address and the reason."""

    def __init__(self, host: str, address: str | None, reason: str) -> None:
        self.host, self.address, self.reason = host, address, reason
        where = host if address is None or address == host else f"{host} ({address})"
        super().__init__(f"egress to {where} refused: {reason}")


def normalise_address(address: IPAddress) -> IPAddress:
    """An IPv4-mapped (or IPv4-compatible 6to4-free) IPv6 address as the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def literal_address(host: str) -> IPAddress | None:
    """The address a host name spells directly, if it is one: dotted, bracketed IPv6, or the
    decimal/octal/hex forms the C resolver also accepts (``inet_aton``)."""
    text = host.strip("[]")
    try:
        return normalise_address(ipaddress.ip_address(text.split("%", 1)[0]))
    except ValueError:
        pass
    if text and all(c in "0123456789abcdefxABCDEFX." for c in text) and any(c.isdigit() for c in text[:1]):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


@attrs.frozen
class _Entry:
    """One allow or deny entry: a host pattern (``*.example.com``, ``api.example.com``) or a
    network (``10.0.0.0/8``, ``192.0.2.7``)."""

    text: str
    network: IPNetwork | None
    pattern: str | None

    @classmethod
    def parse(cls, text: str) -> "_Entry":
        raw = text.strip()
        if not raw:
            raise ValueError("an empty entry")
        try:
            return cls(raw, ipaddress.ip_network(raw.strip("[]"), strict=False), None)
        except ValueError:
            pass
        pattern = raw.lower().rstrip(".")
        if any(c in pattern for c in "/ :@") or not pattern:
            raise ValueError(f"{raw!r} is neither a host pattern nor a network")
        return cls(raw, None, pattern)

    def matches_host(self, host: str) -> bool:
        return self.pattern is not None and fnmatch.fnmatchcase(host, self.pattern)

    def matches_address(self, address: IPAddress) -> bool:
        return self.network is not None and address.version == self.network.version and address in self.network


def _entries(items: Iterable[str], what: str) -> tuple[_Entry, ...]:
    out = []
    for item in items:
        try:
            out.append(_Entry.parse(item))
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
    return tuple(out)


@attrs.frozen
class EgressPolicy:
    allow: tuple[_Entry, ...] = ()
    deny: tuple[_Entry, ...] = ()
    private: str = "allow"  # allow | deny
    loopback: str = "allow"  # allow | deny

    @classmethod
    def build(cls, allow: Iterable[str] = (), deny: Iterable[str] = (), private: str = "allow",
              loopback: str = "allow") -> "EgressPolicy":
        """A policy from its settings; ValueError naming the bad entry."""
        for name, mode in (("private", private), ("loopback", loopback)):
            if mode not in MODES:
                raise ValueError(f"egress {name} must be allow or deny, not {mode!r}")
        return cls(_entries(allow, "egress allow"), _entries(deny, "egress deny"), private, loopback)

    @classmethod
    def from_settings(cls, settings: Any) -> "EgressPolicy":
        return cls.build(getattr(settings, "egress_allow", ()), getattr(settings, "egress_deny", ()),
                         getattr(settings, "egress_private", "allow"), getattr(settings, "egress_loopback", "allow"))

    # ------------------------------------------------------------------ decisions
    def host_verdict(self, host: str) -> str | None:
        """What the host name alone decides: "deny: reason", "allow", or None (ask the address)."""
        name = host.lower().rstrip(".")
        if any(e.matches_host(name) for e in self.deny):
            return "deny: the host is on the egress deny list"
        if any(e.matches_host(name) for e in self.allow):
            return "allow"
        return None

    def address_refusal(self, address: IPAddress) -> str | None:
        """Why an address is refused (None: permitted); the host-name lists are applied first."""
        address = normalise_address(address)
        if any(e.matches_address(address) for e in self.deny):
            return "the address is on the egress deny list"
        if any(e.matches_address(address) for e in self.allow):
            return None
        if any(address in n for n in METADATA_NETWORKS if n.version == address.version):
            return "link-local and cloud metadata addresses are refused"
        if self.loopback == "deny" and (address.is_loopback or any(
                address in n for n in LOOPBACK_NETWORKS if n.version == address.version)):
            return "loopback addresses are refused (egress loopback = deny)"
        if self.private == "deny" and any(address in n for n in PRIVATE_NETWORKS if n.version == address.version):
            return "private addresses are refused (egress private = deny)"
        return None

    def literal_refusal(self, host: str) -> str | None:
        """Why a URL's host is refused without resolving it (a literal address, or a name on
        the deny list); None when only resolving can tell. `txcl check` uses this."""
        verdict = self.host_verdict(host)
        if verdict == "allow":
            return None
        if verdict is not None:
            return verdict.removeprefix("deny: ")
        address = literal_address(host)
        return self.address_refusal(address) if address is not None else None

    async def permitted_addresses(self, host: str, port: int) -> list[str]:
        """The addresses of `host` a connection may use, in the resolver's order; raises
        :class:`EgressDenied` when there is none."""
        verdict = self.host_verdict(host)
        if verdict is not None and verdict != "allow":
            raise EgressDenied(host, None, verdict.removeprefix("deny: "))
        literal = literal_address(host)
        if literal is not None:
            found = [literal]
        else:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise OSError(f"cannot resolve {host}: {exc.strerror or exc}") from None
            found = []
            for info in infos:
                try:
                    address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
                except ValueError:
                    continue
                if address not in found:
                    found.append(address)
        if verdict == "allow":
            return [str(a) for a in found]
        permitted, first_refusal = [], None
        for address in found:
            refusal = self.address_refusal(address)
            if refusal is None:
                permitted.append(str(normalise_address(address)))
            elif first_refusal is None:
                first_refusal = (str(address), refusal)
        if not permitted:
            address, reason = first_refusal or (None, "the host has no address")
            raise EgressDenied(host, address, reason)
        return permitted


DEFAULT_POLICY = EgressPolicy()


# ---------------------------------------------------------------------- connecting through it

class EgressBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the policy in front of every TCP connection: TLS still
    verifies the certificate against the URL's host name (httpcore passes it separately)."""

    def __init__(self, policy: EgressPolicy, inner: httpcore.AsyncNetworkBackend) -> None:
        self.policy = policy
        self.inner = inner

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await self.policy.permitted_addresses(host, port)
        except EgressDenied:
            raise
        except OSError as exc:  # the name does not resolve: httpx reports it as a connect error
            raise httpcore.ConnectError(str(exc)) from None
        last: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                                    socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return await self.inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def guarded_transport(policy: EgressPolicy, **kwargs: Any) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose connections go through `policy` (kwargs as for
    `httpx.AsyncHTTPTransport`)."""
    transport = httpx.AsyncHTTPTransport(**kwargs)
    pool = transport._pool  # httpx keeps its httpcore pool here; the egress tests fail if that changes
    pool._network_backend = EgressBackend(policy, pool._network_backend)
    return transport


def guarded_client(policy: EgressPolicy, *, limits: httpx.Limits | None = None, **kwargs: Any) -> httpx.AsyncClient:
    """An httpx client whose every connection (each redirect hop included) obeys `policy`. The
    environment's proxies are not used: the policy must see the address actually reached."""
    transport = guarded_transport(policy, limits=limits or httpx.Limits(max_connections=100, max_keepalive_connections=20))
    return httpx.AsyncClient(transport=transport, trust_env=False, **kwargs)


def denial_in(exc: BaseException) -> EgressDenied | None:
    """The EgressDenied behind an exception httpx raised, if any (httpx passes foreign
    exceptions from the network backend through unchanged, but may wrap them)."""
    pending, seen = [exc], 0
    while pending and seen < 32:
        current = pending.pop()
        seen += 1
        if current is None:
            continue
        if isinstance(current, EgressDenied):
            return current
        if isinstance(current, BaseExceptionGroup):  # task groups (the MCP SDK's) gather their errors
            pending.extend(current.exceptions)
        pending.append(current.__cause__ or current.__context__)
    return None


__all__ = ["EgressPolicy", "EgressDenied", "EgressBackend", "DEFAULT_POLICY", "guarded_transport", "guarded_client",
           "denial_in", "literal_address", "normalise_address", "METADATA_NETWORKS", "PRIVATE_NETWORKS",
           "LOOPBACK_NETWORKS"]
