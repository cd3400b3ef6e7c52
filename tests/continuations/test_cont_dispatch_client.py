"""The worker dispatch client (over worker_client.DispatchClient):
exact headers and body on the wire, keep-alive reuse, the answer framings a worker may use,
a stale idle connection, and the failed-ack messages (non-202, no answer in time, refused)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from txcl.continuations.worker_client import DispatchClient, post_dispatch
from txcl.store.records import Dispatch


def _dispatch(url: str, headers: dict | None = None) -> Dispatch:
    directives = {"url": url}
    if headers:
        directives["headers"] = headers
    return Dispatch(opc="opc_1", token="tok", run_id="run_1", unit_id="au_1", op_name="charge", op_stack="pay",
                    stage="pay/100", exec_target=url, directives=directives, item_index=3, item_count=9,
                    kind="itemized", input={"id": 3}, deadline_ms=1_800_000_000_000, attempts=1)


class _Server:
    """A raw TCP server on 127.0.0.1: each request is answered by `answer(request_bytes)`,
    which returns (bytes to send, close after sending)."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/work?x=1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                data, close = self.answer(head + body)
                writer.write(data)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def _run(coro):
    return asyncio.run(coro)


def test_dispatch_request_on_the_wire_and_keep_alive_reuse():
    async def main():
        srv = _Server(lambda req: (b'HTTP/1.1 202 Accepted\r\nContent-Length: 15\r\n\r\n{"job_id": "j"}', False))
        url = await srv.start()
        client = DispatchClient()
        acks = [await post_dispatch(client, _dispatch(url, {"X-Tenant": "t1"}), base_url="http://cb:1",
                                    ack_timeout_ms=5000, origin_rid="rid-9") for _ in range(3)]
        await client.aclose()
        await srv.stop()
        return srv, url, acks

    srv, url, acks = _run(main())
    assert [a.ok for a in acks] == [True, True, True] and acks[0].job_id == "j"
    assert srv.connections == 1  # one keep-alive connection for the three POSTs
    head, _, body = srv.requests[0].partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "POST /work?x=1 HTTP/1.1"
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert headers["host"] == url.split("/")[2]
    assert headers["content-type"] == "application/json" and headers["user-agent"].startswith("txcl/")
    assert headers["idempotency-key"] == "opc_1" and headers["x-txco-continuation-token"] == "tok"
    assert headers["x-request-id"] == "rid-9" and headers["x-tenant"] == "t1"
    assert int(headers["content-length"]) == len(body)
    sent = json.loads(body)
    assert sent["input"] == {"id": 3}
    assert sent["_txc"]["callback_url"] == "http://cb:1/_txc/continuations/op/opc_1/complete"
    assert sent["_txc"]["item_index"] == 3 and sent["_txc"]["item_count"] == 9


@pytest.mark.parametrize("answer,job", [
    (b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"jo\r\nb\r\nb_id\": \"c\"}\r\n0\r\n\r\n", "c"),
    (b"HTTP/1.0 202 Accepted\r\n\r\n{\"job_id\": \"eof\"}", "eof"),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", None),
    (b"HTTP/1.1 202 Accepted\r\nContent-Length: 9\r\n\r\nnot json!", None),
])
def test_answer_framings(answer, job):
    async def main():
        srv = _Server(lambda req: (answer, True))
        url = await srv.start()
        client = DispatchClient()
        ack = await post_dispatch(client, _dispatch(url), base_url=None, ack_timeout_ms=5000)
        await client.aclose()
        await srv.stop()
        return ack

    ack = _run(main())
    assert ack.ok and ack.job_id == job


def test_a_closed_idle_connection_is_replaced():
    async def main():
        srv = _Server(lambda req: (b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", True))  # closes after each
        url = await srv.start()
        client = DispatchClient()
        first = await post_dispatch(client, _dispatch(url), base_url=None, ack_timeout_ms=5000)
        second = await post_dispatch(client, _dispatch(url), base_url=None, ack_timeout_ms=5000)
        await client.aclose()
        await srv.stop()
        return srv, first, second

    srv, first, second = _run(main())
    assert first.ok and second.ok and srv.connections == 2


def test_failed_acks_name_the_reason():
    async def main():
        srv = _Server(lambda req: (b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", False))
        url = await srv.start()
        silent = await asyncio.start_server(lambda r, w: asyncio.sleep(30), "127.0.0.1", 0)
        silent_url = f"http://127.0.0.1:{silent.sockets[0].getsockname()[1]}/w"
        free = socket.socket()
        free.bind(("127.0.0.1", 0))
        refused_url = f"http://127.0.0.1:{free.getsockname()[1]}/w"
        free.close()
        client = DispatchClient()
        busy = await post_dispatch(client, _dispatch(url), base_url=None, ack_timeout_ms=5000)
        slow = await post_dispatch(client, _dispatch(silent_url), base_url=None, ack_timeout_ms=300)
        refused = await post_dispatch(client, _dispatch(refused_url), base_url=None, ack_timeout_ms=5000)
        bad = await post_dispatch(client, _dispatch(url, {"X-Evil": "a\r\nInjected: 1"}), base_url=None,
                                  ack_timeout_ms=5000)
        await client.aclose()
        silent.close()
        await srv.stop()
        return url, silent_url, refused_url, busy, slow, refused, bad, len(srv.requests)

    url, silent_url, refused_url, busy, slow, refused, bad, served = _run(main())
    assert not busy.ok and busy.error == f"async worker {url}: expected 202, got 503"
    assert not slow.ok and slow.error == f"async worker {silent_url}: no answer within 300ms"
    assert not refused.ok and refused.error.startswith(f"async worker {refused_url}: ")
    assert not bad.ok and "tok" not in bad.error  # the token never appears in an error
    assert served == 1  # the header injection never reached the wire


def test_only_plain_http_goes_over_the_lean_path():
    client = DispatchClient()
    assert client.lean_target("http://127.0.0.1:8080/a", {}) is not None
    assert client.lean_target("https://127.0.0.1/a", {}) is None
    assert client.lean_target("http://user:pw@127.0.0.1/a", {}) is None
    assert client.lean_target("http://127.0.0.1/a", {"Host": "other"}) is None


def test_an_answer_in_pieces_is_awaited_whole_and_a_non_http_answer_fails_the_ack():
    """The answer is parsed by h11 as bytes arrive: a 202 whose body comes later is read whole;
    bytes that are not HTTP fail the ack with a clear reason."""

    async def main():
        async def pieces(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            await reader.read(1)
            writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 18\r\n\r\n{\"job_")
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(b'id": "late"}')
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.close()

        async def not_http(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"SMTP ready\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.close()

        servers = [await asyncio.start_server(handler, "127.0.0.1", 0) for handler in (pieces, not_http)]
        urls = [f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/w" for srv in servers]
        client = DispatchClient()
        acks = [await post_dispatch(client, _dispatch(url), base_url=None, ack_timeout_ms=5000) for url in urls]
        await client.aclose()
        for srv in servers:
            srv.close()
        return urls, acks

    urls, (late, bad) = _run(main())
    assert late.ok and late.job_id == "late"
    assert not bad.ok and bad.error.startswith(f"async worker {urls[1]}: invalid HTTP response")