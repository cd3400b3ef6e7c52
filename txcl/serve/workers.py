"""`txcl serve --workers N`: N processes serving one port.

The parent binds the address, then forks the worker processes and supervises them; it serves
nothing itself and opens no store. Each worker has its own event loop, store connections,
sweeper, cron ticker and scheduled-events poller — coordinated through the store exactly as
several nodes are (claims, fenced writes), so nothing runs N times over.

Where the system has SO_REUSEPORT (Linux, the BSDs, macOS) every worker listens on its own
socket bound to the same port and the kernel spreads new connections across them; elsewhere
the workers share the parent's listening socket. The LMTP socket, when there is one, is
shared.

A worker that dies is started again (its claims are taken over as a stopped node's are); a
worker that fails at start-up (exit status 2: a bad tree, an unreachable database) stops the
whole server with that status. SIGTERM or SIGINT to the parent is passed on to every worker,
which drains as a single server does; the parent waits for them.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from typing import Callable

log = logging.getLogger("txcl.serve")

STARTUP_FAILURE = 2  # a worker's exit status for a problem it found at start-up
RAPID_S = 2.0  # a worker that dies sooner than this after its start died "rapidly"
MAX_RAPID = 5  # this many rapid deaths in a row: stop restarting


def resolve_workers(value: str | int) -> int:
    """`auto` is the number of cores this process may use."""
    if value == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            return max(1, os.cpu_count() or 1)
    return int(value)


def reuse_port_available() -> bool:
    return hasattr(socket, "SO_REUSEPORT") and sys.platform != "win32"


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound with SO_REUSEPORT that does not listen: it holds the port (and resolves
    port 0) while the workers bind their own listening sockets to it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def worker_socket(host: str, port: int) -> socket.socket:
    """A worker's own socket on the reserved port."""
    sock = reserve_port(host, port)
    sock.set_inheritable(True)
    return sock


def _die_with_parent() -> None:
    """Ask Linux to send this worker SIGTERM when the supervising parent dies (no orphans)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Supervisor:
    """Forks `count` workers, each running `serve(index)` (which returns an exit status)."""

    def __init__(self, count: int, serve: Callable[[int], int], grace_s: float) -> None:
        self.count = count
        self.serve = serve
        self.grace_s = grace_s
        self.children: dict[int, tuple[int, float]] = {}  # pid -> (index, started at)
        self.stopping = False
        self.status = 0

    def _start(self, index: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 70
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _die_with_parent()
                code = self.serve(index)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            except BaseException:  # noqa: BLE001 - reported, then the worker's status says it
                log.exception("txcl: worker process %d failed", index)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        self.children[pid] = (index, time.monotonic())
        log.info("txcl: worker process %d started (pid %d)", index, pid)

    def _stop_all(self, sig: int = signal.SIGTERM) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def _on_signal(self, signum: int, frame: object) -> None:
        if not self.stopping:
            self.stopping = True
            log.info("txcl: stopping %d worker process%s", len(self.children), "" if self.count == 1 else "es")
        self._stop_all()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        for index in range(1, self.count + 1):
            self._start(index)
        rapid = 0
        deadline: float | None = None
        while self.children:
            if self.stopping and deadline is None:
                deadline = time.monotonic() + self.grace_s + 5
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if deadline is not None and time.monotonic() > deadline:
                    log.warning("txcl: worker processes still running after the grace period; killing them")
                    self._stop_all(signal.SIGKILL)
                    deadline = time.monotonic() + 5
                time.sleep(0.05)
                continue
            index, started = self.children.pop(pid)
            code = os.waitstatus_to_exitcode(wait_status)
            if self.stopping:
                continue
            if code == STARTUP_FAILURE:
                log.error("txcl: worker process %d could not start; stopping", index)
                self.status = STARTUP_FAILURE
                self.stopping = True
                self._stop_all()
                continue
            rapid = rapid + 1 if time.monotonic() - started < RAPID_S else 0
            if rapid >= MAX_RAPID:
                log.error("txcl: worker processes keep failing (%d in a row); stopping", rapid)
                self.status = 1
                self.stopping = True
                self._stop_all()
                continue
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            log.warning("txcl: worker process %d (pid %d) %s; starting another", index, pid, how)
            self._start(index)
        return self.status


__all__ = ["Supervisor", "resolve_workers", "reuse_port_available", "reserve_port", "worker_socket"]
