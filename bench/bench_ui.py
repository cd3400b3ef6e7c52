"""The dashboard with many runs in the store: `python bench/bench_ui.py [runs] [--db URL]`.

Fills a fresh store (SQLite by default; `--db postgresql://…` for a server) with `runs` runs
(default 100,000; states and stacks mixed as a busy server would have them, a few with resume
claims), then answers the runs page through the dashboard's ASGI app (the query, the template,
the HTML) — plain, filtered by state, by stack, by the start of a run id, 200 pages deep, and
the `?fragment=1` refresh — and prints the median wall time of each (target: 200 ms), beside
the store's own `list_runs(limit=50)` measured in the same run.

Second figure: the cost the dashboard's path check adds to every other request of
`txcl serve`, with --ui off and on (in-process ASGI calls of a 3-scope sync stack).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STATES = ["completed"] * 70 + ["failed"] * 8 + ["expired"] * 4 + ["waiting"] * 15 + ["active"] * 2 + ["resuming"]
STACKS = ["checkout", "research", "billing", "search", "mail"]


def fill(store, n: int) -> list[str]:
    from txcl.ids import new_claim_token, new_rcid, new_run_id, ulid

    start = time.time_ns() // 1_000_000 - n * 10
    ids: list[str] = []

    def batch(t, rows, claims) -> None:
        t.many("INSERT INTO runs (run_id, rcid, origin_rid, entry_stack, src, status, cur_stage, cur_visit, "
               "expires_ms, created_ms, updated_ms, finished_ms, fail_reason) "
               "VALUES (?, ?, ?, ?, 'http', ?, ?, 1, ?, ?, ?, ?, ?)", rows)
        t.many("INSERT INTO resume_claims (run_id, stage, visit, claim_token, owner, segment_id, attempt, "
               "claimed_ms, heartbeat_ms) VALUES (?, ?, 1, ?, 'bench', ?, ?, ?, ?)", claims)

    rows, claims = [], []
    for i in range(n):
        run_id = new_run_id(start + i * 10)
        ids.append(run_id)
        state = STATES[i % len(STATES)]
        stack = STACKS[(i * 7) % len(STACKS)]
        created = start + i * 10
        finished = created + 500 if state in ("completed", "failed", "expired") else None
        rows.append((run_id, new_rcid(), ulid(start + i * 10), stack, state, f"{stack}/300", created + 600_000, created,
                     created + 500, finished, "timed_out" if state == "expired" else None))
        if i % 50 == 0:
            claims.append((run_id, f"{stack}/300", new_claim_token(), f"seg-{i}", 1 + i % 3, created, created))
        if len(rows) == 5000:
            store.backend.transact(lambda t, r=rows, c=claims: batch(t, r, c))
            rows, claims = [], []
    if rows:
        store.backend.transact(lambda t: batch(t, rows, claims))
    return ids


async def _page_ms(app, path: str, repeat: int) -> float:
    import httpx

    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        response = await client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            response = await client.get(path)
            samples.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200
    return statistics.median(samples)


def bench_pages(db: str, n: int) -> None:
    from txcl.continuations.service import open_run_store
    from txcl.runtime.config import Settings
    from txcl.ui.app import Dashboard

    class _Tree:
        def user_stacks(self) -> list[str]:
            return list(STACKS)

    class _State:  # what the dashboard reads of serve's state
        def __init__(self, store):
            self.store = store
            self.tree = _Tree()
            self.extensions = []

    store = open_run_store(db)
    t0 = time.perf_counter()
    ids = fill(store, n)
    print(f"filled {n:,} runs in {time.perf_counter() - t0:.1f}s ({db if '://' in db else 'SQLite file'})")
    dashboard = Dashboard(settings=Settings(ui=True), state=_State(store))
    baseline = statistics.median(_timed(lambda: store.list_runs(limit=50)) for _ in range(15))
    cursor_view = None
    for _ in range(200):  # walk 200 pages deep for the cursor of page 201
        from txcl.ui.views import runs_view

        cursor_view = runs_view(store, state=None, stack=None, text=None,
                                cursor=cursor_view["next_cursor"] if cursor_view else None)
    deep = cursor_view["next_cursor"] if cursor_view else ""
    cases = [
        ("runs page", "/_txc/ui/"),
        ("runs page, state=waiting", "/_txc/ui/?state=waiting"),
        ("runs page, stack=billing", "/_txc/ui/?stack=billing"),
        ("runs page, id prefix", f"/_txc/ui/?q={ids[n // 2][:14]}"),
        ("runs page, 200 pages deep", f"/_txc/ui/?before={deep}"),
        ("runs page refresh (?fragment=1)", "/_txc/ui/?fragment=1"),
        ("run page (a run without units)", f"/_txc/ui/runs/{ids[-1]}"),
    ]
    print(f"{'':<40}{'median ms':>10}{'vs list_runs':>14}   target 200 ms")
    print(f"{'store.list_runs(limit=50) (baseline)':<40}{baseline:>10.2f}{1.0:>13.1f}x")
    for name, path in cases:
        ms = asyncio.run(_page_ms(dashboard, path, 15))
        print(f"{name:<40}{ms:>10.2f}{ms / baseline:>13.1f}x   {'ok' if ms <= 200 else 'OVER'}")
    store.close()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def bench_path_check() -> None:
    """µs per in-process request of a sync stack through serve's app, --ui off and on."""
    import httpx

    from txcl.runtime.config import Settings
    from txcl.serve.app import build_state, create_app

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        for scope in (100, 200, 300):
            (ws / "OPS" / "site" / str(scope)).mkdir(parents=True)
            (ws / "OPS" / "site" / str(scope) / "r.txcl").write_text(f"EMIT .s{scope} = true\n")
        results = {}
        for ui in (False, True):
            state = build_state(ws, Settings(ui=ui, trace_mode="off", db=str(ws / f"db{ui}.db")))
            app = create_app(state)

            async def go() -> float:
                transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
                async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                    for _ in range(200):
                        await client.get("/x")
                    samples = []
                    for _ in range(7):
                        t0 = time.process_time()
                        for _ in range(500):
                            await client.get("/x")
                        samples.append((time.process_time() - t0) / 500 * 1e6)
                    return statistics.median(samples)

            results[ui] = asyncio.run(go())
            asyncio.run(state.aclose())
        print("\nserve, 3-scope sync stack, CPU µs per request (httpx in-process, median of 7 x 500)")
        print(f"  --ui off (baseline)  {results[False]:8.1f}")
        print(f"  --ui on              {results[True]:8.1f}   ({results[True] / results[False]:.3f}x)")


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--db")]
    n = int(args[0]) if args else 100_000
    db = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--db=")), None)
    with tempfile.TemporaryDirectory() as tmp:
        bench_pages(db or str(Path(tmp) / "bench-ui.db"), n)
    bench_path_check()
    return 0


if __name__ == "__main__":
    sys.exit(main())
