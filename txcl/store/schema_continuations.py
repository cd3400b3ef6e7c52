"""DDL and migrations of the continuation tables (CONTINUATIONS.md §5.2).

Versions are recorded per component in ``txcl_schema(component, version)`` so the trace/kv
tables and these can migrate independently in one database file. Migrations run at open
inside a ``BEGIN IMMEDIATE`` transaction (SQLite's write lock), so two processes opening the
same file never both migrate. A database written by a newer version is refused.

Column names follow §5.2 except three SQL keywords: ``into`` → ``into_path``, ``window`` →
``window_size``, ``exec`` → ``exec_target``. ``token_hash`` may hold several comma-separated
hashes (a resent dispatch gets a fresh token; the earlier one stays valid).
"""

from __future__ import annotations

import sqlite3

import sqlite_utils

from txcl.store.connection import transaction
from txcl.store.continuations_base import SchemaTooNew

COMPONENT = "continuations"
SCHEMA_VERSION = 2

_V1 = """
CREATE TABLE IF NOT EXISTS snapshots (
    snapshot_id TEXT PRIMARY KEY,
    created_ms  INTEGER NOT NULL,
    body        BLOB NOT NULL,
    bytes       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    rcid        TEXT NOT NULL UNIQUE,
    origin_rid  TEXT NOT NULL UNIQUE,
    entry_stack TEXT NOT NULL,
    src         TEXT NOT NULL,
    snapshot_id TEXT REFERENCES snapshots(snapshot_id),
    status      TEXT NOT NULL,
    version     INTEGER NOT NULL DEFAULT 0,
    cur_stage   TEXT,
    cur_visit   INTEGER,
    segment_id  TEXT,
    claim_token TEXT,
    expires_ms  INTEGER,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    finished_ms INTEGER,
    fail_reason TEXT,
    result_json TEXT,
    error_json  TEXT,
    next_seq    INTEGER NOT NULL DEFAULT 1
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_status_expires ON runs(status, expires_ms);
CREATE TABLE IF NOT EXISTS suspends (
    run_id            TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    stage             TEXT NOT NULL,
    visit             INTEGER NOT NULL,
    kind              TEXT NOT NULL,
    status            TEXT NOT NULL,
    envelope_json     TEXT,
    budget_json       TEXT,
    segment_id        TEXT,
    dispatch_complete INTEGER NOT NULL DEFAULT 0,
    suspended_ms      INTEGER NOT NULL,
    closed_ms         INTEGER,
    PRIMARY KEY (run_id, stage, visit)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS await_units (
    unit_id           TEXT PRIMARY KEY,
    run_id            TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    created_seq       INTEGER NOT NULL,
    kind              TEXT NOT NULL,
    op_name           TEXT NOT NULL,
    op_stack          TEXT,
    op_scope          INTEGER,
    dispatch_stage    TEXT,
    dispatch_stack    TEXT,
    join_at_scope     INTEGER,
    segment_id        TEXT,
    status            TEXT NOT NULL,
    version           INTEGER NOT NULL DEFAULT 0,
    expected          INTEGER NOT NULL,
    dispatch_complete INTEGER NOT NULL DEFAULT 1,
    provider_done     INTEGER NOT NULL DEFAULT 0,
    continuation_done INTEGER NOT NULL DEFAULT 0,
    window_size       INTEGER NOT NULL DEFAULT 1,
    on_item_error     TEXT NOT NULL DEFAULT 'fail',
    into_path         TEXT,
    exec_target       TEXT,
    directives_json   TEXT,
    input_view_json   TEXT,
    output_json       TEXT,
    error_json        TEXT,
    fuel_used         INTEGER NOT NULL DEFAULT 0,
    budget_ms         INTEGER,
    deadline_ms       INTEGER,
    created_ms        INTEGER NOT NULL,
    closed_ms         INTEGER,
    UNIQUE (run_id, created_seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS await_units_status ON await_units(status, kind);
CREATE TABLE IF NOT EXISTS suspend_members (
    run_id  TEXT NOT NULL,
    stage   TEXT NOT NULL,
    visit   INTEGER NOT NULL,
    unit_id TEXT NOT NULL REFERENCES await_units(unit_id) ON DELETE CASCADE,
    role    TEXT NOT NULL,
    PRIMARY KEY (run_id, stage, visit, unit_id),
    FOREIGN KEY (run_id, stage, visit) REFERENCES suspends(run_id, stage, visit) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS suspend_members_unit ON suspend_members(unit_id);
CREATE TABLE IF NOT EXISTS interactions (
    opc            TEXT PRIMARY KEY,
    unit_id        TEXT NOT NULL REFERENCES await_units(unit_id) ON DELETE CASCADE,
    item_index     INTEGER NOT NULL,
    run_id         TEXT NOT NULL,
    token_hash     TEXT,
    status         TEXT NOT NULL,
    version        INTEGER NOT NULL DEFAULT 0,
    input_json     TEXT,
    deadline_ms    INTEGER,
    dispatch_owner TEXT,
    dispatch_ms    INTEGER,
    attempts       INTEGER NOT NULL DEFAULT 0,
    ack_json       TEXT,
    created_ms     INTEGER NOT NULL,
    closed_ms      INTEGER,
    UNIQUE (unit_id, item_index)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS interactions_open_deadline ON interactions(deadline_ms)
    WHERE status IN ('queued', 'dispatching', 'dispatched');
CREATE INDEX IF NOT EXISTS interactions_unit_status ON interactions(unit_id, status, item_index);
CREATE TABLE IF NOT EXISTS terminals (
    opc            TEXT PRIMARY KEY REFERENCES interactions(opc) ON DELETE CASCADE,
    status         TEXT NOT NULL,
    payload_json   TEXT,
    payload_sha256 TEXT NOT NULL,
    source         TEXT NOT NULL,
    best_effort    INTEGER NOT NULL DEFAULT 0,
    transport      TEXT,
    fuel_used      INTEGER NOT NULL DEFAULT 0,
    recorded_ms    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS item_children (
    unit_id        TEXT NOT NULL REFERENCES await_units(unit_id) ON DELETE CASCADE,
    item_index     INTEGER NOT NULL,
    opc            TEXT,
    status         TEXT NOT NULL,
    version        INTEGER NOT NULL DEFAULT 0,
    output_json    TEXT,
    error_json     TEXT,
    lease_owner    TEXT,
    lease_until_ms INTEGER,
    created_ms     INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    PRIMARY KEY (unit_id, item_index)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS item_children_pending ON item_children(status, updated_ms)
    WHERE status IN ('queued', 'running');
CREATE TABLE IF NOT EXISTS continuation_facts (
    unit_id     TEXT NOT NULL REFERENCES await_units(unit_id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    item_index  INTEGER NOT NULL,
    recorded_ms INTEGER NOT NULL,
    PRIMARY KEY (unit_id, kind, item_index)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS joined_markers (
    unit_id    TEXT PRIMARY KEY REFERENCES await_units(unit_id) ON DELETE CASCADE,
    run_id     TEXT NOT NULL,
    segment_id TEXT NOT NULL,
    joined_ms  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS joined_markers_segment ON joined_markers(run_id, segment_id);
CREATE TABLE IF NOT EXISTS resume_claims (
    run_id       TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    stage        TEXT NOT NULL,
    visit        INTEGER NOT NULL,
    claim_token  TEXT NOT NULL UNIQUE,
    owner        TEXT NOT NULL,
    segment_id   TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    claimed_ms   INTEGER NOT NULL,
    heartbeat_ms INTEGER NOT NULL,
    PRIMARY KEY (run_id, stage, visit)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_events (
    run_id    TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    event_key TEXT NOT NULL,
    kind      TEXT NOT NULL,
    at_ms     INTEGER NOT NULL,
    data_json TEXT,
    PRIMARY KEY (run_id, event_key)
) WITHOUT ROWID;
"""

# v2: unit counters follow their facts inside SQLite (one statement less per fact, and the
# counter can never drift from the rows it counts). Facts are insert-only until the purge.
_V2 = """
CREATE TRIGGER IF NOT EXISTS continuation_facts_count AFTER INSERT ON continuation_facts
BEGIN
    UPDATE await_units
       SET provider_done = provider_done + (NEW.kind = 'provider'),
           continuation_done = continuation_done + (NEW.kind = 'continuation')
     WHERE unit_id = NEW.unit_id
END
"""

MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2}


def _current_version(conn: sqlite3.Connection) -> int:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS txcl_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    )
    row = conn.execute("SELECT version FROM txcl_schema WHERE component = ?", (COMPONENT,)).fetchone()
    return int(row[0]) if row else 0


def migrate(db: sqlite_utils.Database) -> int:
    """Bring the continuation tables up to :data:`SCHEMA_VERSION`; return the version."""
    with transaction(db) as conn:
        version = _current_version(conn)
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the database holds continuation schema version {version}; this txcl knows up to {SCHEMA_VERSION}"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _split(MIGRATIONS[target]):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO txcl_schema (component, version) VALUES (?, ?) "
                "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                (COMPONENT, target),
            )
        return SCHEMA_VERSION


def ddl_statements() -> list[str]:
    """Every statement of the current schema (for a host store's own migration loop).

    The host (txcl.store.sqlite.SqliteStore) re-runs these at every open, so they must stay
    idempotent (CREATE … IF NOT EXISTS). A later version that needs ALTERs must return only
    the idempotent part here and leave the stepwise upgrade to :func:`migrate`, which runs at
    the first use of the continuation tables in each process."""
    return [stmt for v in range(1, SCHEMA_VERSION + 1) for stmt in _split(MIGRATIONS[v])]


def _split(script: str) -> list[str]:
    """Split a DDL script into statements on ';' (trigger bodies are written without one and
    get their closing ';' added here)."""
    out = []
    for stmt in (s.strip() for s in script.split(";")):
        if not stmt:
            continue
        if stmt.startswith("CREATE TRIGGER") and stmt.endswith("END"):
            stmt = stmt[: -len("END")].rstrip() + ";\nEND"
        out.append(stmt)
    return out
