"""Pull queue and NATS against callback (push) workers, same run: itemized runs whose items go
to a worker written with the worker SDK, pushed to it (`txcl worker serve`, an http:// target),
pulled by it (`txcl worker pull`, a queue:// target) and taken from NATS JetStream
(`txcl worker nats`, a nats:// target, with a throwaway nats-server). The function answers at
once, so what is measured is the transport: dispatch, ack or claim or publish, the answer, its
admission, the release.

    python bench/bench_queue.py [--runs 4] [--items 200] [--window 25] [--rounds 3] [--backend sqlite|postgresql|both]

Prints, per backend and transport, medians over the rounds (the transports take turns): items/s
end to end, and CPU per item of the txcl serve process and of the worker process (from /proc);
then the ratios pull / push and nats / push.
"""

from __future__ import annotations

import argparse
import json
import re
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
from bench_itemized import _proc_cpu  # noqa: E402
from bench_nodes import _free_port  # noqa: E402

WORKER = '''
from txcl.worker import Worker

worker = Worker()


@worker.op("item")
async def item(job):
    return {"ok": job.item_index}
'''


def _tree(ws: Path, target: str, items: int, window: int) -> None:
    rule = ws / "OPS" / "pay" / "100" / "items.txcl"
    rule.parent.mkdir(parents=True)
    rule.write_text(f'WITH mode = "async", each = .records, window = {window}, into = "out", timeout = "5m"\n'
                    f'EXEC "{target}"\n')
    (ws / "OPS" / "pay" / "200").mkdir(parents=True)
    (ws / "OPS" / "pay" / "200" / "done.txcl").write_text("EMIT .done = true\n")
    (ws / "records.json").write_text(json.dumps({"records": [{"i": i} for i in range(items)]}))


def _wait_line(proc: subprocess.Popen, pattern: str) -> str:
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(pattern, line)
        if found:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return found.group(0)
    raise RuntimeError(f"{proc.args} stopped before printing {pattern!r}")


def one_round(transport: str, db: str, runs: int, items: int, window: int,
              nats_url: str | None = None) -> tuple[float, float, float]:
    """(items/s, serve CPU ms per item, worker CPU ms per item)."""
    from txcl.continuations.service import open_run_store

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (Path(tmp) / "benchworker.py").write_text(WORKER)
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        worker_port = _free_port()
        target = {"pull": "queue://item", "nats": "nats://item"}.get(transport,
                                                                     f"http://127.0.0.1:{worker_port}/item")
        _tree(ws, target, items, window)
        extra = ["--nats-url", nats_url] if transport == "nats" and nats_url else []
        serve = subprocess.Popen([TXCL, "serve", str(ws), "--port", str(port), "--db", db, "--trace-mode", "off",
                                  "--continuation-sweep-period", "0", *extra],
                                 stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        _wait_line(serve, r"on http://127\.0\.0\.1:\d+")
        if transport == "pull":
            # as many jobs at once as the runs keep out (a push worker takes every dispatch at once)
            cmd = [TXCL, "worker", "pull", "benchworker:worker", "--server", base, "--concurrency",
                   str(runs * window), "--wait", "5", "--log-level", "warning"]
        elif transport == "nats":
            cmd = [TXCL, "worker", "nats", "benchworker:worker", "--nats", str(nats_url), "--concurrency",
                   str(runs * window), "--log-level", "warning"]
        else:
            cmd = [TXCL, "worker", "serve", "benchworker:worker", "--port", str(worker_port)]
        worker = subprocess.Popen(cmd, cwd=tmp, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        _wait_line(worker, r"txcl: worker")
        try:
            store = open_run_store(db)
            body = (ws / "records.json").read_bytes()
            cpu0 = (_proc_cpu(serve.pid), _proc_cpu(worker.pid))
            started = time.perf_counter()

            def request() -> None:
                req = urllib.request.Request(base + "/", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
                try:
                    urllib.request.urlopen(req, timeout=300).read()
                except urllib.error.HTTPError:
                    pass

            threads = [threading.Thread(target=request) for _ in range(runs)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                finished = [r for r in store.list_runs(limit=runs + 5) if r.status in ("completed", "failed")]
                if len(finished) >= runs:
                    break
                time.sleep(0.02)
            elapsed = time.perf_counter() - started
            failed = [r for r in store.list_runs(limit=runs + 5) if r.status != "completed"]
            if failed:
                raise RuntimeError(f"{transport}: {len(failed)} runs did not complete")
            cpu1 = (_proc_cpu(serve.pid), _proc_cpu(worker.pid))
            for t in threads:
                t.join(10)
            store.close()
        finally:
            for proc in (worker, serve):
                proc.terminate()
                proc.wait(20)
        total = runs * items
        return total / elapsed, (cpu1[0] - cpu0[0]) * 1000 / total, (cpu1[1] - cpu0[1]) * 1000 / total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--window", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite")
    args = parser.parse_args()
    names = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    transports = ("push", "pull", "nats")
    from txcl.testing.nats import TempNats

    broker = TempNats.start()
    try:
        with Backends(names) as backends:
            for name in names:
                results: dict[str, list[tuple[float, float, float]]] = {t: [] for t in transports}
                for _ in range(args.rounds):
                    for transport in transports:
                        results[transport].append(one_round(transport, backends.fresh(name), args.runs,
                                                            args.items, args.window, broker.url))
                print(f"{name}: {args.runs} runs x {args.items} items, window {args.window}, {args.rounds} rounds")
                med = {}
                for transport, rows in results.items():
                    med[transport] = tuple(statistics.median(r[i] for r in rows) for i in range(3))
                    rate, serve_ms, worker_ms = med[transport]
                    print(f"  {transport:<5} {rate:8.1f} items/s   serve CPU {serve_ms:.2f} ms/item   "
                          f"worker CPU {worker_ms:.2f} ms/item")
                for transport in ("pull", "nats"):
                    print(f"  {transport} / push: {med[transport][0] / med['push'][0]:.2f}x items/s, serve CPU "
                          f"{med[transport][1] / med['push'][1]:.2f}x, worker CPU "
                          f"{med[transport][2] / med['push'][2]:.2f}x")
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
