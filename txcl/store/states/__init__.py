"""The state names of every table with a ``status`` column, one module per table.

Each module states a table's states (a ``Literal`` type and :data:`StateMachine.states`), the
groups the procedures query by (``open``, ``terminal`` …), the states a row may be inserted in,
and every transition a procedure may write. :func:`sql_in` spells a group for a query, so a
status word in the SQL is always one of these. The tests check the SQL's words against them
(tests/store/test_store_states.py), and every SQLite database the test suite migrates carries
:func:`guard_triggers` (tests/conftest.py), so a transition no module allows fails the test
that wrote it.
"""

from __future__ import annotations

from txcl.store.states import (cancel_calls, children, interactions, lmtp_deliveries, queue_jobs, runs,
                               scheduled_events, suspends, terminals, units)
from txcl.store.states.machine import StateMachine, sql_in


def machines() -> tuple[StateMachine, ...]:
    return (runs.MACHINE, suspends.MACHINE, units.MACHINE, interactions.MACHINE, children.MACHINE,
            terminals.MACHINE, cancel_calls.MACHINE, scheduled_events.MACHINE, lmtp_deliveries.MACHINE,
            queue_jobs.MACHINE)


def guard_triggers() -> list[str]:
    """SQLite triggers that abort an insert in a state no module allows, or a transition no
    module allows (the tests install them; production databases do not carry them)."""
    out: list[str] = []
    for m in machines():
        pairs = ", ".join(f"'{a}>{b}'" for a, to in m.transitions.items() for b in sorted(to)) or "''"
        out.append(
            f"CREATE TRIGGER IF NOT EXISTS txcl_guard_{m.table}_update BEFORE UPDATE OF status ON {m.table} "
            f"WHEN OLD.status != NEW.status AND (OLD.status || '>' || NEW.status) NOT IN ({pairs}) "
            f"BEGIN SELECT RAISE(ABORT, 'state guard: a transition of {m.table} that no state module allows'); END")
        out.append(
            f"CREATE TRIGGER IF NOT EXISTS txcl_guard_{m.table}_insert BEFORE INSERT ON {m.table} "
            f"WHEN NEW.status NOT IN {sql_in(m.initial)} "
            f"BEGIN SELECT RAISE(ABORT, 'state guard: {m.table} inserted in a state no state module allows'); END")
    return out


__all__ = ["StateMachine", "sql_in", "machines", "guard_triggers"]
