"""Helpers shared by the continuation-store tests (imported by name from tests/store)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import txcl.store
from txcl.runoptions import unit_options
from txcl.store.records import Fence, RunSpec, UnitSpec
from txcl.store.store import DatabaseStore

START_MS = 1_800_000_000_000  # the fake clock's start


class FakeClock:
    def __init__(self, start: int = START_MS) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def open_store(db: Path | str, clock: FakeClock | None = None, node: str = "node-a") -> DatabaseStore:
    """A store on ``db`` (a SQLite path or a PostgreSQL URL)."""
    return txcl.store.open_store(db, clock=clock, node_id=node)


def unit_spec(**fields: Any) -> UnitSpec:
    """A UnitSpec with its options resolved from its kind, item policy, items and directives,
    as the continuations layer resolves them when it builds a unit."""
    if fields.get("options") is None:
        fields["options"] = unit_options(fields["kind"], fields.get("on_item_error", "fail"),
                                         len(fields.get("items", ())), fields.get("directives"))
    return UnitSpec(**fields)


def run_spec(rid: str = "rid-1", stack: str = "shop") -> RunSpec:
    return RunSpec(origin_rid=rid, entry_stack=stack, src="http", snapshot_id="snap-" + rid,
                   snapshot_body=b'{"rules": []}')


def unary(name: str = "enrich", *, budget_ms: int = 60_000, join_at: int | None = None, stack: str = "shop",
          scope: int = 100, payload: Any = None, into: str | None = None) -> UnitSpec:
    return unit_spec(kind="unary", op_name=name, items=[payload if payload is not None else {"q": name}],
                    op_stack=stack, op_scope=scope, dispatch_stage=f"{stack}/{scope}", dispatch_stack=stack,
                    join_at_scope=join_at, budget_ms=budget_ms, exec_target="https://w.example/" + name,
                    into=into, input_view={"view": name})


def itemized(name: str = "pay", n: int = 10, window: int = 3, *, policy: str = "fail", budget_ms: int = 60_000,
             join_at: int | None = None) -> UnitSpec:
    return unit_spec(kind="itemized", op_name=name, items=[{"i": i} for i in range(n)], op_stack="shop",
                    op_scope=100, dispatch_stage="shop/100", dispatch_stack="shop", join_at_scope=join_at,
                    window=window, on_item_error=policy, into="receipts", budget_ms=budget_ms,
                    exec_target="https://w.example/" + name)


def park_barrier(store, rid: str = "rid-1", units=None, stage: str = "shop/100"):
    units = units if units is not None else [unary()]
    return store.park_suspend(run_spec(rid), Fence(rid), stage=stage, kind="barrier",
                              envelope={"e": 0}, budgets={"ttl": 10, "fuel": 0}, units=units)


def complete(store, dispatch, output: Any = None, status: str = "completed"):
    """Callback path: `admit_terminal` with the dispatch's token, then `continue_release` (the live path)."""
    payload = output if output is not None else {"ok": dispatch.item_index}
    admit = store.admit_terminal(dispatch.opc, status, payload, source="callback", token=dispatch.token)
    release = None
    if admit.outcome == "admitted":
        release = store.continue_release(dispatch.opc, child_version=admit.child_version)
    return admit, release


def statements_sent(store, monkeypatch, *, whole: bool = False) -> list[str]:
    """Every statement the backend sends from now on (its first two words, with " MAX" when
    it reads a maximum; `whole`: its whole text), once each (a statement sent may go on to
    be executed)."""
    seen: list[str] = []
    inside = [False]
    backend = store.backend
    for name in ("_execute", "_send"):
        real = getattr(backend, name)

        def spy(conn, sql, params, _real=real):
            if inside[0]:
                return _real(conn, sql, params)
            text = sql.decode() if isinstance(sql, bytes) else str(sql)
            words = re.sub(r"\$\d+", "?", text).split()  # (PostgreSQL's placeholders as SQLite's)
            seen.append(" ".join(words) if whole else " ".join(words[:2]) + (" MAX" if "MAX(" in text else ""))
            inside[0] = True
            try:
                return _real(conn, sql, params)
            finally:
                inside[0] = False

        monkeypatch.setattr(backend, name, spy)
    return seen


# ---------------------------------------------------------------- workers for multiprocessing (spawn)


def proc_continue(path: str, opcs: list[str], barrier, out) -> None:
    """Run `continue_release` for every opc after all processes reach the barrier; report wins."""
    store = open_store(path, node="proc")
    barrier.wait()
    wins = [store.continue_release(opc).won for opc in opcs]
    out.put(sum(wins))
    store.close()


def proc_admit(path: str, opc: str, token: str, payload, barrier, out) -> None:
    store = open_store(path, node="proc")
    barrier.wait()
    res = store.admit_terminal(opc, "completed", payload, source="callback", token=token)
    out.put((res.outcome, payload))
    store.close()


def proc_try_release(path: str, run_id: str, barrier, out) -> None:
    store = open_store(path, node="proc")
    barrier.wait()
    out.put(store.try_release(run_id).won)
    store.close()


def proc_join_checks(path: str, run_ids: list[str], rids: list[str], seed: int, barrier, out) -> None:
    """The request side of a join race for many runs: join check at the floor (parks when not ready)."""
    import random
    import time

    store = open_store(path, node="req")
    rng = random.Random(seed)
    barrier.wait()
    merged = []
    for run_id, rid in zip(run_ids, rids):
        time.sleep(rng.random() * 0.003)  # the request side is a little slower: both orders occur
        res = join_at(store, run_id, Fence(rid), stage="shop/200", stack="shop", scope=200,
                               park_envelope={"parked": True}, park_state={})
        if res.merged:
            merged.append(run_id)
    out.put(("request", merged))
    store.close()


def proc_callbacks(path: str, jobs: list[tuple[str, str, str]], seed: int, barrier, out) -> None:
    """The callback side of a join race for many runs: `admit_terminal` then `continue_release`; reports the runs whose release it won."""
    import random
    import time

    store = open_store(path, node="cb")
    rng = random.Random(seed)
    barrier.wait()
    won = []
    for run_id, opc, token in jobs:
        time.sleep(rng.random() * 0.001)
        admit = store.admit_terminal(opc, "completed", {"run": run_id}, source="callback", token=token)
        if admit.outcome == "admitted" and store.continue_release(opc, child_version=admit.child_version).won:
            won.append(run_id)
    out.put(("callback", won))
    store.close()


def proc_complete_items(path: str, jobs: list[tuple[str, str, int]], barrier, out) -> None:
    """Complete itemized interactions (`admit_terminal` then `continue_release`) from another process; report releases won."""
    store = open_store(path, node="proc")
    barrier.wait()
    won = 0
    for opc, token, index in jobs:
        admit = store.admit_terminal(opc, "completed", {"i": index}, source="callback", token=token)
        assert admit.outcome == "admitted", admit
        won += store.continue_release(opc, child_version=admit.child_version).won
    out.put(won)
    store.close()


def join_at(store, run_id: str, fence, *, stage: str, stack: str, scope: int, **kwargs):
    """The join check at a frame (stack, scope): the deferred units the floor rule says are due
    there (as the continuations layer computes them from Run.joins), joined by the store."""
    from txcl.continuations.model import join_due

    due = [u.unit_id for u in store.list_units(run_id)
           if u.join_at_scope is not None and join_due(u.dispatch_stack, u.join_at_scope, stack, scope)]
    return store.join_check(run_id, fence, unit_ids=due, stage=stage, **kwargs)
