"""The state names of every table: the SQL uses only known states, writes only allowed
transitions, and the test databases refuse any other (see txcl.store.states)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from txcl.store.states import StateMachine, guard_triggers, machines, sql_in

STORE = Path(__file__).resolve().parents[2] / "txcl" / "store"
BY_TABLE = {m.table: m for m in machines()}
ALL_STATES = {s for m in machines() for s in m.states}
SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE)\b", re.IGNORECASE)


def _sql_texts() -> list[tuple[str, int, str]]:
    """Every SQL string in the store's code (an f-string's literal parts, joined with a
    placeholder where its values go)."""
    out = []
    for path in sorted(STORE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values)
            if text and SQL_START.match(text) and "status" in text:
                out.append((str(path.relative_to(STORE.parent.parent)), node.lineno, text))
    return out


SQL = _sql_texts()
COMPARED = re.compile(r"\bstatus\s*(?:=|!=|<>)\s*'(\w+)'", re.IGNORECASE)
IN_LIST = re.compile(r"\bstatus\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", re.IGNORECASE)
UPDATE_SET = re.compile(r"^\s*UPDATE\s+(\w+)\s+SET\s+(?:.*?,\s*)?status\s*=\s*'(\w+)'(.*)$", re.IGNORECASE | re.DOTALL)
WHERE_FROM = re.compile(r"\bWHERE\b.*?\bstatus\s*(?:=\s*'(\w+)'|IN\s*\(([^)]*)\))", re.IGNORECASE | re.DOTALL)


def test_the_store_has_sql_with_states_to_check():
    assert len(SQL) > 50  # the scan finds the procedures' statements


def test_every_status_word_in_the_sql_is_a_known_state():
    unknown = []
    for where, line, text in SQL:
        words = COMPARED.findall(text) + [w for group in IN_LIST.findall(text) for w in re.findall(r"'(\w+)'", group)]
        unknown += [f"{where}:{line}: {w}" for w in words if w not in ALL_STATES]
    assert unknown == []


def test_every_literal_transition_written_is_allowed():
    """``UPDATE t SET status = 'new' … WHERE status = 'old'`` (or ``IN (…)``): old → new must be
    one of the table's transitions."""
    checked, refused = 0, []
    for where, line, text in SQL:
        found = UPDATE_SET.match(text)
        if not found:
            continue
        table, new, rest = found.group(1), found.group(2), found.group(3)
        assert table in BY_TABLE, f"{where}:{line}: a status of table {table} no state module describes"
        assert new in BY_TABLE[table].states, f"{where}:{line}: {table} has no state {new}"
        source = WHERE_FROM.search(rest)
        if source is None:
            continue
        olds = [source.group(1)] if source.group(1) else re.findall(r"'(\w+)'", source.group(2))
        for old in olds:
            checked += 1
            if not BY_TABLE[table].allows(old, new):
                refused.append(f"{where}:{line}: {table} {old} -> {new}")
    assert refused == []
    assert checked >= 10


def test_a_state_machine_naming_an_undeclared_state_is_refused():
    with pytest.raises(ValueError, match="not declared"):
        StateMachine("t", states=("a",), initial=("a",), transitions={"a": frozenset({"b"})})


def test_groups_spell_as_sql():
    assert sql_in(("queued", "running")) == "('queued', 'running')"


def test_the_guard_refuses_a_transition_no_module_allows(tmp_path):
    import sqlite3

    db = sqlite3.connect(tmp_path / "g.db")
    db.execute("CREATE TABLE runs (run_id TEXT, status TEXT)")
    for table in ("suspends", "await_units", "interactions", "item_children", "terminals", "cancel_calls",
                  "scheduled_events", "lmtp_deliveries", "queue_jobs"):
        db.execute(f"CREATE TABLE {table} (status TEXT)")
    for ddl in guard_triggers():
        db.execute(ddl)
    db.execute("INSERT INTO runs VALUES ('r', 'active')")
    db.execute("UPDATE runs SET status = 'waiting'")  # allowed
    db.execute("UPDATE runs SET status = 'resuming'")
    db.execute("UPDATE runs SET status = 'completed'")
    with pytest.raises(sqlite3.IntegrityError, match="state guard"):
        db.execute("UPDATE runs SET status = 'active'")  # a finished run never runs again
    with pytest.raises(sqlite3.IntegrityError, match="state guard"):
        db.execute("INSERT INTO runs VALUES ('s', 'completed')")  # no run is born finished
    with pytest.raises(sqlite3.IntegrityError, match="state guard"):
        db.execute("INSERT INTO terminals VALUES ('timed_out')")
    db.execute("INSERT INTO scheduled_events VALUES ('pending')")
    db.execute("UPDATE scheduled_events SET status = 'claimed'")
    db.execute("UPDATE scheduled_events SET status = 'fired'")
    with pytest.raises(sqlite3.IntegrityError, match="state guard"):
        db.execute("UPDATE scheduled_events SET status = 'pending'")  # a fired key is spent


def test_the_test_databases_carry_the_guard(tmp_path):
    """The suite's SQLite stores refuse a forbidden transition (tests/conftest.py installs the
    guards), so every store and continuation test checks the transitions it causes."""
    import txcl.store

    store = txcl.store.open_store(tmp_path / "s.db")
    try:
        names = store.backend.read(lambda t: [r[0] for r in t.all(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'txcl_guard_%'")])
    finally:
        store.close()
    assert len(names) == 2 * len(machines())
