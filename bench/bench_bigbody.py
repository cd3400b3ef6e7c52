"""Large request bodies on an async stack: `python bench/bench_bigbody.py [--mib 20]`.

A real `txcl serve` on a SQLite file, a worker on 127.0.0.1 that acks 202, and one request
whose body is N MiB of JSON to a stack whose first scope parks on an async op (its input is a
small SELECT; the envelope keeps the body). Reported per run: the time to the 202, the time
from the worker's callback to the finished run, the serve process's peak memory, the database
file and its WAL against the body size, and the longest `/_txc/healthz` answer meanwhile.
The baseline, measured in the same run, is the same body on a stack without an async op
(answered inline, nothing stored but its trace).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _serve import TXCL, start_serve  # noqa: E402


class Worker:
    """Acks every dispatch with 202 and keeps its callback URL and token."""

    def __init__(self) -> None:
        self.jobs: list[tuple[str, str]] = []
        self.arrived = threading.Event()
        worker = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # noqa: ANN002
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                worker.jobs.append((body["_txc"]["callback_url"], self.headers.get("X-Txco-Continuation-Token")))
                self.send_response(202)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
                worker.arrived.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/job"


def _post(url: str, data: bytes, headers: dict[str, str], timeout: float = 300) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _mib(path: Path) -> float:
    return path.stat().st_size / 2**20 if path.exists() else 0.0


def measure(mib: int, asynchronous: bool) -> dict[str, float]:
    worker = Worker()
    root = Path(tempfile.mkdtemp(prefix="txcl-bigbody-"))
    first = (f'SELECT .id\nWITH mode = "async", timeout = "5m"\nEXEC "{worker.url}"' if asynchronous
             else 'EMIT .seen = true')
    for rel, text in {"OPS/big/100/go.txcl": first, "OPS/big/200/after.txcl": "EMIT .after = 1"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    db = root / ".txcl-data" / "txcl.db"
    proc, url = start_serve(str(root), "--default-stack", "big", "--web-max-body-bytes", f"{mib * 2}MiB")
    stalls: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            urllib.request.urlopen(url + "/_txc/healthz", timeout=60).read()
            stalls.append(time.perf_counter() - t)
            time.sleep(0.02)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    body = json.dumps({"id": 1, "blob": ["x" * 1000 for _ in range(mib * 1024)]}).encode()
    out: dict[str, float] = {"body_mib": len(body) / 2**20}
    t0 = time.perf_counter()
    status, answer = _post(url + "/", body, {"Content-Type": "application/json"})
    out["answer_s"] = time.perf_counter() - t0
    out["status"] = status
    if asynchronous:
        assert status == 202, answer[:300]
        assert worker.arrived.wait(60)
        callback, token = worker.jobs[0]
        t1 = time.perf_counter()
        cb_status, _ = _post(callback, b'{"status": "completed", "output": {"ok": 1}}',
                             {"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        assert cb_status == 200, cb_status
        poll = json.loads(answer).get("continuation")
        while True:
            listed = subprocess.run([TXCL, "runs", "show", poll, "--workspace", str(root), "--json"],
                                    capture_output=True, text=True)
            if '"completed"' in listed.stdout or '"failed"' in listed.stdout:
                break
            time.sleep(0.05)
        out["callback_to_finished_s"] = time.perf_counter() - t1
    time.sleep(0.3)
    stop.set()
    prober.join()
    out["peak_rss_mib"] = _peak_rss_mib(proc.pid)
    out["db_mib"] = _mib(db)
    out["wal_mib"] = _mib(Path(f"{db}-wal"))
    out["healthz_max_s"] = max(stalls)
    proc.terminate()
    proc.wait(30)
    worker.server.shutdown()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=20)
    args = parser.parse_args()
    base = measure(args.mib, asynchronous=False)
    run = measure(args.mib, asynchronous=True)
    print(f"body {run['body_mib']:.1f} MiB")
    print(f"{'':<34} {'sync stack':>12} {'async stack':>12}")
    for key, label in [("answer_s", "answer (s)"), ("callback_to_finished_s", "callback -> finished (s)"),
                       ("peak_rss_mib", "serve peak RSS (MiB)"), ("db_mib", "database file (MiB)"),
                       ("wal_mib", "WAL (MiB)"), ("healthz_max_s", "longest healthz answer (s)")]:
        left = f"{base[key]:>12.2f}" if key in base else f"{'—':>12}"
        print(f"{label:<34} {left} {run.get(key, float('nan')):>12.2f}")
    print(f"database / body: {run['db_mib'] / run['body_mib']:.2f}x; answer time async / sync: "
          f"{run['answer_s'] / base['answer_s']:.2f}x")


if __name__ == "__main__":
    if os.name != "posix":
        sys.exit("this benchmark reads /proc (Linux)")
    main()
