"""Scale-out on one machine: the 3-scope synchronous stack of bench_serve served by one
process and by `txcl serve --workers 2`, on each store backend, beside bare Starlette under
uvicorn with one process and with `--workers 2`, all measured round-robin in the same run.

    python bench/bench_scale.py [--seconds 3] [--rounds 3] [--connections 16] [--backend sqlite|postgresql|both]

Prints requests/s, p50/p99 latency (wrk's), the CPU per request of the serving processes (the
parent and its workers, from /proc), and the load generator's own CPU. Ratios, medians of the
rounds:

- 2 processes / 1 process, raw;
- the same "with the load generator's CPU given back": on a machine with C cores, two workers
  and the load generator share C cores. The model assumes the workers are CPU-bound and would
  turn the load generator's CPU-seconds into requests at their measured requests per
  CPU-second: rate' = rate + wrk_cpu_s / elapsed * (requests per server CPU-second). It is
  printed beside the raw figure, never instead of it;
- `txcl serve --workers 2` / bare Starlette under `uvicorn --workers 2`.

Goals on a 2-core machine: 2 processes ≥ 1.7× one (both backends); txcl --workers 2 ≥ 0.35
of bare Starlette --workers 2.

Then the itemized await (bench_nodes' callback-heavy load: itemized runs whose worker
callbacks are spread over the serving processes) with one and two processes on each backend:
items/s, the serving processes' CPU per item and — on PostgreSQL — the database server's
(its postmaster and backends, from /proc). From those per-item costs it prints the
throughput projected for N nodes, with its model: each node on its own core, one database
server with the cores given, no other bottleneck (network, locks):
items/s(N) = min(N / node CPU per item, server cores / server CPU per item).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _backends import Backends  # noqa: E402
from _timing import headline  # noqa: E402
from bench_serve import BARE_BODY, cpu_seconds, start, stop, write_stack  # noqa: E402
import bench_nodes  # noqa: E402

BARE_APP = f'''
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

BODY = {BARE_BODY!r}


async def endpoint(request):
    await request.body()
    return Response(BODY, media_type="application/json", headers={{"cache-control": "no-store"}})

app = Starlette(routes=[Route("/{{path:path}}", endpoint, methods=["GET", "POST", "HEAD"])])
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children (the workers of a supervising parent)."""
    total = cpu_seconds(pid)
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return total + sum(tree_cpu(int(c)) for c in children)


def start_uvicorn(folder: Path, workers: int) -> tuple[subprocess.Popen, str]:
    (folder / "barebench.py").write_text(BARE_APP)
    port = _free_port()
    cmd = [sys.executable, "-m", "uvicorn", "barebench:app", "--port", str(port), "--log-level", "warning",
           "--no-access-log", "--workers", str(workers)]
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                time.sleep(0.5 * workers)  # every worker process up
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("uvicorn did not start")


_LATENCY = re.compile(r"^\s+(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)


def wrk(url: str, seconds: int, connections: int) -> tuple[float, dict[str, float], float]:
    """(requests/s, {p50, p99} in ms, the load generator's CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", url + "/bench"],
                         capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    latency = {f"p{p}": float(v) * scale[u] for p, v, u in _LATENCY.findall(out)}
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rate, latency, used


def measure(url: str, pid: int, seconds: int, connections: int) -> dict[str, float]:
    wrk(url, 1, connections)  # warm-up
    cpu0 = tree_cpu(pid)
    rate, latency, load_cpu = wrk(url, seconds, connections)
    server_cpu = tree_cpu(pid) - cpu0
    per_cpu = rate * seconds / server_cpu if server_cpu > 0 else float("nan")
    given_back = rate + load_cpu / seconds * per_cpu
    return {"rate": rate, "p50": latency.get("p50", float("nan")), "p99": latency.get("p99", float("nan")),
            "cpu_ms_per_req": 1000 / per_cpu if per_cpu else float("nan"), "load_cpu": load_cpu / seconds,
            "given_back": given_back}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--runs", type=int, default=4, help="itemized runs at once")
    parser.add_argument("--items", type=int, default=300, help="items per itemized run")
    parser.add_argument("--server-cores", type=int, default=4, help="the database server's cores, for the projection")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench_scale needs wrk (apt-get install wrk)")
    names = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    py = sys.executable
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, Backends(names) as backends:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        write_stack(ws)
        variants: dict[str, tuple[str, object]] = {"bare, 1 process": ("uvicorn", 1),
                                                    "bare, uvicorn --workers 2": ("uvicorn", 2)}
        for name, fresh in backends:
            db = fresh()
            for n in (1, 2):
                variants[f"txcl {name}, {n} process{'es' if n > 1 else ''}"] = (
                    "txcl", [py, "-m", "txcl", "serve", str(ws), "--port", "0", "--db", db, "--workers", str(n)])
        for _ in range(args.rounds):
            for label, (kind, spec) in variants.items():
                if kind == "uvicorn":
                    proc, url = start_uvicorn(Path(tmp), int(spec))  # type: ignore[arg-type]
                else:
                    proc, url = start(spec, ws)  # type: ignore[arg-type]
                    if "--workers" in spec and spec[-1] != "1":  # type: ignore[operator]
                        time.sleep(2.0)  # the second worker up too
                try:
                    results.setdefault(label, []).append(measure(url, proc.pid, args.seconds, args.connections))
                finally:
                    stop(proc)
                    proc.wait(20)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"load: wrk -t2 -c{args.connections}, {args.seconds}s per measurement, {args.rounds} rounds, medians; "
          f"{cores} cores")
    print(f"{'':<34} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'CPU ms/req':>10} {'wrk CPU':>8} {'given back':>10}")

    def med(label: str, key: str) -> float:
        return statistics.median(r[key] for r in results[label])

    for label in variants:
        print(f"{label:<34} {med(label, 'rate'):>8.0f} {med(label, 'p50'):>7.2f} {med(label, 'p99'):>7.2f} "
              f"{med(label, 'cpu_ms_per_req'):>10.3f} {med(label, 'load_cpu'):>8.2f} {med(label, 'given_back'):>10.0f}")
    print("given back: the requests/s if the workers also had the load generator's CPU, at their measured "
          "requests per CPU-second (a model; the raw figure is the measurement)")

    def ratio(a: str, b: str, key: str = "rate") -> float:
        return statistics.median(x[key] / y["rate"] for x, y in zip(results[a], results[b]))

    for name in names:
        one, two = f"txcl {name}, 1 process", f"txcl {name}, 2 processes"
        raw, back = ratio(two, one), ratio(two, one, "given_back")
        print(f"{name}: 2 processes / 1 = {raw:.2f} raw, {back:.2f} with the load generator's CPU given back")
        headline(f"txcl serve --workers 2 ({name})", med(two, "rate"), "req/s", baseline="1 process, same run",
                 ratio=raw, goal="ratio ≥ 1.7")
        headline(f"txcl serve --workers 2 ({name}), load CPU given back", med(two, "given_back"), "req/s",
                 baseline="1 process, same run", ratio=back, goal="ratio ≥ 1.7")
    bare2 = "bare, uvicorn --workers 2"
    for name in names:
        two = f"txcl {name}, 2 processes"
        versus = ratio(two, bare2)
        print(f"{name}: txcl --workers 2 / bare uvicorn --workers 2 = {versus:.2f}")
        headline(f"txcl serve --workers 2 ({name}) vs bare Starlette", med(two, "rate"), "req/s",
                 baseline="bare Starlette, uvicorn --workers 2, same run", ratio=versus, goal="ratio ≥ 0.35")
    itemized(names, args)


def server_cpu(backends: Backends) -> float | None:
    """CPU seconds of the benchmark's PostgreSQL server: the postmaster, its live backends, and
    the backends that have exited (their time is the postmaster's children's)."""
    server = backends.server
    if server is None:
        return None
    try:
        pid = int((server.datadir / "postmaster.pid").read_text().split()[0])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    waited = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    return tree_cpu(pid) + waited


def itemized(names: list[str], args: argparse.Namespace) -> None:
    print(f"\nitemized await: {args.runs} runs x {args.items} items at once, callbacks spread over the processes")
    print(f"{'':<30} {'items/s':>8} {'node CPU ms/item':>17} {'DB server CPU ms/item':>22}")
    costs: dict[str, tuple[float, float | None]] = {}
    with Backends(names) as backends:
        for name, fresh in backends:
            rates = {}
            for nodes in (1, 2):
                before = server_cpu(backends) if name == "postgresql" else None
                rate, node_ms = bench_nodes.load(nodes, fresh(), args.runs, args.items, 25)
                after = server_cpu(backends) if name == "postgresql" else None
                db_ms = (after - before) * 1000 / (args.runs * args.items) if before is not None and after else None
                rates[nodes] = rate
                label = f"{name}, {nodes} process{'es' if nodes > 1 else ''}"
                shown = f"{db_ms:>22.2f}" if db_ms is not None else f"{'(in the node)':>22}"
                print(f"{label:<30} {rate:>8.0f} {node_ms or float('nan'):>17.2f} {shown}")
                if nodes == 1:
                    costs[name] = (node_ms or float("nan"), db_ms)
            ratio = rates[2] / rates[1]
            print(f"{name}: 2 processes / 1 = {ratio:.2f}")
            headline(f"itemized await, 2 processes ({name})", rates[2], "items/s", baseline="1 process, same run",
                     ratio=ratio)
        if "sqlite" in costs and "postgresql" in costs:
            print(f"node CPU per item, PostgreSQL / SQLite: {costs['postgresql'][0] / costs['sqlite'][0]:.2f} "
                  "(goal ≤ 1.25)")
    if "postgresql" in costs and costs["postgresql"][1]:
        node_ms, db_ms = costs["postgresql"]
        print(f"projection for N PostgreSQL nodes (model: a core per node, {args.server_cores} database server "
              "cores, nothing else limits): items/s = min(N / node CPU per item, server cores / server CPU per item)")
        for n in (1, 2, 4, 8, 16):
            projected = min(n * 1000 / node_ms, args.server_cores * 1000 / db_ms)
            print(f"  {n:>2} nodes: {projected:8.0f} items/s")


if __name__ == "__main__":
    main()
