"""The worker dispatch client against httpx: client CPU per dispatch POST.

    python bench/bench_dispatch.py [--posts 2000] [--rounds 5] [--concurrency 16]

A worker that answers every POST with `202 {"job_id": "j"}` runs in its own process
(uvicorn), so the figure is the client's own work: `txcl`'s `DispatchClient` (keep-alive
connections on asyncio transports, requests written and answers parsed by h11) and a plain
`httpx.AsyncClient` with the same pool limits, each posting the same dispatch body and
headers, alternately, medians of rounds. The ratio is httpx / DispatchClient.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import headline  # noqa: E402

import httpx  # noqa: E402

from txcl.continuations.worker_client import DispatchClient  # noqa: E402

WORKER = '''
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 202, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"job_id": "j"}'})
'''
BODY = json.dumps({"input": {"order": 42, "lines": [1, 2, 3]},
                   "_txc": {"callback_url": "http://127.0.0.1:1/_txc/continuations/op/opc_1/complete"}}).encode()
HEADERS = {"Content-Type": "application/json", "User-Agent": "txcl/bench", "X-Txco-Continuation-Token": "t" * 43,
           "Idempotency-Key": "opc_01JBENCH0000000000000000"}


async def lean(url: str, n: int, concurrency: int) -> None:
    client = DispatchClient()
    target = client.lean_target(url, HEADERS)
    assert target is not None
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            status, _ = await client.post(target, HEADERS, BODY)
            assert status == 202

    await asyncio.gather(*(one() for _ in range(n)))
    await client.aclose()


async def plain_httpx(url: str, n: int, concurrency: int) -> None:
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            response = await client.post(url, content=BODY, headers=HEADERS)
            assert response.status_code == 202

    await asyncio.gather(*(one() for _ in range(n)))
    await client.aclose()


def cpu_us(fn, url: str, n: int, concurrency: int) -> float:
    started = time.process_time()
    asyncio.run(fn(url, n, concurrency))
    return (time.process_time() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, socket.socket() as probe:
        (Path(tmp) / "bench_worker.py").write_text(WORKER, encoding="utf-8")
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        worker = subprocess.Popen([sys.executable, "-m", "uvicorn", "bench_worker:app", "--port", str(port),
                                   "--log-level", "warning", "--no-access-log"], cwd=tmp)
        url = f"http://127.0.0.1:{port}/jobs"
        try:
            for _ in range(100):
                try:
                    httpx.post(url, content=b"{}")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            cpu_us(lean, url, 200, args.concurrency)
            cpu_us(plain_httpx, url, 200, args.concurrency)
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(cpu_us(lean, url, args.posts, args.concurrency))
                theirs.append(cpu_us(plain_httpx, url, args.posts, args.concurrency))
        finally:
            worker.terminate()
            worker.wait()
    mine, other = statistics.median(ours), statistics.median(theirs)
    print(f"dispatch POSTs, {args.concurrency} in flight, {args.posts} per round, medians of {args.rounds} rounds")
    print(f"  DispatchClient (asyncio + h11)   {mine:8.1f} µs client CPU per POST")
    print(f"  httpx.AsyncClient                {other:8.1f} µs client CPU per POST")
    print(f"  httpx / DispatchClient           {other / mine:8.1f}x")
    headline("worker dispatch POST, client CPU", mine, "µs", baseline="httpx.AsyncClient, same run",
             ratio=mine / other, goal="clearly below httpx")


if __name__ == "__main__":
    main()
