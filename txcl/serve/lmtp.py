"""The LMTP inlet (RFC 2033): `txcl serve --lmtp unix:/path/lmtp.sock` (or `host:port`) accepts
mail from a co-located MTA such as Postfix, which keeps TLS, SPF/DKIM/DMARC, queueing, retries
and bounces; txcl is the final destination behind it.

A session, in order:

- RCPT TO: the recipient is routed (txcl.mail.routing); one that routes nowhere is refused
  with 550 5.1.1 before any message is sent, and more than `--lmtp-max-recipients` get 452;
- DATA: a message larger than `--lmtp-max-msg-bytes` gets 552 5.3.4 for every recipient;
  otherwise it is parsed once and the recipients routed to the same stack share one envelope
  (`_txc.src = "lmtp"`, `@lmtp.*`), walked like any request (its own request id and trace);
- the reply: one line per recipient in RCPT order, from `@lmtp.res` (txcl.mail.verdict).
  A walk that fails, or outlasts `--lmtp-resp-timeout`, answers 451 4.3.0 (the MTA tries
  again). A walk that suspends (an async op, a deferred join, an itemized await) answers 250
  unless a verdict was written before it suspended, and goes on as a durable run whose result
  is recorded (`txcl runs`).

Each (message, recipient) is remembered in the store: a delivery the MTA repeats — the same
Message-ID (or, without one, the same bytes) to the same recipient, after a 4xx or a lost
connection — gets the recorded verdict and is not walked again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from txcl.ids import new_request_id
from txcl.mail.envelope import mail_envelope
from txcl.mail.message import message_key, parse_message
from txcl.mail.routing import MailRouter
from txcl.mail.verdict import reply, verdicts

log = logging.getLogger("txcl.serve")

KEEP_DELIVERIES_MS = 7 * 86_400_000  # longer than an MTA keeps retrying (Postfix: 5 days)
_TOO_MUCH = "552 Error: Too much mail data"
_TOO_LONG = "500 Line too long"


def _delivery_key(message: str, recipient: str) -> str:
    return hashlib.sha256(f"{message}\n{recipient.lower()}".encode("utf-8", "surrogateescape")).hexdigest()


class MailHandler:
    """The aiosmtpd handler: routing at RCPT, the walks at DATA."""

    def __init__(self, state: Any, service: Any, listener: str) -> None:
        self.state = state
        self.service = service
        self.listener = listener
        settings = state.settings
        self.max_recipients = settings.lmtp_max_recipients
        self.resp_timeout_s = settings.lmtp_resp_timeout / 1000
        self.data_timeout_s = settings.lmtp_data_timeout / 1000
        self.max_bytes = settings.lmtp_max_msg_bytes
        self._overrides = settings.lmtp_recipients
        self._hosts = settings.lmtp_default_hosts
        self._purged_at = 0.0

    def router(self) -> MailRouter:
        tree = self.state.tree  # (a --watch reload may change the stacks: built per use)
        return MailRouter.build(self._overrides, self._hosts, tree.has_stack)

    async def _store(self, fn: Any, *args: Any) -> Any:
        if self.service is not None:
            return await self.service.call(fn, *args)
        return await asyncio.to_thread(fn, *args)

    # ------------------------------------------------------------------ aiosmtpd hooks
    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:
        if len(envelope.rcpt_tos) >= self.max_recipients:
            return "452 4.5.3 too many recipients"
        route = self.router().route(address)
        if route is None:
            return f"550 5.1.1 <{address}>: no stack takes mail for this recipient"
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        routes = getattr(envelope, "stack_routes", None)
        if routes is None:
            routes = envelope.stack_routes = []
        routes.append(route.stack)
        return "250 2.1.5 ok"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        server.data_is_in()
        raw = bytes(envelope.original_content or b"")
        recipients = list(envelope.rcpt_tos)
        stacks = list(getattr(envelope, "stack_routes", []))
        try:
            lines = await self.deliver(raw, envelope.mail_from or "", recipients, stacks,
                                       client_ip=_peer_ip(session.peer), helo=session.host_name or "")
        except Exception as exc:  # noqa: BLE001 - the MTA tries again; nothing is lost
            log.warning("txcl: LMTP delivery failed: %s: %s", type(exc).__name__, exc)
            lines = [reply(451, "temporary failure; try again")] * len(recipients)
        return "\r\n".join(lines)

    # ------------------------------------------------------------------ one delivery
    async def deliver(self, raw: bytes, mail_from: str, recipients: list[str], stacks: list[str], *,
                      client_ip: str = "", helo: str = "") -> list[str]:
        """The reply lines of a delivery, one per recipient in RCPT order."""
        msg = parse_message(raw)
        key_of = message_key(raw, msg.get("id"))
        keys = [_delivery_key(key_of, r) for r in recipients]
        rid = new_request_id()
        store = self.state.store
        known = await self._store(store.begin_deliveries, keys, rid, int(self.resp_timeout_s * 1000) + 60_000)
        lines: list[str | None] = [None] * len(recipients)
        groups: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            state, code, text = known[key]
            if state == "done":
                lines[i] = reply(int(code), text or "")  # repeated delivery: the same verdict
            elif state == "busy":
                lines[i] = reply(451, "this message is being delivered now; try again")
            else:
                groups.setdefault(stacks[i], []).append(i)
        walked = await asyncio.gather(*(
            self._walk_group(stack, idx, msg, raw, mail_from, recipients, client_ip, helo, rid if n == 0 else None)
            for n, (stack, idx) in enumerate(groups.items())))
        finished: list[tuple[str, int, str]] = []
        for (_, idx), group_verdicts in zip(groups.items(), walked):
            for i, (code, text) in zip(idx, group_verdicts):
                lines[i] = reply(code, text)
                finished.append((keys[i], code, lines[i][4:]))
        if finished:
            await self._store(store.finish_deliveries, finished, rid)
        await self._purge()
        return [line or reply(451, "try again") for line in lines]

    async def _walk_group(self, stack: str, idx: list[int], msg: dict, raw: bytes, mail_from: str,
                          recipients: list[str], client_ip: str, helo: str,
                          rid: str | None) -> list[tuple[int, str]]:
        from txcl.runtime.interpreter import Completed, Suspended

        envelope = mail_envelope(msg=msg, mail_from=mail_from, size=len(raw), rcpt=[recipients[i] for i in idx],
                                 transaction_rcpt=recipients, listener=self.listener, client_ip=client_ip, helo=helo)
        try:
            outcome = await asyncio.wait_for(
                self.state.interp.run(envelope, stack, src="lmtp", rid=rid or new_request_id()),
                self.resp_timeout_s)
        except asyncio.TimeoutError:
            log.warning("txcl: LMTP delivery to %s took longer than --lmtp-resp-timeout; answered 451", stack)
            return [(451, "the delivery took too long; try again")] * len(idx)
        if isinstance(outcome, Completed):
            return verdicts(_res(outcome.envelope), len(idx))
        if isinstance(outcome, Suspended):
            res = await self._suspended_res(outcome.run_id)
            if res is None:
                return [(250, f"accepted; continues as run {outcome.run_id}")] * len(idx)
            return verdicts(res, len(idx))
        log.warning("txcl: LMTP delivery to %s failed: %s", stack, getattr(outcome, "error", outcome))
        return [(451, "the delivery failed; try again")] * len(idx)

    async def _suspended_res(self, run_id: str) -> Any:
        """The verdict written before the run suspended (None: none was)."""
        suspends = await self._store(self.state.store.list_suspends, run_id)
        if not suspends:
            return None
        return _res(suspends[-1].envelope)

    async def _purge(self) -> None:
        if time.monotonic() - self._purged_at < 3600:
            return
        self._purged_at = time.monotonic()
        now = await self._store(self.state.store.backend.now_ms)
        await self._store(self.state.store.purge_deliveries, now - KEEP_DELIVERIES_MS)


def _res(envelope: Any) -> Any:
    txc = envelope.get("_txc") if isinstance(envelope, dict) else None
    lmtp = txc.get("lmtp") if isinstance(txc, dict) else None
    return lmtp.get("res") if isinstance(lmtp, dict) else None


def _peer_ip(peer: Any) -> str:
    if isinstance(peer, (tuple, list)) and peer:
        return str(peer[0])
    return ""


def _protocol_class() -> type:
    from aiosmtpd.lmtp import LMTP

    class TxclLMTP(LMTP):
        """aiosmtpd's LMTP with one reply per recipient where aiosmtpd sends one for the
        whole message (too large, a line too long), and a deadline on the DATA phase."""

        data_timeout_s: float = 60.0
        _data_timer: Any = None

        async def push(self, status: Any) -> None:
            if isinstance(status, str) and (status.startswith(_TOO_MUCH) or status.startswith(_TOO_LONG)) \
                    and self.envelope is not None and self.envelope.rcpt_tos:
                line = (reply(552, "5.3.4 message too large") if status.startswith(_TOO_MUCH)
                        else reply(500, "5.5.2 line too long"))
                status = "\r\n".join([line] * len(self.envelope.rcpt_tos))
            await super().push(status)

        async def smtp_DATA(self, arg: str) -> None:
            self._data_timer = self.loop.call_later(self.data_timeout_s, self._data_too_slow)
            try:
                await super().smtp_DATA(arg)
            finally:
                self.data_is_in()

        def data_is_in(self) -> None:
            """The message is in (or the DATA phase ended): its deadline is over."""
            if self._data_timer is not None:
                self._data_timer.cancel()
                self._data_timer = None

        def _data_too_slow(self) -> None:
            self._data_timer = None
            if self.transport is not None:
                self.transport.write(b"421 4.4.2 the message data took too long\r\n")
                self.transport.close()

    return TxclLMTP


def bind_lmtp(address: str, socket_mode: str = "0660") -> socket.socket:
    """The listening socket of `address` (`unix:/path`, `host:port`, `:port` — all interfaces),
    bound now so that a bad address stops `txcl serve` before it starts."""
    if address.startswith("unix:"):
        path = Path(address[5:])
        if path.is_socket():
            path.unlink()  # left by a server that stopped without cleaning up
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            os.chmod(path, int(socket_mode, 8))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        return sock
    host, _, port = address.rpartition(":")
    infos = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, where = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class LmtpServer:
    """The LMTP inlet of `txcl serve`: serves the bound socket on the server's event loop."""

    def __init__(self, state: Any, service: Any = None, sock: socket.socket | None = None) -> None:
        self.state = state
        settings = state.settings
        self.sock = sock if sock is not None else bind_lmtp(settings.lmtp, settings.lmtp_socket_mode)
        self.socket_path = Path(settings.lmtp[5:]) if settings.lmtp.startswith("unix:") else None
        self.handler = MailHandler(state, service, self.bound())
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        settings = self.state.settings
        protocol = _protocol_class()
        protocol.data_timeout_s = settings.lmtp_data_timeout / 1000
        hostname = settings.lmtp_hostname or socket.getfqdn()
        loop = asyncio.get_running_loop()

        def factory() -> Any:
            return protocol(self.handler, hostname=hostname, data_size_limit=settings.lmtp_max_msg_bytes,
                            enable_SMTPUTF8=True, timeout=settings.lmtp_read_timeout / 1000, loop=loop)

        if self.socket_path is not None:
            self.server = await loop.create_unix_server(factory, sock=self.sock)
        else:
            self.server = await loop.create_server(factory, sock=self.sock)
        log.info("txcl: accepting mail over LMTP on %s", self.bound())

    def bound(self) -> str:
        if self.socket_path is not None:
            return f"unix:{self.socket_path}"
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        else:
            self.sock.close()
        if self.socket_path is not None and not self.state.lmtp_shared:
            try:
                self.socket_path.unlink()
            except FileNotFoundError:
                pass


__all__ = ["LmtpServer", "MailHandler", "bind_lmtp"]
