"""A throwaway NATS server with JetStream for tests and benchmarks (Debian's ``nats-server``,
installed with apt-get when missing and the caller is root).

    server = TempNats.start()      # nats-server -js on 127.0.0.1, its store in a temp dir
    server.url                     # nats://127.0.0.1:PORT
    server.restart()               # stop and start again on the same port and store
    server.stop()                  # the temp dir removed
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class NatsUnavailable(RuntimeError):
    """No nats-server could be found or installed."""


def find_nats_server() -> str | None:
    found = shutil.which("nats-server")
    if found:
        return found
    return "/usr/sbin/nats-server" if os.access("/usr/sbin/nats-server", os.X_OK) else None


def install_nats_server() -> str:
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise NatsUnavailable("nats-server is not installed (Debian: apt-get install nats-server)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run([apt, "install", "-y", "-qq", "nats-server"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run([apt, "update", "-qq"], env=env, capture_output=True, check=False)
        done = subprocess.run([apt, "install", "-y", "-qq", "nats-server"], env=env, capture_output=True, text=True)
    found = find_nats_server()
    if found is None:
        raise NatsUnavailable(f"apt-get install nats-server failed: {done.stderr.strip()[-400:]}")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TempNats:
    def __init__(self, binary: str, root: Path, port: int) -> None:
        self.binary, self.root, self.port = binary, root, port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, *, install: bool = True) -> "TempNats":
        binary = find_nats_server() or (install_nats_server() if install else None)
        if binary is None:
            raise NatsUnavailable("nats-server is not installed")
        self = cls(binary, Path(tempfile.mkdtemp(prefix="txcl-nats-")), _free_port())
        self._run()
        return self

    def _run(self) -> None:
        log = open(self.root / "server.log", "ab")
        self.proc = subprocess.Popen([self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port),
                                      "-sd", str(self.root / "store")], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    raise NatsUnavailable("nats-server stopped at start:\n" + self.log)
                time.sleep(0.05)
        raise NatsUnavailable("nats-server did not listen in time:\n" + self.log)

    @property
    def log(self) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def halt(self) -> None:
        """Stop the server, keeping its store (for a restart)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def restart(self) -> None:
        self.halt()
        self._run()

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)


__all__ = ["TempNats", "NatsUnavailable", "find_nats_server"]
