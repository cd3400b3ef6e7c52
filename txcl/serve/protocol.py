"""The HTTP protocol txcl serve runs on (uvicorn's httptools or h11 implementation) with a
deadline for a request's headers.

uvicorn times out an idle kept-alive connection, but a connection that never finishes its
headers — opened and left, or fed a byte now and then (slowloris) — stays open for ever, and
enough of them exhaust the process's file descriptors. Here every connection must deliver a
request's complete headers within `--web-header-timeout` of its first byte (or of opening);
one that does not is closed. Together with `--web-max-connections` (uvicorn's concurrency
limit: past it new connections are answered 503) the descriptors a server can be made to hold
are bounded.
"""

from __future__ import annotations

import asyncio
from typing import Any


def with_header_timeout(base: type, timeout_s: float) -> type:
    """A subclass of uvicorn protocol `base` that closes a connection whose request headers do
    not arrive within `timeout_s`."""

    class HeaderDeadline(base):  # type: ignore[misc, valid-type]
        _txcl_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._txcl_arm()

        def data_received(self, data: bytes) -> None:
            if self._txcl_timer is None and not self._txcl_in_request():
                self._txcl_arm()  # the first bytes of the next request on a kept-alive connection
            super().data_received(data)
            if self._txcl_in_request():
                self._txcl_cancel()  # its headers are complete

        def connection_lost(self, exc: Exception | None) -> None:
            self._txcl_cancel()
            super().connection_lost(exc)

        def _txcl_in_request(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is not None and not cycle.response_complete

        def _txcl_arm(self) -> None:
            self._txcl_cancel()
            self._txcl_timer = self.loop.call_later(timeout_s, self._txcl_expired)

        def _txcl_cancel(self) -> None:
            if self._txcl_timer is not None:
                self._txcl_timer.cancel()
                self._txcl_timer = None

        def _txcl_expired(self) -> None:
            self._txcl_timer = None
            if not self._txcl_in_request() and not self.transport.is_closing():
                self.transport.close()

    HeaderDeadline.__name__ = HeaderDeadline.__qualname__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline


def protocol_class(http: str, timeout_s: float) -> type:
    """uvicorn's protocol for `http` ("httptools" when installed, else "h11"), with the deadline."""
    if http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    else:
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    return with_header_timeout(base, timeout_s)


__all__ = ["with_header_timeout", "protocol_class"]
