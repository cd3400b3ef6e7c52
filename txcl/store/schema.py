"""The database schema, written once for every backend, with a version per component.

Three components live in one database: ``traces`` (one row per segment's trace), ``kv`` (the
``txco://kv/*`` builtins) and ``continuations`` (durable runs). Each has a version in
``txcl_schema(component, version)``; :func:`migrate` creates what is missing and upgrades what
is older, inside one write transaction holding the schema lock (SQLite's write lock; a
PostgreSQL advisory lock), so two processes starting at once never both migrate. A database
written by a newer txcl is refused (:class:`SchemaTooNew`).

DDL uses the dialect's tokens: ``{bigint}`` (64-bit integers: every ``*_ms`` column is
milliseconds since the epoch), ``{blob}``, ``{seq}`` (an insertion-order column where rows
have none of their own) and ``{table}`` (table options). JSON columns are TEXT on both
backends, so a value reads back byte for byte as it was written (key order included).

Column names avoid three SQL keywords: ``into_path``, ``window_size``, ``exec_target``.
``interactions.token_hash`` may hold several comma-separated hashes (a resent dispatch gets a
fresh token; the earlier one stays valid).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from txcl.store.backend import SqlBackend, Tx
from txcl.store.errors import SchemaOutdated, SchemaTooNew


@dataclass(frozen=True)
class Component:
    name: str
    version: int
    create: tuple[str, ...]  # the current version's DDL, every statement idempotent
    upgrades: dict[int, tuple[str, ...]] = field(default_factory=dict)  # from version v to v + 1
    # from version v to v + 1, after the DDL: fills new columns of existing rows
    backfills: dict[int, Callable[[Tx], None]] = field(default_factory=dict)


TRACES = Component(
    "traces",
    8,
    (
        # One row per segment: steps and timeline events are packed as JSON arrays, so writing
        # a trace is one INSERT.
        """CREATE TABLE IF NOT EXISTS traces (
    {seq}rid TEXT PRIMARY KEY, origin_rid TEXT, run_id TEXT, src TEXT, entry_stack TEXT,
    started_ms {bigint}, finished_ms {bigint}, status TEXT, http_status {bigint},
    fuel_used {bigint}, bytes_in {bigint}, bytes_out {bigint}, mode TEXT,
    in_json TEXT, out_json TEXT, error_json TEXT, steps_json TEXT NOT NULL DEFAULT '[]',
    events_json TEXT NOT NULL DEFAULT '[]', times_from {bigint})""",
        "CREATE INDEX IF NOT EXISTS traces_started ON traces (started_ms)",
        # Only a durable run's segments have a run_id (every lookup by run gives one): a
        # request answered at once adds nothing to this index.
        "CREATE INDEX IF NOT EXISTS traces_run ON traces (run_id, started_ms) WHERE run_id IS NOT NULL",
    ),
    {
        # v1 kept steps and events in tables of their own; v2 packs them into the row
        1: (
            "DROP TABLE IF EXISTS trace_steps",
            "DROP TABLE IF EXISTS trace_events",
            "ALTER TABLE traces ADD COLUMN steps_json TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE traces ADD COLUMN events_json TEXT NOT NULL DEFAULT '[]'",
        ),
        2: (),  # v3: written through the shared procedures (no change to the table)
        # v4: scope events stored compact (`[seq, at_ms, code, …]`, see txcl.store.records);
        # no change to the table, but an older txcl would misread those events
        3: (),
        # v5: steps' and events' times stored as milliseconds after `times_from` (NULL in
        # the rows written before: their times are epoch milliseconds)
        4: ("ALTER TABLE traces ADD COLUMN times_from {bigint}",),
        # v6: the run index holds only the segments of durable runs
        5: ("DROP INDEX IF EXISTS traces_run",
            "CREATE INDEX IF NOT EXISTS traces_run ON traces (run_id, started_ms) WHERE run_id IS NOT NULL"),
        # v7: a scope of local rules is stored as one `stage.enter` of its own code and its
        # merge left implied (see txcl.trace.format.STAGE_FUSED); no change to the table, but
        # an older txcl would show such scopes without their merge
        6: (),
        # v8: such a scope's steps are folded into its entry (STAGE_RULES, same module) when
        # its rules ended well; no change to the table, but an older txcl would not see them
        7: (),
    },
)

KV = Component(
    "kv",
    1,
    (
        """CREATE TABLE IF NOT EXISTS kv (
    ns TEXT NOT NULL, key TEXT NOT NULL, value_json TEXT NOT NULL, version {bigint} NOT NULL,
    updated_ms {bigint} NOT NULL, expires_ms {bigint}, PRIMARY KEY (ns, key))""",
    ),
)

def _backfill_unit_options(t: Tx) -> None:
    """v9: the resolved options of units written before txcl stored them (see txcl.runoptions),
    from the WITH options each unit kept."""
    from txcl.runoptions import unit_options
    from txcl.store.jsoncols import dumps, loads

    rows = t.all("SELECT unit_id, kind, on_item_error, expected, directives_json FROM await_units "
                 "WHERE options_json IS NULL")
    t.many("UPDATE await_units SET options_json = ? WHERE unit_id = ?",
           [(dumps(unit_options(r["kind"], r["on_item_error"], r["expected"], loads(r["directives_json"])).to_json()),
             r["unit_id"]) for r in rows])


CONTINUATIONS = Component(
    "continuations",
    9,
    (
    """CREATE TABLE IF NOT EXISTS snapshots (
    snapshot_id TEXT PRIMARY KEY,
    created_ms  {bigint} NOT NULL,
    body        {blob} NOT NULL,
    bytes       {bigint} NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    rcid        TEXT NOT NULL UNIQUE,
    origin_rid  TEXT NOT NULL UNIQUE,
    entry_stack TEXT NOT NULL,
    src         TEXT NOT NULL,
    snapshot_id TEXT REFERENCES snapshots(snapshot_id),
    status      TEXT NOT NULL,
    version     {bigint} NOT NULL DEFAULT 0,
    cur_stage   TEXT,
    cur_visit   {bigint},
    segment_id  TEXT,
    claim_token TEXT,
    expires_ms  {bigint},
    created_ms  {bigint} NOT NULL,
    updated_ms  {bigint} NOT NULL,
    finished_ms {bigint},
    fail_reason TEXT,
    result_json TEXT,
    error_json  TEXT,
    next_seq    {bigint} NOT NULL DEFAULT 1
){table}""",
    """CREATE INDEX IF NOT EXISTS runs_status_expires ON runs(status, expires_ms)""",
    """CREATE TABLE IF NOT EXISTS suspends (
    run_id            TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    stage             TEXT NOT NULL,
    visit             {bigint} NOT NULL,
    kind              TEXT NOT NULL,
    status            TEXT NOT NULL,
    envelope_json     TEXT,
    budget_json       TEXT,
    segment_id        TEXT,
    dispatch_complete {bigint} NOT NULL DEFAULT 0,
    resume_round      {bigint} NOT NULL DEFAULT 1,
    suspended_ms      {bigint} NOT NULL,
    closed_ms         {bigint},
    PRIMARY KEY (run_id, stage, visit)
){table}""",
    """CREATE TABLE IF NOT EXISTS await_units (
    unit_id           TEXT PRIMARY KEY,
    run_id            TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    created_seq       {bigint} NOT NULL,
    kind              TEXT NOT NULL,
    op_name           TEXT NOT NULL,
    op_stack          TEXT,
    op_scope          {bigint},
    dispatch_stage    TEXT,
    dispatch_stack    TEXT,
    join_at_scope     {bigint},
    segment_id        TEXT,
    status            TEXT NOT NULL,
    version           {bigint} NOT NULL DEFAULT 0,
    expected          {bigint} NOT NULL,
    dispatch_complete {bigint} NOT NULL DEFAULT 1,
    provider_done     {bigint} NOT NULL DEFAULT 0,
    continuation_done {bigint} NOT NULL DEFAULT 0,
    window_size       {bigint} NOT NULL DEFAULT 1,
    on_item_error     TEXT NOT NULL DEFAULT 'fail',
    into_path         TEXT,
    exec_target       TEXT,
    directives_json   TEXT,
    input_view_json   TEXT,
    output_json       TEXT,
    error_json        TEXT,
    fuel_used         {bigint} NOT NULL DEFAULT 0,
    budget_ms         {bigint},
    deadline_ms       {bigint},
    join_deadline_ms  {bigint},
    options_json      TEXT,
    created_ms        {bigint} NOT NULL,
    closed_ms         {bigint},
    UNIQUE (run_id, created_seq)
){table}""",
    """CREATE INDEX IF NOT EXISTS await_units_status ON await_units(status, kind)""",
    # deferred ops waiting past their WITH join_deadline (the sweeper's join-deadline pass)
    """CREATE INDEX IF NOT EXISTS await_units_join_deadline ON await_units(join_deadline_ms)
    WHERE join_deadline_ms IS NOT NULL AND status = 'waiting'""",
    """CREATE TABLE IF NOT EXISTS suspend_members (
    run_id  TEXT NOT NULL,
    stage   TEXT NOT NULL,
    visit   {bigint} NOT NULL,
    unit_id TEXT NOT NULL REFERENCES await_units(unit_id) ON DELETE CASCADE,
    role    TEXT NOT NULL,
    PRIMARY KEY (run_id, stage, visit, unit_id),
    FOREIGN KEY (run_id, stage, visit) REFERENCES suspends(run_id, stage, visit) ON DELETE CASCADE
){table}""",
    """CREATE INDEX IF NOT EXISTS suspend_members_unit ON suspend_members(unit_id)""",
    """CREATE TABLE IF NOT EXISTS interactions (
    opc            TEXT PRIMARY KEY,
    unit_id        TEXT NOT NULL REFERENCES await_units(unit_id) ON DELETE CASCADE,
    item_index     {bigint} NOT NULL,
    run_id         TEXT NOT NULL,
    token_hash     TEXT,
    status         TEXT NOT NULL,
    version        {bigint} NOT NULL DEFAULT 0,
    input_json     TEXT,
    deadline_ms    {bigint},
    dispatch_owner TEXT,
    dispatch_ms    {bigint},
    attempts       {bigint} NOT NULL DEFAULT 0,
    ack_json       TEXT,
    heartbeat_ms   {bigint},
    progress_json  TEXT,
    cancel_url     TEXT,
    cancel_token   TEXT,
    retry_count    {bigint} NOT NULL DEFAULT 0,
    retry_at_ms    {bigint},
    retired_tokens TEXT,
    created_ms     {bigint} NOT NULL,
    closed_ms      {bigint},
    UNIQUE (unit_id, item_index)
){table}""",
    """CREATE INDEX IF NOT EXISTS interactions_open_deadline ON interactions(deadline_ms)
    WHERE status IN ('queued', 'dispatching', 'dispatched')""",
    """CREATE INDEX IF NOT EXISTS interactions_unit_status ON interactions(unit_id, status, item_index)""",
    # calls waiting to be sent again (WITH retries), by when
    """CREATE INDEX IF NOT EXISTS interactions_retry_due ON interactions(retry_at_ms)
    WHERE status = 'queued' AND retry_at_ms IS NOT NULL""",
    """CREATE TABLE IF NOT EXISTS terminals (
    opc            TEXT PRIMARY KEY REFERENCES interactions(opc) ON DELETE CASCADE,
    status         TEXT NOT NULL,
    payload_json   TEXT,
    payload_sha256 TEXT NOT NULL,
    source         TEXT NOT NULL,
    best_effort    {bigint} NOT NULL DEFAULT 0,
    transport      TEXT,
    fuel_used      {bigint} NOT NULL DEFAULT 0,
    recorded_ms    {bigint} NOT NULL
){table}""",
    """CREATE TABLE IF NOT EXISTS item_children (
    unit_id        TEXT NOT NULL REFERENCES await_units(unit_id) ON DELETE CASCADE,
    item_index     {bigint} NOT NULL,
    opc            TEXT,
    status         TEXT NOT NULL,
    version        {bigint} NOT NULL DEFAULT 0,
    output_json    TEXT,
    error_json     TEXT,
    lease_owner    TEXT,
    lease_until_ms {bigint},
    created_ms     {bigint} NOT NULL,
    updated_ms     {bigint} NOT NULL,
    PRIMARY KEY (unit_id, item_index)
){table}""",
    """CREATE INDEX IF NOT EXISTS item_children_pending ON item_children(status, updated_ms)
    WHERE status IN ('queued', 'running')""",
    """CREATE TABLE IF NOT EXISTS continuation_facts (
    unit_id     TEXT NOT NULL REFERENCES await_units(unit_id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    item_index  {bigint} NOT NULL,
    recorded_ms {bigint} NOT NULL,
    PRIMARY KEY (unit_id, kind, item_index)
){table}""",
    """CREATE TABLE IF NOT EXISTS joined_markers (
    unit_id    TEXT PRIMARY KEY REFERENCES await_units(unit_id) ON DELETE CASCADE,
    run_id     TEXT NOT NULL,
    segment_id TEXT NOT NULL,
    joined_ms  {bigint} NOT NULL
){table}""",
    """CREATE INDEX IF NOT EXISTS joined_markers_segment ON joined_markers(run_id, segment_id)""",
    """CREATE TABLE IF NOT EXISTS resume_claims (
    run_id       TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    stage        TEXT NOT NULL,
    visit        {bigint} NOT NULL,
    claim_token  TEXT NOT NULL UNIQUE,
    owner        TEXT NOT NULL,
    segment_id   TEXT NOT NULL,
    attempt      {bigint} NOT NULL,
    claimed_ms   {bigint} NOT NULL,
    heartbeat_ms {bigint} NOT NULL,
    PRIMARY KEY (run_id, stage, visit)
){table}""",
    """CREATE TABLE IF NOT EXISTS run_events (
    run_id    TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    seq       {bigint} NOT NULL,
    event_key TEXT NOT NULL,
    kind      TEXT NOT NULL,
    at_ms     {bigint} NOT NULL,
    data_json TEXT,
    PRIMARY KEY (run_id, event_key)
){table}""",
    # cancellations owed to workers (their cancel URL), delivered at least once with backoff
    """CREATE TABLE IF NOT EXISTS cancel_calls (
    opc         TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    url         TEXT NOT NULL,
    token       TEXT,
    reason      TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    {bigint} NOT NULL DEFAULT 0,
    next_ms     {bigint} NOT NULL,
    last_error  TEXT,
    created_ms  {bigint} NOT NULL,
    done_ms     {bigint}
){table}""",
    """CREATE INDEX IF NOT EXISTS cancel_calls_due ON cancel_calls(next_ms) WHERE status = 'pending'""",
    """CREATE INDEX IF NOT EXISTS cancel_calls_run ON cancel_calls(run_id)""",
    """CREATE INDEX IF NOT EXISTS item_children_failed ON item_children(unit_id, item_index)
    WHERE status = 'failed'""",
    """CREATE INDEX IF NOT EXISTS runs_created ON runs(created_ms, run_id)""",
    # the runs of one state, newest first (the dashboard's filter)
    """CREATE INDEX IF NOT EXISTS runs_status_created ON runs(status, created_ms, run_id)""",
    """CREATE INDEX IF NOT EXISTS runs_finished ON runs(finished_ms) WHERE finished_ms IS NOT NULL""",
    # big strings of a run's documents (a request body in the envelope, the budgets, the
    # units' input views and the result), each stored once per run: see txcl.store.blobs
    """CREATE TABLE IF NOT EXISTS blobs (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    digest TEXT NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (run_id, digest)
)""",  # (a rowid table on SQLite: WITHOUT ROWID suits small rows, not megabytes)
    ),
    {
        1: (),
        # v2 kept the unit counters in a trigger (SQLite only); v3 counts in the procedures,
        # written once for every backend
        2: ("DROP TRIGGER IF EXISTS continuation_facts_count",),
        3: (),  # v4: the index the purge reads (runs_finished), created below
        4: (),  # v5: the blobs table, created below
        5: (),  # v6: the index of runs by state and age (runs_status_created), created below
        # v7: a worker's heartbeats (WITH heartbeat): when it last said it is alive, and its progress
        6: ("ALTER TABLE interactions ADD COLUMN heartbeat_ms {bigint}",
            "ALTER TABLE interactions ADD COLUMN progress_json TEXT"),
        # v8: join deadlines (WITH join_deadline), workers' cancel URLs (the cancel_calls table
        # and the indexes are created below) and retries (WITH retries)
        7: ("ALTER TABLE await_units ADD COLUMN join_deadline_ms {bigint}",
            "ALTER TABLE interactions ADD COLUMN cancel_url TEXT",
            "ALTER TABLE interactions ADD COLUMN cancel_token TEXT",
            "ALTER TABLE interactions ADD COLUMN retry_count {bigint} NOT NULL DEFAULT 0",
            "ALTER TABLE interactions ADD COLUMN retry_at_ms {bigint}",
            "ALTER TABLE interactions ADD COLUMN retired_tokens TEXT",
            # a suspend resumed again after `txcl runs retry` (its resume gets a new segment id)
            "ALTER TABLE suspends ADD COLUMN resume_round {bigint} NOT NULL DEFAULT 1"),
        # v9: a unit's options, resolved once when it is built (txcl.runoptions)
        8: ("ALTER TABLE await_units ADD COLUMN options_json TEXT",),
    },
    {8: _backfill_unit_options},
)

CLOCK = Component(
    "clock",
    2,
    (
        # one row per fired cron tick: the first node to insert a (job, bucket) fires it
        """CREATE TABLE IF NOT EXISTS cron_ticks (
    job        TEXT NOT NULL,
    bucket_ms  {bigint} NOT NULL,
    node       TEXT NOT NULL,
    rid        TEXT NOT NULL,
    claimed_ms {bigint} NOT NULL,
    PRIMARY KEY (job, bucket_ms)
)""",
        # one row per scheduled event (EXEC "txco://schedule"), keyed by its idempotency key:
        # pending → claimed (a node fires it) → fired | failed; pending → cancelled
        """CREATE TABLE IF NOT EXISTS scheduled_events (
    idempotency_key TEXT PRIMARY KEY,
    event_id        TEXT NOT NULL UNIQUE,
    status          TEXT NOT NULL,
    schedule_at_ms  {bigint} NOT NULL,
    payload_json    TEXT NOT NULL,
    origin_stack    TEXT,
    origin_rid      TEXT,
    created_ms      {bigint} NOT NULL,
    updated_ms      {bigint} NOT NULL,
    claimed_by      TEXT,
    claimed_ms      {bigint},
    attempts        {bigint} NOT NULL DEFAULT 0,
    fired_ms        {bigint},
    rid             TEXT,
    error           TEXT
)""",
        "CREATE INDEX IF NOT EXISTS scheduled_due ON scheduled_events (status, schedule_at_ms)",
    ),
    {1: ()},  # v2: the scheduled_events table, created above
)

MAIL = Component(
    "mail",
    1,
    (
        # one row per (message, recipient) delivered over LMTP: a delivery the MTA repeats
        # (same Message-ID and recipient) gets the recorded verdict instead of a second walk
        """CREATE TABLE IF NOT EXISTS lmtp_deliveries (
    delivery_key TEXT PRIMARY KEY,
    status       TEXT NOT NULL,
    code         {bigint},
    message      TEXT,
    rid          TEXT NOT NULL,
    node         TEXT NOT NULL,
    created_ms   {bigint} NOT NULL,
    updated_ms   {bigint} NOT NULL
)""",
        "CREATE INDEX IF NOT EXISTS lmtp_deliveries_age ON lmtp_deliveries (updated_ms)",
    ),
)

QUEUES = Component(
    "queues",
    1,
    (
        # one row per call of a queue:// op waiting for a worker to claim it (EXEC "queue://name"):
        # ready → leased (a worker claimed it) → lapsed (its lease ran out: retried or failed);
        # ready again when the call is sent again (WITH retries)
        """CREATE TABLE IF NOT EXISTS queue_jobs (
    opc            TEXT PRIMARY KEY REFERENCES interactions(opc) ON DELETE CASCADE,
    queue          TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    status         TEXT NOT NULL,
    enqueued_ms    {bigint} NOT NULL,
    lease_ms       {bigint} NOT NULL DEFAULT 0,
    lease_until_ms {bigint},
    claimed_by     TEXT,
    claims         {bigint} NOT NULL DEFAULT 0,
    updated_ms     {bigint} NOT NULL
)""",
        "CREATE INDEX IF NOT EXISTS queue_jobs_ready ON queue_jobs (queue, enqueued_ms) WHERE status = 'ready'",
        "CREATE INDEX IF NOT EXISTS queue_jobs_leases ON queue_jobs (lease_until_ms) WHERE status = 'leased'",
        "CREATE INDEX IF NOT EXISTS queue_jobs_lapsed ON queue_jobs (updated_ms) WHERE status = 'lapsed'",
    ),
)

COMPONENTS: tuple[Component, ...] = (TRACES, KV, CONTINUATIONS, CLOCK, MAIL, QUEUES)


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    have: int | None  # None: not created yet
    want: int

    @property
    def state(self) -> str:
        if self.have is None:
            return "missing"
        if self.have < self.want:
            return "outdated"
        if self.have > self.want:
            return "too new"
        return "current"


_VERSIONS = "CREATE TABLE IF NOT EXISTS txcl_schema (component TEXT PRIMARY KEY, version {bigint} NOT NULL)"


def _versions(t: Tx) -> dict[str, int]:
    if t.one(t.backend.dialect.table_exists_sql, ("txcl_schema",)) is None:
        return {}
    return {r[0]: int(r[1]) for r in t.all("SELECT component, version FROM txcl_schema")}


def status(backend: SqlBackend) -> list[ComponentStatus]:
    """Every component's stored and expected version (a read; changes nothing)."""
    have = backend.read(_versions)
    return [ComponentStatus(c.name, have.get(c.name), c.version) for c in COMPONENTS]


def check_current(backend: SqlBackend) -> None:
    """Raise unless every component is at this txcl's version (for ``--no-migrate`` opens)."""
    for st in status(backend):
        if st.state == "too new":
            raise SchemaTooNew(f"the database holds {st.name} schema version {st.have}; this txcl knows up "
                               f"to {st.want}")
        if st.state != "current":
            raise SchemaOutdated(f"the database's {st.name} schema is {st.state}; run `txcl db upgrade`")


_ADD_COLUMN = re.compile(r"^ALTER TABLE (\w+) ADD COLUMN (\w+) ", re.IGNORECASE)


def _already_there(t: Tx, statement: str) -> bool:
    """An ``ADD COLUMN`` whose column exists (SQLite has no ``IF NOT EXISTS`` for columns):
    a database whose version row is older than its tables is upgraded all the same."""
    found = _ADD_COLUMN.match(statement)
    if found is None:
        return False
    return t.one(t.backend.dialect.column_exists_sql, (found.group(1), found.group(2))) is not None


def migrate(backend: SqlBackend) -> list[ComponentStatus]:
    """Create or upgrade every component; returns what it found before (see the module docstring)."""
    dialect = backend.dialect

    def body(t: Tx) -> list[ComponentStatus]:
        t.lock_key("txcl_schema")
        t.run(dialect.ddl(_VERSIONS))
        have = _versions(t)
        found = [ComponentStatus(c.name, have.get(c.name), c.version) for c in COMPONENTS]
        for component, st in zip(COMPONENTS, found):
            if st.state == "too new":
                raise SchemaTooNew(f"the database holds {component.name} schema version {st.have}; this txcl "
                                   f"knows up to {component.version}")
            if st.state == "current":
                continue
            if st.have is not None:
                for version in range(st.have, component.version):
                    for statement in component.upgrades.get(version, ()):
                        if not _already_there(t, statement):
                            t.run(dialect.ddl(statement))
                    if version in component.backfills:
                        component.backfills[version](t)
            for statement in component.create:
                t.run(dialect.ddl(statement))
            t.run("INSERT INTO txcl_schema (component, version) VALUES (?, ?) "
                  "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                  (component.name, component.version))
        return found

    return backend.transact(body)


__all__ = ["Component", "ComponentStatus", "COMPONENTS", "migrate", "status", "check_current"]
