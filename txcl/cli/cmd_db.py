"""`txcl db status` and `txcl db upgrade`: the database's schema, one version per component.

Every command that writes migrates at start, so `upgrade` is needed only where migrations are
run by hand — e.g. before starting a new txcl version on several nodes sharing one database,
with `status` to check first. Exit codes: 0 current (status) or upgraded, 1 not current
(status), 2 the database cannot be opened.
"""

from __future__ import annotations

import sys

import click

from txcl.cli.common import DB_HELP


def _open(directory: str, db: str | None, *, create: bool = False):
    from txcl.cli.durable import open_settings
    from txcl.cli.common import fail
    from txcl.store import open_backend, sqlite_file
    from txcl.store.errors import StoreError

    workspace, settings = open_settings(directory, db)
    url = settings.db_path(workspace)
    try:
        file = sqlite_file(url)
        if file is not None and not file.exists() and not create:
            fail(f"--db: no database at {file}")
        return open_backend(url, create=create)
    except StoreError as exc:
        fail(f"--db: {exc}")


def _print(backend, statuses, as_json: bool) -> None:
    if as_json:
        from txcl.values.jsonio import dumps

        click.echo(dumps({"backend": backend.kind, "database": backend.describe(),
                          "components": [{"name": s.name, "version": s.have, "expected": s.want, "state": s.state}
                                         for s in statuses]}, indent=2))
        return
    click.echo(f"{backend.kind} {backend.describe()}")
    for s in statuses:
        have = "-" if s.have is None else str(s.have)
        click.echo(f"  {s.name:<14} version {have:>2} of {s.want}  {s.state}")


@click.group("db")
def command() -> None:
    """Show or upgrade the database schema (SQLite file or PostgreSQL)."""


@command.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace (for the default --db).")
def status(as_json: bool, db: str | None, directory: str) -> None:
    """Each component's schema version; exit 1 when one is not current."""
    from txcl.cli.common import fail
    from txcl.store import schema
    from txcl.store.errors import StoreError

    backend = _open(directory, db)
    try:
        statuses = schema.status(backend)
    except StoreError as exc:
        fail(f"--db: {exc}")
    finally:
        backend.close()
    _print(backend, statuses, as_json)
    sys.exit(0 if all(s.state == "current" for s in statuses) else 1)


@command.command("upgrade")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace (for the default --db).")
def upgrade(as_json: bool, db: str | None, directory: str) -> None:
    """Create missing components and upgrade older ones (safe to run on a live database:
    it holds the schema lock, and running nodes see the same tables)."""
    from txcl.cli.common import fail
    from txcl.store import schema
    from txcl.store.errors import StoreError

    backend = _open(directory, db, create=True)
    try:
        before = schema.migrate(backend)
        after = schema.status(backend)
    except StoreError as exc:
        fail(f"--db: {exc}")
    finally:
        backend.close()
    if not as_json:
        for old in before:
            if old.state != "current":
                have = "nothing" if old.have is None else f"version {old.have}"
                click.echo(f"{old.name}: {have} -> version {old.want}")
    _print(backend, after, as_json)


@command.command("vacuum")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace (for the default --db).")
def vacuum(db: str | None, directory: str) -> None:
    """Give the space of purged runs and traces back to the file system (SQLite: VACUUM and a
    truncated WAL; PostgreSQL: VACUUM). Safe while the server runs; SQLite writers wait."""
    from txcl.cli.common import fail
    from txcl.store import sqlite_file
    from txcl.store.errors import StoreError

    backend = _open(directory, db)
    file = sqlite_file(backend.describe()) if backend.kind == "sqlite" else None
    before = file.stat().st_size if file is not None else None
    try:
        backend.vacuum()
    except StoreError as exc:
        fail(f"--db: {exc}")
    finally:
        backend.close()
    if file is not None and before is not None:
        click.echo(f"{file}: {before:,} → {file.stat().st_size:,} bytes")
    else:
        click.echo(f"{backend.kind} {backend.describe()}: vacuumed")

