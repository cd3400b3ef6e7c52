"""A throwaway PostgreSQL server for tests and benchmarks.

    server = TempPostgres.start()          # initdb into a temp dir, pg_ctl start on 127.0.0.1
    url = server.create_database("t1")     # postgresql://postgres@127.0.0.1:PORT/t1
    server.stop()                          # pg_ctl stop, the temp dir removed

The server binaries are found under ``/usr/lib/postgresql/<version>/bin`` (Debian's layout),
through ``pg_config --bindir``, or on ``PATH``; with ``install=True`` and no binaries, Debian's
``postgresql`` package is installed with apt-get (as root, or through sudo). PostgreSQL refuses
to run as root, so a root caller runs ``initdb`` and ``pg_ctl`` as the ``postgres`` user.

Also a command: ``python -m txcl.testing.postgres start|stop DIR`` (what ``.ci/run`` uses).
"""

from __future__ import annotations

import argparse
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries could be found or installed."""


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (newest Debian version first)."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            out = ""
        if out and (Path(out) / "initdb").exists():
            return Path(out)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _version_key(path: str) -> float:
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


def install_server() -> None:
    """Install Debian's PostgreSQL server package (root or sudo)."""
    apt = shutil.which("apt-get")
    if apt is None:
        raise PostgresUnavailable("no PostgreSQL server binaries found and no apt-get to install them")
    sudo: list[str] = []
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            raise PostgresUnavailable("no PostgreSQL server binaries found; install the postgresql package")
        sudo = ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, apt, "update", "-qq"], check=False, env=env, capture_output=True)
    done = subprocess.run([*sudo, apt, "install", "-y", "-qq", "postgresql"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise PostgresUnavailable(f"apt-get install postgresql failed: {done.stderr.strip()[-400:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class TempPostgres:
    """A running server in its own data directory (see the module docstring)."""

    bindir: Path
    root: Path
    port: int
    user: str | None  # the OS user the server runs as when we are root

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(cls, root: str | Path | None = None, *, install: bool = True, durable: bool = False,
              port: int | None = None) -> "TempPostgres":
        """initdb + start. ``durable=False`` turns fsync off (tests); benchmarks pass True so
        commits cost what they cost in production (``synchronous_commit = on`` either way)."""
        bindir = find_bindir()
        if bindir is None and install:
            install_server()
            bindir = find_bindir()
        if bindir is None:
            raise PostgresUnavailable("no PostgreSQL server binaries found (initdb, pg_ctl)")
        base = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="txcl-pg-"))
        base.mkdir(parents=True, exist_ok=True)
        user = None
        if os.geteuid() == 0:
            user = "postgres"
            try:
                entry = pwd.getpwnam(user)
            except KeyError as exc:
                raise PostgresUnavailable("running as root and there is no 'postgres' user to run the server") from exc
            os.chmod(base, 0o755)
            os.chown(base, entry.pw_uid, entry.pw_gid)
        server = cls(bindir, base, port or _free_port(), user)
        server._initdb()
        server._configure(durable)
        server._pg_ctl("start", "-w", "-t", "60", "-l", str(base / "server.log"))
        return server

    def _run(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess:
        kwargs: dict = {"capture_output": True, "text": True}
        if self.user is not None:
            kwargs["user"] = self.user
        done = subprocess.run(args, cwd=str(self.root), **kwargs)
        if check and done.returncode != 0:
            log = ""
            log_file = self.root / "server.log"
            if log_file.exists():
                log = log_file.read_text(errors="replace")[-800:]
            raise PostgresUnavailable(f"{Path(args[0]).name} failed: {done.stderr.strip() or done.stdout.strip()}"
                                      f"{chr(10) + log if log else ''}")
        return done

    def _initdb(self) -> None:
        self._run([str(self.bindir / "initdb"), "-D", str(self.datadir), "-A", "trust", "-U", "postgres",
                   "-E", "UTF8", "--no-sync", "--no-instructions"])

    def _configure(self, durable: bool) -> None:
        lines = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.root}'",
            "max_connections = 200",
            "synchronous_commit = on",
            f"fsync = {'on' if durable else 'off'}",
            f"full_page_writes = {'on' if durable else 'off'}",
            "shared_buffers = 64MB",
            "log_min_messages = warning",
        ]
        with open(self.datadir / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# txcl.testing.postgres\n" + "\n".join(lines) + "\n")

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess:
        return self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), *args])

    def stop(self, *, remove: bool = True) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "stop", "-m", "fast", "-w"], check=False)
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)

    def pause(self) -> None:
        """Stop the server but keep its data (a database outage)."""
        self._pg_ctl("stop", "-m", "fast", "-w")

    def resume(self) -> None:
        """Start a paused server again on the same port."""
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.root / "server.log"))

    # ------------------------------------------------------------------ databases
    def psql(self, sql: str, database: str = "postgres") -> str:
        done = self._run([str(self.bindir / "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
                          "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database, "-c", sql])
        return done.stdout.strip()

    def create_database(self, name: str) -> str:
        """A fresh, empty database; returns its URL."""
        create_database(self.url, name)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        drop_database(self.url, name)


def database_url(server_url: str, name: str) -> str:
    """The URL of database `name` on the server of `server_url`."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def create_database(server_url: str, name: str) -> None:
    """(Re)create an empty database `name` on the server of `server_url`."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(server_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wait_ready(url: str, timeout: float = 30.0) -> None:
    import psycopg

    end = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m txcl.testing.postgres",
                                     description="Start or stop a throwaway PostgreSQL server.")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="initdb into DIR and start; prints the server URL")
    start.add_argument("dir")
    start.add_argument("--durable", action="store_true", help="keep fsync on (benchmarks)")
    stop = sub.add_parser("stop", help="stop the server in DIR and remove DIR")
    stop.add_argument("dir")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            server = TempPostgres.start(args.dir, durable=args.durable)
            print(server.url)
            return 0
        bindir = find_bindir()
        if bindir is None:
            return 0
        datadir = Path(args.dir) / "data"
        if datadir.exists():
            kwargs: dict = {"capture_output": True}
            if os.geteuid() == 0:
                kwargs["user"] = "postgres"
            subprocess.run([str(bindir / "pg_ctl"), "-D", str(datadir), "stop", "-m", "fast", "-w"], **kwargs)
        shutil.rmtree(args.dir, ignore_errors=True)
        return 0
    except PostgresUnavailable as exc:
        print(f"txcl.testing.postgres: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
