"""Itemized await throughput: 1 000 items, window 25, against
a local worker on 127.0.0.1 that acks 202 and calls back at once.

Two figures per store backend, with durable commits (SQLite WAL, synchronous=FULL;
PostgreSQL with fsync and synchronous_commit = on, a throwaway server of this run):

1. end to end through `txcl serve`: request → park → 1 000 worker POSTs (25 in flight) →
   1 000 HTTP callbacks → release → resume → run completed; items/s from the request to the
   completed run;
2. in-process (the same engine and store, callbacks admitted with exactly the admit and continue calls the
   callback endpoint makes): items/s and the store's write transactions (commits) per item.

Wall-clock figures move with the machine's load, so each part also reports CPU time per item
(Linux: the `txcl serve` process from /proc; in-process: this process, worker included) —
compare those between builds on a shared machine.

    python bench/bench_itemized.py [--items 1000] [--window 25] [--backend sqlite|postgresql|both]
                                   [--baseline REF]

`--baseline REF` also runs the in-process part with the txcl of git revision REF (a temporary
worktree, driven by this file in a child process) on the same backend in the same run, and
prints the ratio of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _backends import Backends  # noqa: E402
from _baseline import baseline_tree, call_in_baseline  # noqa: E402
from _serve import start_serve  # noqa: E402
from _timing import headline, report  # noqa: E402


class _Poster(threading.local):
    """One keep-alive connection per callback thread."""

    conn: http.client.HTTPConnection | None = None


class Worker:
    """Acks 202, then posts `{"status": "completed", "output": {"i": <index>}}` from a pool."""

    def __init__(self, deliver=None, pool: int = 16, bases: list[str] | None = None):
        self.deliver = deliver  # in-process: deliver(opc, output) instead of an HTTP callback
        self.bases = bases  # callbacks spread over these servers (item index modulo), not the callback URL's
        self.pool = ThreadPoolExecutor(pool)
        self.local = _Poster()
        self.received = 0
        worker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # answer each ack at once on a kept-alive connection (without it Nagle's algorithm
            # and delayed ACKs hold every 202 back ~40 ms, capping the figure near window / 0.04 s)
            disable_nagle_algorithm = True

            def log_message(self, *args):  # noqa: ANN002
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                token = self.headers.get("X-Txco-Continuation-Token")
                payload = b'{"job_id": "j"}'
                self.send_response(202)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                worker.received += 1
                worker.pool.submit(worker.answer, body["_txc"], token)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket.listen(512)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/pay"

    def answer(self, txc: dict, token: str) -> None:
        output = {"i": txc["item_index"], "approved": txc["item_index"] % 7 != 3}
        if self.deliver is not None:
            self.deliver(txc["op_continuation_id"], output)
            return
        url = urllib.parse.urlsplit(txc["callback_url"])
        if self.bases:
            url = url._replace(netloc=urllib.parse.urlsplit(self.bases[txc["item_index"] % len(self.bases)]).netloc)
        data = json.dumps({"status": "completed", "output": output}).encode()
        for _ in range(3):
            try:
                conns = self.local.__dict__.setdefault("by_host", {})
                self.local.conn = conns.get(url.netloc)
                if self.local.conn is None:
                    self.local.conn = conns[url.netloc] = http.client.HTTPConnection(url.hostname, url.port,
                                                                                      timeout=30)
                self.local.conn.request("POST", url.path, data, {"Content-Type": "application/json",
                                                                 "Authorization": f"Bearer {token}"})
                response = self.local.conn.getresponse()
                response.read()
                return
            except (OSError, http.client.HTTPException):
                self.local.__dict__.get("by_host", {}).pop(url.netloc, None)

    def close(self) -> None:
        self.server.shutdown()
        self.pool.shutdown(wait=False)


def _tree(root: Path, url: str, items: int, window: int) -> Path:
    files = {
        "OPS/pay/50/decode.txcl": 'WHEN ._txc.src == "http"\nEMIT .req = &json(&b64decode(._txc.web.req.body))',
        "OPS/pay/100/charge.txcl": f'WITH mode = "async", each = .req.records, window = {window}, into = "results", '
                                   f'timeout = "10m"\nEXEC "{url}"',
        "OPS/pay/200/count.txcl": "EMIT .count = &len(.results)",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    (root / "records.json").write_text(json.dumps({"records": [{"id": i} for i in range(items)]}))
    return root


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of a process so far (Linux /proc), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def end_to_end(items: int, window: int, db: str) -> tuple[float, float | None, float]:
    """(items/s, serve CPU ms per item or None, this process's CPU ms per item: worker + poll)."""
    from txcl.continuations.service import open_run_store

    worker = Worker()
    with tempfile.TemporaryDirectory() as tmp:
        ws = _tree(Path(tmp), worker.url, items, window)
        proc, base = start_serve(str(ws), "--db", str(db), "--trace-mode", "off", "--continuation-sweep-period", "0")
        try:
            body = (ws / "records.json").read_bytes()
            store = open_run_store(db)
            serve_cpu0 = _proc_cpu(proc.pid)
            own_cpu0 = time.process_time()
            started = time.perf_counter()
            req = urllib.request.Request(base + "/pay", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    status = resp.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            run = None
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                runs = store.list_runs()
                if runs and runs[0].status in ("completed", "failed", "expired"):
                    run = runs[0]
                    break
                time.sleep(0.005)
            elapsed = time.perf_counter() - started
            serve_cpu1 = _proc_cpu(proc.pid)
            own_cpu = time.process_time() - own_cpu0
            assert run is not None and run.status == "completed", (status, run)
            assert run.result["count"] == items
            store.close()
            serve_ms = None if serve_cpu0 is None or serve_cpu1 is None else (serve_cpu1 - serve_cpu0) * 1000 / items
            return items / elapsed, serve_ms, own_cpu * 1000 / items
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
            worker.close()


def in_process(items: int, window: int, db: str) -> tuple[float, float, float]:
    """(items/s, commits per item, process CPU ms per item: engine, store and worker)."""
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Completed, Suspended

    with tempfile.TemporaryDirectory() as tmp:
        loop_box: dict = {}
        done = threading.Event()
        claims: list = []

        def deliver(opc: str, output: dict) -> None:
            fut = asyncio.run_coroutine_threadsafe(service.complete(opc, "completed", output, source="cli"),
                                                   loop_box["loop"])
            _, release = fut.result()
            if release is not None and release.won:
                claims.append(release.claim)
                done.set()

        worker = Worker(deliver)
        ws = _tree(Path(tmp), worker.url, items, window)
        store = open_run_store(db)
        service = ContinuationService(store, Settings().evolve(trace_mode="off"), workspace=ws)
        interp = service.interpreter(load_ops(ws))
        commits0 = store.commit_count()
        records = json.loads((ws / "records.json").read_text())

        cpu = [0.0]

        async def main() -> float:
            loop_box["loop"] = asyncio.get_running_loop()
            cpu0 = time.process_time()
            started = time.perf_counter()
            outcome = await interp.run({"req": records}, "pay")
            assert isinstance(outcome, Suspended), outcome
            while not done.is_set():
                await asyncio.sleep(0.002)
            final = await service.drive_resume(claims[0])
            elapsed = time.perf_counter() - started
            cpu[0] = time.process_time() - cpu0
            assert isinstance(final, Completed) and final.envelope["count"] == items
            await service.drain_tasks(10)
            await service.aclose()
            return elapsed

        elapsed = asyncio.run(main())
        worker.close()
        store.close()
        return items / elapsed, (store.commit_count() - commits0) / items, cpu[0] * 1000 / items


def main() -> None:
    import statistics

    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--window", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--baseline", metavar="REF", default=None,
                        help="also run the in-process part with the txcl of this git revision")
    parser.add_argument("--skip-serve", action="store_true", help="only the in-process part")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    names = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with contextlib.ExitStack() as stack:
        tree = stack.enter_context(baseline_tree(args.baseline)) if args.baseline else None
        backends = stack.enter_context(Backends(names))
        for name, fresh in backends:
            print(f"itemized await: {args.items} items, window {args.window}, {name} durable commits "
                  f"(cpu count {os.cpu_count()}, load average {load:.1f}); medians of {args.repeat} runs")
            inproc, base = [], []
            for _ in range(args.repeat):
                if tree is None:
                    inproc.append(in_process(args.items, args.window, fresh()))
                    continue
                # against a baseline both builds run in a fresh child process each, rounds
                # alternating, so drifting load and a warm process favour neither
                inproc.append(call_in_baseline(HERE.parent, __file__, "in_process", args.items, args.window, fresh()))
                base.append(call_in_baseline(tree, __file__, "in_process", args.items, args.window, fresh()))
            report(f"[{name}] in-process (engine + store, direct admits)", statistics.median(r for r, _, _ in inproc),
                   "items/s", ">= 500")
            report("  store write transactions per item", statistics.median(c for _, c, _ in inproc), "commits")
            cpu = statistics.median(m for _, _, m in inproc)
            report("  process CPU per item (engine, store, worker)", cpu, "ms")
            headline(f"itemized await, CPU per item ({args.items} items), {name}", cpu, "ms",
                     goal="flat from 1,000 to 10,000 items")
            if tree is not None:
                base_rate = statistics.median(r for r, _, _ in base)
                base_cpu = statistics.median(m for _, _, m in base)
                report(f"  baseline {args.baseline}: items/s", base_rate, "items/s")
                report(f"  baseline {args.baseline}: CPU per item", base_cpu, "ms")
                report("  this build / baseline, items/s", statistics.median(r for r, _, _ in inproc) / base_rate, "×")
                report("  this build / baseline, CPU per item", cpu / base_cpu, "×")
            if args.skip_serve:
                continue
            e2e = [end_to_end(args.items, args.window, fresh()) for _ in range(args.repeat)]
            report(f"[{name}] end to end via txcl serve (HTTP dispatch + callbacks)",
                   statistics.median(r for r, _, _ in e2e), "items/s", ">= 500")
            report("  best end-to-end run", max(r for r, _, _ in e2e), "items/s")
            serve_ms = [m for _, m, _ in e2e if m is not None]
            if serve_ms:
                report("  txcl serve CPU per item", statistics.median(serve_ms), "ms")
            report("  worker + poller CPU per item (this process)", statistics.median(m for _, _, m in e2e), "ms")


if __name__ == "__main__":
    main()
