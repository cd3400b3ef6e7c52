"""Instructions per unit of work, counted by valgrind — figures a busy machine cannot bend.

    python bench/bench_instructions.py [--n 1024] [--only walk-off,walk-summary,parse,cycle,…]

Timings on a shared machine move by a quarter from one minute to the next; the number of
instructions a piece of work executes does not. Each workload runs twice under
`valgrind --tool=callgrind` (nothing is written but the count): once doing the setup only
and once doing the setup and `--n` units, so the difference divided by `--n` is the cost of
one unit without start-up, imports or setup. Workloads: the 10-scope walk of bench_walk with
tracing off and with summary tracing, a cold parse of bench_parse's rule (as installed, and
as plain Python: `parse-plain`), a suspend → callback → resume cycle of
bench_continuations, and a request of bench_serve's stack through txcl serve's ASGI app in
process (tracing off and summary). Prints instructions per unit and the
ratios of summary tracing to tracing off, all counted in this run. Needs valgrind (Debian:
`apt-get install valgrind`); without it the benchmark says so and exits 0. It takes about a
minute per workload (valgrind runs the code ~50 times slower).

Instruction counts are a proxy: they do not see cache misses or system calls (the trace's
disk writes), so read them beside the CPU-time medians of bench_walk and bench_parse.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _timing import headline  # noqa: E402

WORKLOADS = ("walk-off", "walk-summary", "parse", "parse-plain", "cycle", "serve-off", "serve-summary", "serve-otel")
# a suspend → callback → resume cycle costs ~6 walks: a sixteenth as many give as steady a
# count — but at least 32, or the first cycles' one-off work shows in the figure
_CYCLE_SHARE = 16
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
# Under valgrind the code runs ~50 times slower, so a trace writer's time limits (the walk's
# 0.25 s group-commit delay, txcl serve's 50 ms linger) would cut batches ~50 times smaller
# than the same work makes in real time, and the figure would count a commit per few traces
# instead of per hundreds. They are stretched by this factor; batches then hold what they
# would in a real run.
_SLOWDOWN = 50
# Warm-ups write at least this many traces in one batch, so every statement the steady state
# runs (the trace INSERT of many rows included) is prepared during setup, not counted.
_WARM = 64


def child(workload: str, n: int) -> None:
    """Set the workload up, then run `n` units of it (run under valgrind by the parent)."""
    if workload.startswith("walk-"):
        from bench_walk import build_workspace, envelope

        from txcl.ops.tree import load_ops
        from txcl.runtime.config import Settings
        from txcl.runtime.interpreter import Interpreter
        from txcl.store import open_store

        ws = build_workspace(Path(tempfile.mkdtemp()))
        sys.path.insert(0, str(ws))
        store = open_store(ws / ".txcl-data" / "bench.db")
        interp = Interpreter(load_ops(ws), store=store, settings=Settings(trace_mode=workload[5:]),
                             trace_batch=512, trace_batch_delay_s=0.25 * _SLOWDOWN)
        template = json.dumps(envelope())

        async def walk(count: int) -> None:
            for _ in range(count):
                await interp.run(json.loads(template), "bench", bytes_in=len(template))
            interp.flush_traces()

        asyncio.run(walk(_WARM))  # warm: rules compiled, a batch of traces written
        asyncio.run(walk(n))
        interp.close()
        store.close()
        return
    if workload in ("parse", "parse-plain"):  # parse-plain: TXCL_PURE_PYTHON=1 (see _child_env)
        from bench_parse import RULE

        from txcl.syntax.parser import _parse_and_check

        _parse_and_check(RULE, "bench.txcl")  # the parser built
        for _ in range(n):
            _parse_and_check(RULE, "bench.txcl")  # no cache: a cold parse and its checks each time
        return
    if workload.startswith("serve-"):
        try:  # the event loop `txcl serve` runs on (uvicorn picks uvloop when it is installed)
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        if workload == "serve-otel":  # serve-summary with every request traced by OpenTelemetry
            asyncio.run(_serve_requests("summary", n, otel=True))
        else:
            asyncio.run(_serve_requests(workload[6:], n))
        return
    if workload == "cycle":
        from bench_continuations import cycles, workspace

        ws = workspace(Path(tempfile.mkdtemp()))
        asyncio.run(cycles(ws, str(ws / "warm.db"), 4))  # the rules compiled, the ops snapshot known
        asyncio.run(cycles(ws, str(ws / "bench.db"), n))
        return
    raise SystemExit(f"unknown workload {workload!r}")


async def _serve_requests(trace_mode: str, n: int, otel: bool = False) -> None:
    """`n` GET requests of bench_serve's 3-scope stack through txcl serve's ASGI app, in this
    process: the server's share of a request without uvicorn, the socket or the load tool (the
    event loop turning once between requests, as it does in a server). `otel`: every request traced, the spans sent as `txcl serve` sends them (from its loop) to
    an OTLP sink in another process (which valgrind does not count)."""
    from bench_serve import write_stack

    from txcl.runtime.config import Settings
    from txcl.serve.app import build_state, create_app, freeze_startup_heap

    ws = Path(tempfile.mkdtemp())
    write_stack(ws)
    state = build_state(ws, Settings(trace_mode=trace_mode, default_stack="shop"))
    if state.trace_writer is not None:
        state.trace_writer.linger_s *= _SLOWDOWN
    app = create_app(state)
    freeze_startup_heap()  # as `txcl serve` does once the app is built
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": "/", "raw_path": b"/", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"bench"), (b"accept", b"*/*")],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}
    bodies: list[bytes] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message.get("body", b""))

    sink = _otlp_sink() if otel else None
    if sink is not None:
        from txcl import otel as otel_mod

        otel_mod.setup({"OTEL_EXPORTER_OTLP_ENDPOINT": sink[1], "OTEL_METRICS_EXPORTER": "none",
                        # the batch delay stretched as the other time limits are (see _SLOWDOWN)
                        "OTEL_BSP_SCHEDULE_DELAY": str(5000 * _SLOWDOWN)})
        attach = getattr(otel_mod.current, "attach", None)  # (a revision from before it sent from the loop)
        if attach is not None:
            attach(asyncio.get_running_loop())
    for _ in range(_WARM):  # warm: rules compiled, a batch of traces written
        await app(dict(scope), receive, send)
    if state.trace_writer is not None:
        state.trace_writer.flush()
    for _ in range(n):
        await app(dict(scope), receive, send)
        await asyncio.sleep(0)  # the loop turns between requests, as a server's does (the exporter sends then)
    if not bodies or b'"status":"OK"' not in bodies[-1]:
        raise SystemExit(f"unexpected answer: {bodies[-1:]!r}")
    if sink is not None:
        detach = getattr(otel_mod.current, "detach", None)
        if detach is not None:
            await detach()
        otel_mod.shutdown()
        sink[0].kill()
    await state.aclose()


def _otlp_sink() -> tuple[subprocess.Popen, str]:
    """An HTTP server in another process that accepts OTLP posts and throws them away."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from bench_observability import _Sink; "
            "from http.server import ThreadingHTTPServer as T; s = T(('127.0.0.1', 0), _Sink); "
            "print(s.server_address[1], flush=True); s.serve_forever()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(HERE)], stdout=subprocess.PIPE, text=True)
    return proc, f"http://127.0.0.1:{proc.stdout.readline().strip()}"


def count(workload: str, n: int) -> int:
    """Instructions valgrind counted for the child doing `n` units."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
         "--child", workload, "--n", str(n)],
        capture_output=True, text=True, env=_child_env(workload))
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run of {workload} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def _child_env(workload: str) -> dict:
    env = dict(os.environ)
    if workload == "parse-plain":  # the parser's compiled modules turned off
        env["TXCL_PURE_PYTHON"] = "1"
    env["TXCL_PARSE_CACHE"] = "off"  # the walk's rules are parsed the same way every run
    env["PYTHONHASHSEED"] = "0"  # the same dict layouts in both runs
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024, help="units of work counted per workload")
    parser.add_argument("--only", default=None, help=f"comma-separated workloads ({', '.join(WORKLOADS)})")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n)
        return
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: instruction counts skipped (Debian: apt-get install valgrind)")
        return
    wanted = args.only.split(",") if args.only else list(WORKLOADS)
    per_unit: dict[str, float] = {}
    print(f"instructions per unit (valgrind callgrind; {args.n} units minus the setup alone)")
    for workload in wanted:
        n = max(args.n // _CYCLE_SHARE, 32) if workload == "cycle" else args.n
        # once without valgrind first: bytecode caches written on a fresh checkout would
        # otherwise be counted in the first run only and bend the difference
        subprocess.run([sys.executable, __file__, "--child", workload, "--n", "0"], capture_output=True,
                       env=_child_env(workload))
        base, total = count(workload, 0), count(workload, n)
        per_unit[workload] = (total - base) / n
        unit = {"walk-off": "envelope", "walk-summary": "envelope", "parse": "parse", "parse-plain": "parse",
                "serve-off": "request", "serve-summary": "request", "serve-otel": "request"}.get(workload, "cycle")
        print(f"  {workload:<14} {per_unit[workload]:>12,.0f} instructions per {unit}", flush=True)
    if "walk-off" in per_unit and "walk-summary" in per_unit:
        ratio = per_unit["walk-summary"] / per_unit["walk-off"]
        print(f"  summary tracing / tracing off = {ratio:.3f}")
        headline("10-scope walk, summary tracing (instructions)", per_unit["walk-summary"] / 1000,
                 "k instr/env", baseline="the same walk, tracing off", ratio=ratio, goal="ratio ≤ 1.2")
    if "serve-off" in per_unit and "serve-summary" in per_unit:
        ratio = per_unit["serve-summary"] / per_unit["serve-off"]
        print(f"  served request, summary tracing / tracing off = {ratio:.3f}")
    if "serve-summary" in per_unit and "serve-otel" in per_unit:
        ratio = per_unit["serve-otel"] / per_unit["serve-summary"]
        print(f"  served request, OpenTelemetry on (every request traced) / off = {ratio:.3f}")
        headline("served request (ASGI, in process), OpenTelemetry on (instructions)", per_unit["serve-otel"] / 1000,
                 "k instr/req", baseline="the same request with OpenTelemetry off, same run", ratio=ratio)
    if "parse" in per_unit and "parse-plain" in per_unit:
        print(f"  parse, compiled / plain Python = {per_unit['parse'] / per_unit['parse-plain']:.3f}"
              " (1.000: the compiled modules were not built)")
    if "cycle" in per_unit:
        headline("suspend → callback → resume cycle, SQLite (instructions, both threads)",
                 per_unit["cycle"] / 1000, "k instr/cycle")


if __name__ == "__main__":
    main()
