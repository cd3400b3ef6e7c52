"""`txcl test` speed: `python bench/bench_ruletest.py`.

Three figures (CPU time of this process, median of 5 runs):
  1. 200 synchronous cases over the quickstart stack (target: at most 1 s);
  2. one case whose simulated worker answers after 10 minutes of virtual time, against one
     synchronous case, both measured here (target: at most 5x);
  3. the same 200 cases with --coverage, against without (target: at most 30% extra).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SYNC_CASE = """  - name: case {i}
    input: {{order: {{customer: {who}, items: [{{sku: tea, qty: {qty}, price: 12.5}}]}}}}
    expect:
      envelope: {{customer: {who}}}
"""
ASYNC_TREE = {
    "OPS/flow/100/ask.txcl": 'WITH mode = "async", timeout = "1h", into = "answer"\nEXEC "https://w.example/start"',
    "OPS/flow/200/after.txcl": "EMIT .done = true",
    "flow.test.yaml": "stack: flow\ncases:\n  - name: late\n    input: {}\n    workers:\n"
                      "      \"https://w.example/start\": {after: 10m, output: {ok: 1}}\n"
                      "    expect: {envelope: {done: true, answer: {ok: 1}}}\n",
}
SYNC_TREE = {
    "OPS/flow/100/ask.txcl": "EMIT .answer.ok = 1",
    "OPS/flow/200/after.txcl": "EMIT .done = true",
    "flow.test.yaml": "stack: flow\ncases:\n  - name: now\n    input: {}\n"
                      "    expect: {envelope: {done: true, answer: {ok: 1}}}\n",
}


def _session(root: Path, coverage: bool = False):
    from txcl.ops.tree import load_ops
    from txcl.ruletest.session import run_session
    from txcl.runtime.config import Settings

    tree = load_ops(root)
    observers = []
    if coverage:
        from txcl.ruletest.coverage import CoverageCollector

        observers.append(CoverageCollector(tree))
    start = time.process_time()
    session = run_session([root], workspace=root, tree=tree, settings=Settings(), observers=observers)
    elapsed = time.process_time() - start
    assert not session.failed and not session.load_failed, [r.problems for r in session.failed]
    return elapsed, len(session.results)


def _median(fn, runs: int = 5) -> float:
    return statistics.median(fn() for _ in range(runs))


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="txcl-bench-test-"))
    quick = tmp / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", quick, ignore=shutil.ignore_patterns(".txcl-data", "*.test.yaml"))
    cases = "".join(SYNC_CASE.format(i=i, who="vip" if i % 3 == 0 else "guest", qty=1 + i % 5) for i in range(200))
    (quick / "many.test.yaml").write_text("stack: shop\ncases:\n" + cases)
    _session(quick)  # warm up: imports, the parser
    plain = _median(lambda: _session(quick)[0])
    covered = _median(lambda: _session(quick, coverage=True)[0])
    print(f"{'200 synchronous cases (quickstart)':<52} {plain * 1000:>8.0f} ms CPU   (target <= 1000 ms)")
    slow = _write(tmp / "async", ASYNC_TREE)
    fast = _write(tmp / "sync", SYNC_TREE)
    _session(slow)
    async_case = _median(lambda: _session(slow)[0], 9)
    sync_case = _median(lambda: _session(fast)[0], 9)
    print(f"{'one case, worker answers after 10 virtual minutes':<52} {async_case * 1000:>8.1f} ms CPU")
    print(f"{'one synchronous case':<52} {sync_case * 1000:>8.1f} ms CPU")
    print(f"{'ratio async / sync':<52} {async_case / sync_case:>8.2f} x      (target <= 5x)")
    print(f"{'200 cases with --coverage':<52} {covered * 1000:>8.0f} ms CPU")
    print(f"{'coverage overhead':<52} {100 * (covered / plain - 1):>8.1f} %      (target <= 30%)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
