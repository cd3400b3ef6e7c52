"""The cost of `--validate-input` on a served request: the benchmark's 3-scope stack (as in
bench_serve.py) with a `schema.json`, POSTed a 1 KB JSON envelope, driven in process through
the ASGI handler (no sockets, so the request's own work is what is measured), with and without
validation, rounds taking turns. Prints µs per request and the validated/plain ratio
(goal: validation ≤ 5 % of the request), and the validator's own µs per call.

    python bench/bench_validate.py [--requests 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import headline  # noqa: E402
from bench_serve import write_stack  # noqa: E402

ITEM = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1},
                                         "price": {"type": "number"}}, "required": ["sku", "qty", "price"]}
SCHEMA = {"$defs": {
    "input": {"type": "object", "properties": {
        "order": {"type": "object", "properties": {"id": {"type": "integer"}, "items": {"type": "array", "items": ITEM},
                                                   "customer": {"type": "string"}, "note": {"type": "string"}},
                  "required": ["items"]},
        "meta": {"type": "object", "additionalProperties": True}}, "required": ["order"]},
}}


def body_1kb() -> bytes:
    items = [{"sku": f"SKU-{i:04d}", "qty": i % 5 + 1, "price": 9.5 + i} for i in range(19)]
    doc = {"order": {"customer": "ada", "items": items, "note": "x" * 40}, "meta": {"source": "bench"}}
    data = json.dumps(doc).encode()
    return data


async def drive(app, body: bytes, count: int) -> float:
    """Seconds for `count` requests through the ASGI app."""
    headers = [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/bench", "raw_path": b"/bench", "query_string": b"", "headers": headers,
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8080), "root_path": ""}
    status = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    started = time.perf_counter()
    for _ in range(count):
        await app(dict(scope), receive, send)
    elapsed = time.perf_counter() - started
    if set(status) != {200}:
        raise SystemExit(f"answers: {sorted(set(status))}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    from txcl.runtime.config import Settings
    from txcl.serve.app import TxclHandler, build_state

    body = body_1kb()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        write_stack(ws)
        (ws / "OPS" / "shop" / "schema.json").write_text(json.dumps(SCHEMA))
        handlers = {}
        for name, validate in (("plain", False), ("--validate-input", True)):
            state = build_state(ws, Settings(trace_mode="off", validate_input=validate), extensions=[])
            handlers[name] = TxclHandler(state)
        loop = asyncio.new_event_loop()
        for handler in handlers.values():
            loop.run_until_complete(drive(handler, body, 200))  # warm-up
        per: dict[str, list[float]] = {name: [] for name in handlers}
        block = max(50, args.requests // 20)  # small blocks taking turns: drift hits both alike
        for _ in range(args.rounds):
            for _ in range(args.requests // block):
                for name, handler in handlers.items():
                    per[name].append(loop.run_until_complete(drive(handler, body, block)) / block * 1e6)
        validator = handlers["--validate-input"]._schemas().validator("shop", "input")
        document = json.loads(body)
        calls = 20000
        started = time.perf_counter()
        for _ in range(calls):
            validator.errors(document)
        own = (time.perf_counter() - started) / calls * 1e6
    plain, checked = statistics.median(per["plain"]), statistics.median(per["--validate-input"])
    ratios = [c / p for c, p in zip(per["--validate-input"], per["plain"])]
    print(f"body {len(body)} bytes, {args.requests} requests x {args.rounds} rounds in blocks taking turns "
          "(medians, in process, trace off)")
    print(f"plain            {plain:8.1f} µs/request")
    print(f"--validate-input {checked:8.1f} µs/request   ratio {statistics.median(ratios):.3f} "
          f"(+{(statistics.median(ratios) - 1) * 100:.1f} %; goal ≤ +5 %)")
    print(f"the validator alone: {own:.1f} µs per 1 KB document")
    headline("serve --validate-input, 3-scope request, 1 KB JSON body", checked, "µs",
             baseline="the same request without validation", ratio=statistics.median(ratios), goal="ratio ≤ 1.05")


if __name__ == "__main__":
    main()
