"""Requests/s through `txcl serve` on loopback (a 3-scope synchronous stack) beside a bare
Starlette endpoint served by the same uvicorn settings, measured in the same run.

    python bench/bench_serve.py [--seconds 5] [--connections 8] [--rounds 3] [--python-load]

Load comes from wrk when installed (`apt-get install wrk`), else from a small asyncio+httpx
generator (several keep-alive connections, bounded by count and time). Both servers run as
subprocesses; each round measures them back to back after a warm-up. Prints the median
rates and the ratio (target: txcl >= 70% of bare). `txcl serve` runs with its defaults
(trace mode summary: every request's trace is written, off the request path); the figure
with `--trace-mode off` is printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import headline  # noqa: E402
SERVING_RE = re.compile(r"(http://127\.0\.0\.1:\d+)")

STACK = {
    "OPS/shop/0100/mark.txcl": """
        WHEN @web.req.method == "GET"
        EMIT .order.id = 42, .order.items = ["a", "b"]
    """,
    "OPS/shop/0200/copy.txcl": """
        WITH from = "order.id", to = "copied"
        EXEC "txco://copy"
    """,
    "OPS/shop/0300/answer.txcl": """
        WHEN .copied == 42
        EMIT .status = &concat("O", "K"), @web.res.headers.cache-control = "no-store"
    """,
}



def write_stack(ws: Path) -> None:
    """The benchmark's OPS tree (`STACK`) under `ws`."""
    for rel, text in STACK.items():
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).strip() + "\n", encoding="utf-8")


BARE_BODY = b'{"order":{"id":42,"items":["a","b"]},"copied":42,"status":"OK"}'


# ---------------------------------------------------------------- the bare server (subprocess mode)

def run_bare_server() -> None:
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from txcl.serve.server import bind_socket, uvicorn_config
    import uvicorn

    async def endpoint(request):
        await request.body()
        return Response(BARE_BODY, media_type="application/json", headers={"cache-control": "no-store"})

    app = Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST", "HEAD"])])
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    print(f"bare serving on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn_config(app, grace_s=1.0, log_level="warning"))
    server.run(sockets=[sock])


# ---------------------------------------------------------------- helpers

def start(cmd: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    proc = subprocess.Popen(cmd, cwd=cwd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:
        m = SERVING_RE.search(line)
        if m and "serving" in line:
            # drain stderr in the background so the server never blocks on a full pipe
            import threading

            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
            return proc, m.group(1)
    raise SystemExit(f"server did not start: {' '.join(cmd)} (exit {proc.wait()})")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def wrk_rate(url: str, seconds: float, connections: int) -> float:
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", url + "/bench"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"Requests/sec:\s*([0-9.]+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    if non2xx:
        raise SystemExit(f"{url}: {non2xx.group(1)} error answers during the run")
    if not m:
        raise SystemExit(f"cannot read wrk output:\n{out}")
    return float(m.group(1))


def python_rate(url: str, seconds: float, connections: int, max_requests: int = 200_000) -> float:
    import httpx

    async def main() -> float:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
            done = 0
            deadline = time.perf_counter() + seconds

            async def worker() -> None:
                nonlocal done
                while time.perf_counter() < deadline and done < max_requests:
                    r = await client.get("/bench")
                    if r.status_code != 200:
                        raise SystemExit(f"{url}: answer {r.status_code}")
                    done += 1

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(connections)))
            return done / (time.perf_counter() - started)

    return asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(url: str, pid: int, seconds: float, connections: int, use_wrk: bool) -> tuple[float, float]:
    """(requests/s, requests per CPU-second of the server process)."""
    fn = wrk_rate if use_wrk else python_rate
    fn(url, min(1.0, seconds), connections)  # warm-up
    cpu0 = cpu_seconds(pid)
    rate = fn(url, seconds, connections)
    cpu = cpu_seconds(pid) - cpu0
    total = rate * max(1, round(seconds)) if use_wrk else rate * seconds
    return rate, total / cpu if cpu > 0 else float("nan")


# ---------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python-load", action="store_true", help="use the Python load generator even if wrk exists")
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        run_bare_server()
        return
    use_wrk = shutil.which("wrk") is not None and not args.python_load
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        write_stack(ws)
        py = sys.executable
        servers = {
            "bare": [py, str(Path(__file__).resolve()), "--bare-server"],
            "txcl": [py, "-m", "txcl", "serve", str(ws), "--port", "0"],
            "txcl (trace off)": [py, "-m", "txcl", "serve", str(ws), "--port", "0", "--trace-mode", "off"],
        }
        rates: dict[str, list[float]] = {name: [] for name in servers}
        per_cpu: dict[str, list[float]] = {name: [] for name in servers}
        for _ in range(args.rounds):
            for name, cmd in servers.items():
                proc, url = start(cmd, ws)
                try:
                    import httpx

                    check = httpx.get(url + "/bench", timeout=10)
                    if check.status_code != 200:
                        raise SystemExit(f"{name}: {check.status_code} {check.text}")
                    rate, cpu_rate = measure(url, proc.pid, args.seconds, args.connections, use_wrk)
                    rates[name].append(rate)
                    per_cpu[name].append(cpu_rate)
                finally:
                    stop(proc)
    load = f"wrk -t1 -c{args.connections}" if use_wrk else f"httpx asyncio, {args.connections} connections"
    print(f"load: {load}, {args.seconds:g}s per measurement, {args.rounds} rounds, medians")
    print(f"{'':<22} {'requests/s':>12} {'req/CPU-s':>12}   per-round requests/s")
    for name in servers:
        print(f"{name:<22} {statistics.median(rates[name]):>12.0f} {statistics.median(per_cpu[name]):>12.0f}   "
              + ", ".join(f"{v:.0f}" for v in rates[name]))
    for name in ("txcl", "txcl (trace off)"):
        round_ratios = [t / b for t, b in zip(rates[name], rates["bare"])]
        cpu_ratio = statistics.median(per_cpu[name]) / statistics.median(per_cpu["bare"])
        print(f"ratio {name} / bare: {statistics.median(round_ratios) * 100:.1f} % of requests/s "
              f"(median of per-round ratios), {cpu_ratio * 100:.1f} % per server CPU-second   (target >= 70%)")
        # The headline compares requests per second of server CPU: with a load generator in
        # Python on the same two cores, requests/s is capped by the generator for both servers
        # alike and their ratio says little (it came out near 1 on a busy machine).
        headline(f"txcl serve, 3-scope sync stack ({'summary tracing' if name == 'txcl' else 'tracing off'})",
                 statistics.median(per_cpu[name]), "req/CPU-s",
                 baseline="bare Starlette on uvicorn, per server CPU-second",
                 ratio=cpu_ratio, goal="ratio ≥ 0.7 with summary tracing")


if __name__ == "__main__":
    main()
