"""What observability costs `txcl serve`: the 3-scope sync stack of bench_serve served with
everything off, with `--metrics`, with OpenTelemetry on (spans and metrics through the batching
OTLP/HTTP exporter, to a sink on loopback that accepts and discards), and with both; and, as
the "everything off is within noise of today" check, the same server of the revision before
this work (`--baseline`, default BASELINE), all measured round-robin in the same run.

    python bench/bench_observability.py [--seconds 3] [--rounds 3] [--connections 8] [--baseline REF]

Prints requests/s and requests per server CPU-second (medians), and each variant's ratio
against "off" of the same round. Goals: OTel ≤ 10 % fewer requests, metrics ≤ 5 %, off vs the
baseline within noise. OpenTelemetry is measured always-on (every request traced; with its metrics,
and traces only) and with 1 % of traces sampled, with and without its metrics, and with its
metrics alone (`OTEL_TRACES_EXPORTER=none`).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _baseline import baseline_tree  # noqa: E402
from _timing import headline  # noqa: E402
from bench_serve import measure, start, stop, write_stack  # noqa: E402

BASELINE = "8696d68"  # main before the egress/secrets/logs/metrics/OpenTelemetry work


class _Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps the connection open, as a collector does

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--baseline", default=BASELINE, help="git revision measured as 'today' (none: skip)")
    parser.add_argument("--python-load", action="store_true")
    args = parser.parse_args()
    use_wrk = shutil.which("wrk") is not None and not args.python_load
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    sink.daemon_threads = True
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    otel_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
                "OTEL_SERVICE_NAME": "txcl-bench"}
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp, \
            (baseline_tree(args.baseline) if args.baseline != "none" else _no_tree()) as old:
        ws = Path(tmp)
        write_stack(ws)
        serve = [py, "-m", "txcl", "serve", str(ws), "--port", "0"]
        variants: dict[str, tuple[list[str], dict[str, str]]] = {
            "off": (serve, {}),
            "metrics": ([*serve, "--metrics"], {}),
            "otel": (serve, otel_env),
            "otel + metrics": ([*serve, "--metrics"], otel_env),
            "otel traces only": (serve, {**otel_env, "OTEL_METRICS_EXPORTER": "none"}),
            # the production setting the operating guide suggests: 1 % of traces sampled
            "otel, 1% sampled": (serve, {**otel_env, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                                         "OTEL_TRACES_SAMPLER_ARG": "0.01"}),
            "otel traces only, 1%": (serve, {**otel_env, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                                             "OTEL_TRACES_SAMPLER_ARG": "0.01", "OTEL_METRICS_EXPORTER": "none"}),
            "otel metrics only": (serve, {**otel_env, "OTEL_TRACES_EXPORTER": "none"}),
        }
        if old is not None:
            for so in (HERE.parent / "txcl" / "syntax").glob("*.so"):  # the parser's compiled twins
                shutil.copy(so, old / "txcl" / "syntax" / so.name)
            variants[f"off, at {args.baseline}"] = (serve, {"PYTHONPATH": str(old)})
        rates: dict[str, list[float]] = {name: [] for name in variants}
        per_cpu: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, (cmd, env) in variants.items():
                proc, url = start(cmd, ws, env)
                try:
                    rate, cpu_rate = measure(url, proc.pid, args.seconds, args.connections, use_wrk)
                    rates[name].append(rate)
                    per_cpu[name].append(cpu_rate)
                finally:
                    stop(proc)
    sink.shutdown()
    load = f"wrk -t1 -c{args.connections}" if use_wrk else f"httpx asyncio, {args.connections} connections"
    print(f"load: {load}, {args.seconds:g}s per measurement, {args.rounds} rounds, medians")
    if not use_wrk:
        print("note: without wrk the Python load generator saturates before the server does, so every variant "
              "measures about the same and the ratios say little; install wrk (Debian: apt-get install wrk)")
    print(f"{'':<26} {'requests/s':>11} {'req/CPU-s':>10} {'vs off (req/s)':>15} {'vs off (CPU)':>13}")
    for name in variants:
        ratio = statistics.median(r / o for r, o in zip(rates[name], rates["off"]))
        cpu_ratio = statistics.median(per_cpu[name]) / statistics.median(per_cpu["off"])
        print(f"{name:<26} {statistics.median(rates[name]):>11.0f} {statistics.median(per_cpu[name]):>10.0f} "
              f"{ratio:>15.3f} {cpu_ratio:>13.3f}")
    goals = {"metrics": "≥ 0.95", "otel": "≥ 0.90", "otel + metrics": "≥ 0.90", "otel traces only": "≥ 0.90",
             "otel, 1% sampled": "≥ 0.90",
             "otel traces only, 1%": "≥ 0.90", "otel metrics only": "≥ 0.95"}
    for name, goal in goals.items():
        headline(f"txcl serve with {name}", statistics.median(per_cpu[name]), "req/CPU-s",
                 baseline="the same server with everything off, same run",
                 ratio=statistics.median(per_cpu[name]) / statistics.median(per_cpu["off"]), goal=f"ratio {goal}")
    if args.baseline != "none":
        name = f"off, at {args.baseline}"
        headline("txcl serve, everything off", statistics.median(per_cpu["off"]), "req/CPU-s",
                 baseline=f"the same server at {args.baseline}, same run",
                 ratio=statistics.median(per_cpu["off"]) / statistics.median(per_cpu[name]), goal="within noise of 1")


class _no_tree:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
