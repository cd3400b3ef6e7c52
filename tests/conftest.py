"""Shared pytest fixtures: the repository root, and OPS trees built in tmp_path and run."""

from __future__ import annotations

import itertools
import os
import textwrap
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT

_counter = itertools.count()


def pytest_configure(config):
    """The parse cache on disk of every txcl process the tests start is a file of this run
    (not the user's ~/.cache), so the whole suite runs through it, from empty."""
    if "TXCL_PARSE_CACHE" not in os.environ:
        import tempfile

        folder = tempfile.mkdtemp(prefix="txcl-test-parse-cache-")
        os.environ["TXCL_PARSE_CACHE"] = os.path.join(folder, "parse-cache.sqlite3")
        config._txcl_parse_cache_dir = folder
    _guard_state_transitions()


_STATE_GUARD = {"on": True}


@pytest.fixture(autouse=True)
def _state_guard_switch(request):
    """Off for tests marked ``no_state_guard`` (they write states by hand to fake a crash)."""
    _STATE_GUARD["on"] = request.node.get_closest_marker("no_state_guard") is None
    yield
    _STATE_GUARD["on"] = True


def _guard_state_transitions() -> None:
    """Every SQLite database this test process migrates gets the state guards of
    :mod:`txcl.store.states`: a procedure that writes a state, or a transition, that no state
    module allows fails the test that ran it."""
    from txcl.store import schema
    from txcl.store.states import guard_triggers

    original = schema.migrate
    if getattr(original, "_txcl_guarded", False):
        return

    def migrate_and_guard(backend):
        found = original(backend)
        if backend.kind == "sqlite" and _STATE_GUARD["on"]:
            backend.transact(lambda t: [t.run(ddl) for ddl in guard_triggers()])
        return found

    migrate_and_guard._txcl_guarded = True
    schema.migrate = migrate_and_guard


def pytest_unconfigure(config):
    folder = getattr(config, "_txcl_parse_cache_dir", None)
    if folder is not None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)

BACKENDS = ("sqlite", "postgresql")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items):
    """Every test that needs a PostgreSQL server carries the `postgres` marker (`-m "not
    postgres"` runs without one)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_pg = callspec is not None and "postgresql" in callspec.params.values()
        info = getattr(item, "_fixtureinfo", None)
        asked = set(info.argnames) if info is not None else set()  # what the test itself requests
        if on_pg or {"pg_server", "pg_store", "new_pg_database"} & asked:
            item.add_marker(pytest.mark.postgres)


class _ExternalPostgres:
    """A server named by TXCL_TEST_PG_URL (databases are created and dropped in it)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def url_for(self, database: str) -> str:
        from txcl.testing.postgres import database_url

        return database_url(self.url, database)

    def create_database(self, name: str) -> str:
        from txcl.testing.postgres import create_database

        create_database(self.url, name)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        from txcl.testing.postgres import drop_database

        drop_database(self.url, name)


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server for the session: TXCL_TEST_PG_URL when set (as `.ci/run` sets
    it), otherwise a throwaway one started here (installed with apt-get when missing)."""
    url = os.environ.get("TXCL_TEST_PG_URL")
    if url:
        yield _ExternalPostgres(url)
        return
    from txcl.testing.postgres import PostgresUnavailable, TempPostgres

    try:
        server = TempPostgres.start()  # in a fresh /tmp dir the server's own user can enter
    except PostgresUnavailable as exc:
        pytest.fail(f"PostgreSQL is needed for the tests marked postgres: {exc}")
    yield server
    server.stop()


@pytest.fixture
def new_pg_database(request):
    """`new_pg_database()` -> the URL of a fresh, empty database (dropped after the test).
    Fixtures that hold connections to such databases (servers, stores) request this fixture
    first, so the databases are dropped after those are closed."""
    made: list[str] = []

    def create() -> str:
        server = request.getfixturevalue("pg_server")
        name = "t_" + uuid.uuid4().hex[:16]
        made.append(name)
        return server.create_database(name)

    yield create
    for name in made:
        try:
            request.getfixturevalue("pg_server").drop_database(name)
        except Exception:  # noqa: BLE001 - a leftover database is harmless in a throwaway server
            pass


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Run the test once per store backend."""
    return request.param


@pytest.fixture
def fresh_db(backend, tmp_path, request) -> Callable[[], str]:
    """`fresh_db()` -> another fresh database on the test's backend, at each call."""
    numbers = itertools.count()

    def make() -> str:
        if backend == "sqlite":
            return str(tmp_path / f"db{next(numbers)}.db")
        return request.getfixturevalue("new_pg_database")()

    return make


@pytest.fixture
def db_url(backend, tmp_path, request) -> str:
    """A fresh database for the test on its backend: a SQLite file in tmp_path, or a new
    PostgreSQL database."""
    if backend == "sqlite":
        return str(tmp_path / "txcl.db")
    return request.getfixturevalue("new_pg_database")()


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (paths relative to the workspace; `.txcl` texts dedented) and return it."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = textwrap.dedent(text).strip("\n")
        path.write_text(body + "\n", encoding="utf-8")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """`workspace({"OPS/shop/0100/a.txcl": "EMIT .a = 1"})` -> the workspace directory.

    Python modules written beside OPS/ get a unique name per test to avoid import caching."""

    def build(files: dict[str, str]) -> Path:
        ws = tmp_path / f"ws{next(_counter)}"
        ws.mkdir()
        return write_tree(ws, files)

    return build


@pytest.fixture
def run_tree(tmp_path: Path):
    """`run_tree(ws, envelope, stack=None, **settings)` -> (outcome, store)."""
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Interpreter
    from txcl.store import open_store

    stores: list[Any] = []

    def run(ws: Path, envelope: dict | None = None, stack: str | None = None, *, mocks=None,
            sleep=None, **settings: Any):
        store = open_store(ws / ".txcl-data" / "txcl.db")
        stores.append(store)
        tree = load_ops(ws)
        interp = Interpreter(tree, store=store, settings=Settings(**settings))
        if sleep is not None:
            interp.services.sleep = sleep
        try:
            outcome = interp.run_sync(dict(envelope or {}), stack, mocks=mocks)
        finally:
            interp.close()
        return outcome, store

    yield run
    for store in stores:
        store.close()

