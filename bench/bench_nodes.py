"""Two `txcl serve` nodes against one on the same PostgreSQL database, under a callback-heavy
load: itemized runs whose worker callbacks are spread over the nodes (item index modulo the
node count), several runs at once. Printed: items/s for one node and for two, their ratio, and
the serve CPU per item (all nodes together).

    python bench/bench_nodes.py [--runs 4] [--items 500] [--window 25] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _backends import Backends  # noqa: E402
from _serve import TXCL  # noqa: E402
from bench_itemized import Worker, _proc_cpu, _tree  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(ws: Path, db: str, port: int, front: str, node: str) -> subprocess.Popen:
    proc = subprocess.Popen([TXCL, "serve", str(ws), "--port", str(port), "--db", db, "--trace-mode", "off",
                             "--callback-base-url", front, "--node-id", node, "--continuation-sweep-period", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if re.search(r"on http://127\.0\.0\.1:\d+", line):
            break
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc


def load(nodes: int, db: str, runs: int, items: int, window: int) -> tuple[float, float | None]:
    """(items/s over all runs, serve CPU ms per item over all nodes)."""
    from txcl.continuations.service import open_run_store

    ports = [_free_port() for _ in range(nodes)]
    bases = [f"http://127.0.0.1:{p}" for p in ports]
    worker = Worker(bases=bases)
    with tempfile.TemporaryDirectory() as tmp:
        ws = _tree(Path(tmp), worker.url, items, window)
        procs = [_start(ws, db, port, bases[0], f"node-{i}") for i, port in enumerate(ports)]
        try:
            store = open_run_store(db)
            body = (ws / "records.json").read_bytes()
            cpu0 = [_proc_cpu(p.pid) for p in procs]
            started = time.perf_counter()

            def request(i: int) -> None:
                req = urllib.request.Request(bases[i % nodes] + "/pay", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
                try:
                    urllib.request.urlopen(req, timeout=120).read()
                except urllib.error.HTTPError:
                    pass

            threads = [threading.Thread(target=request, args=(i,)) for i in range(runs)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                done = [r for r in store.list_runs(limit=runs + 5) if r.status in ("completed", "failed", "expired")]
                if len(done) >= runs:
                    break
                time.sleep(0.01)
            elapsed = time.perf_counter() - started
            cpu1 = [_proc_cpu(p.pid) for p in procs]
            finished = store.list_runs(limit=runs + 5)
            assert len(finished) == runs and all(r.status == "completed" and r.result["count"] == items
                                                 for r in finished), [(r.status, r.error) for r in finished]
            store.close()
            cpu = None if None in cpu0 or None in cpu1 else sum(b - a for a, b in zip(cpu0, cpu1))
            return runs * items / elapsed, None if cpu is None else cpu * 1000 / (runs * items)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(20)
            worker.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--window", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with Backends(["postgresql"]) as backends:
        results: dict[int, list[tuple[float, float | None]]] = {1: [], 2: []}
        for r in range(args.repeat):
            for nodes in ((1, 2) if r % 2 == 0 else (2, 1)):
                results[nodes].append(load(nodes, backends.fresh("postgresql"), args.runs, args.items, args.window))
    print(f"callback-heavy load on PostgreSQL: {args.runs} runs x {args.items} items, window {args.window}, "
          f"callbacks spread over the nodes; medians of {args.repeat}")
    for nodes, rows in results.items():
        rate = statistics.median(r for r, _ in rows)
        cpus = [c for _, c in rows if c is not None]
        cpu = f", serve CPU {statistics.median(cpus):.2f} ms/item (all nodes)" if cpus else ""
        print(f"  {nodes} node{'s' if nodes > 1 else ' '}: {rate:8.1f} items/s{cpu}")
    ratio = statistics.median(r for r, _ in results[2]) / statistics.median(r for r, _ in results[1])
    print(f"  two nodes : one node = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
