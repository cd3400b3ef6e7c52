"""Fixtures and helpers for continuation tests (import helpers from here, never from
`conftest`, whose module name is shared by every test folder): a workspace builder, a real
`txcl serve` subprocess on 127.0.0.1, the test worker, and in-process stores.

Every test that builds a workspace runs once per store backend: on SQLite the workspace's
database is its default file `<ws>/.txcl-data/txcl.db`; on PostgreSQL the workspace gets a fresh
database of the session's server, named in its `txcl.toml` (`[serve] db = …`), so `txcl
serve`, `txcl run`, `txcl runs` and `txcl complete` all find it as a user's would. `store_at`
and `db_of` map a workspace's default file to its database on either backend."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from contworker import TestWorker  # noqa: E402

TXCL = str(Path(sys.executable).parent / "txcl")
_counter = itertools.count()


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).strip("\n") + "\n", encoding="utf-8")
    return root


# the PostgreSQL database of each workspace built in this process, by its default SQLite path
_PG_DATABASES: dict[str, str] = {}


def _use_database(ws: Path, url: str) -> None:
    """Name `url` as the workspace's database in its txcl.toml (keeping what is there)."""
    config = ws / "txcl.toml"
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    line = f"db = {url!r}"
    if re.search(r"(?m)^db = ", text):
        text = re.sub(r"(?m)^db = .*$", line, text)
    elif "[serve]" in text:
        text = text.replace("[serve]", "[serve]\n" + line, 1)
    else:
        text = f"[serve]\n{line}\n\n" + text
    config.write_text(text, encoding="utf-8")
    _PG_DATABASES[str(ws / ".txcl-data" / "txcl.db")] = url


STRICT_EGRESS = '[egress]\nloopback = "deny"\nprivate = "deny"\nallow = ["127.0.0.1"]\n'


def _strict_egress(ws: Path) -> None:
    """Every served workspace refuses loopback and private addresses, and reaches the test
    workers on 127.0.0.1 through an explicit allow (unless the test wrote its own [egress])."""
    config = ws / "txcl.toml"
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    if "[egress]" not in text:
        config.write_text(text + ("\n" if text and not text.endswith("\n") else "") + STRICT_EGRESS,
                          encoding="utf-8")


def db_of(path: Path | str) -> str:
    """The database behind a workspace's default path (the path itself on SQLite)."""
    return _PG_DATABASES.get(str(path), str(path))


@pytest.fixture
def workspace(tmp_path: Path, backend: str, request) -> Callable[[dict[str, str]], Path]:
    def build(files: dict[str, str]) -> Path:
        ws = tmp_path / f"ws{next(_counter)}"
        ws.mkdir()
        write_tree(ws, files)
        _strict_egress(ws)
        if backend == "postgresql":
            _use_database(ws, request.getfixturevalue("new_pg_database")())
        return ws

    return build


@pytest.fixture
def reports():
    """An HTTP server on loopback that records what rules send it (`.received`, `.url`)."""
    from testtools import EchoServer

    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def worker():
    with TestWorker() as w:
        yield w


class ServeProcess:
    """`txcl serve` in a subprocess; `url` is its base URL once it listens."""

    def __init__(self, ws: Path, db: Path, flags: list[str], env: dict[str, str] | None = None):
        self.ws = ws
        self.db = db
        self.flags = flags
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.lines: list[str] = []

    def start(self, timeout: float = 20.0) -> "ServeProcess":
        cmd = [TXCL, "serve", str(self.ws), "--port", "0", "--db", db_of(self.db), *self.flags]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=self.env,
                                     text=True)
        found = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(timeout) or not self.url:
            self.stop()
            raise RuntimeError("txcl serve did not start:\n" + "".join(self.lines))
        return self

    def wait_dead(self, timeout: float = 20.0) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    @property
    def log(self) -> str:
        return "".join(self.lines)


FAST_FLAGS = ["--continuation-sweep-period", "0", "--async-ack-timeout", "2s", "--reconcile-after", "3s",
              "--poll-retry-after", "1s", "--continuation-longpoll-ms", "3000"]


@pytest.fixture
def serve(tmp_path: Path, new_pg_database):
    procs: list[ServeProcess] = []

    def start(ws: Path, *flags: str, db: Path | None = None, env: dict[str, str] | None = None,
              fast: bool = True) -> ServeProcess:
        proc = ServeProcess(ws, db or (ws / ".txcl-data" / "txcl.db"), [*(FAST_FLAGS if fast else []), *flags], env)
        procs.append(proc)
        return proc.start()

    yield start
    for proc in procs:
        proc.stop()


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


@pytest.fixture
def store_at(new_pg_database):
    """`store_at(path)` -> the store of that database (a workspace's default path means its
    database on the test's backend; closed after the test)."""
    from txcl.continuations.service import open_run_store

    stores: list[Any] = []

    def open_(path: Path) -> Any:
        store = open_run_store(db_of(path))
        stores.append(store)
        return store

    yield open_
    for store in stores:
        store.close()


def http_get(url: str, accept: str = "application/json", timeout: float = 30.0, *,
             dead_ok: bool = False) -> tuple[int, dict, bytes]:
    """GET returning (status, lower-case headers, body) without following redirects."""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # noqa: ANN002
            return None

    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()
    except (ConnectionError, OSError, urllib.error.URLError) as exc:  # the server died (crash tests)
        if not dead_ok:
            raise
        return 0, {}, str(exc).encode()


def barrier_tree(worker_url: str, *, extra: dict[str, str] | None = None, stack: str = "shop",
                 with_: str = 'mode = "async", timeout = "1m"') -> dict[str, str]:
    """100: an async op (barrier) beside a sync sibling; 200: reads the merged answer."""
    files = {
        f"OPS/{stack}/100/enrich.txcl": f'WITH {with_}\nEXEC "{worker_url}"',
        f"OPS/{stack}/100/side.txcl": "EMIT .side = 1",
        f"OPS/{stack}/200/after.txcl": "EMIT .after = .enriched",
    }
    files.update(extra or {})
    return files


@pytest.fixture(scope="module", params=("sqlite", "postgresql"))
def shared_barrier(tmp_path_factory, request):
    """One worker and one `txcl serve` (barrier tree) for a whole test module, per backend:
    (ws, srv, worker). Tests must consume the jobs they cause; the queue is drained before
    each use."""
    with TestWorker() as w:
        ws = write_tree(tmp_path_factory.mktemp("shared"), barrier_tree(w.url()))
        if request.param == "postgresql":
            server = request.getfixturevalue("pg_server")
            _use_database(ws, server.create_database("shared_" + ws.name.replace("-", "_")))
        srv = ServeProcess(ws, ws / ".txcl-data" / "txcl.db",
                           [*FAST_FLAGS, "--continuation-longpoll-ms", "8000", "--op-timeout", "10s"]).start()
        try:
            yield ws, srv, w
        finally:
            srv.stop()


@pytest.fixture
def shared(shared_barrier):
    import queue as _queue

    ws, srv, w = shared_barrier
    while True:
        try:
            w.queue.get_nowait()
        except _queue.Empty:
            break
    return shared_barrier
