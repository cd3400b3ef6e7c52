"""The language server's navigation on a generated 2,000-rule tree: go to definition (a jump,
and a path's writers), find references, rename (planning the edit), and diagnostics after a
keystroke in a 200-line rule — the analysis functions the server calls, timed in-process
after a warm-up (the JSON-RPC framing around them is the same for every request).

    python bench/bench_lsp_navigation.py [--rules 2000] [--repeat 40]

Prints the median and p95 of each in milliseconds. Goals: definition, references and rename
≤ 200 ms p95 after warm-up; diagnostics ≤ 150 ms p95.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _timing import headline  # noqa: E402


def tree(root: Path, rules: int) -> Path:
    for i in range(rules):
        path = root / "OPS" / f"s{i % 20}" / f"{(i // 20) * 10 + 100:04d}" / f"r{i}.txcl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'WHEN .order.total > {i} && .customer.tier == "gold"\n'
                        f'EMIT .v{i} = &add(.order.total, 1), @goto = "s{i % 20}/{(i // 20) * 10 + 110}"\n')
    return root / "OPS" / "s0" / "0100" / "r0.txcl"


def timed(fn, repeat: int) -> tuple[float, float]:
    fn()  # warm-up (the first call indexes the tree)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    from txcl.lsp import analysis
    from txcl.lsp.references import references
    from txcl.lsp.rename import rename

    with tempfile.TemporaryDirectory() as tmp:
        rule = tree(Path(tmp), args.rules)
        text = rule.read_text()
        path = str(rule)
        goto_at = text.index('@goto = "') + 11
        keystrokes = itertools.count()
        long_rule = "WHEN .a == 1\nEMIT " + ",\n  ".join(f".f{i} = &add(.order.total, {i})" for i in range(198)) + "\n"
        cases = {
            "definition (a jump)": lambda: analysis.definition(text, goto_at, path),
            "definition (a path's writers)": lambda: analysis.definition(text, 7, path),
            "references (a path)": lambda: references(text, 7, path, {}),
            "rename (a path)": lambda: rename(text, ("order", "total"), ".order.sum", path, {}),
            # each call a new buffer (a keystroke): nothing of the buffer's own analysis is reused
            "diagnostics (200-line rule)": lambda: analysis.diagnostics_for(long_rule + f"# {next(keystrokes)}\n", path),
        }
        print(f"{args.rules} rules, {args.repeat} repeats after a warm-up")
        for name, fn in cases.items():
            median, p95 = timed(fn, args.repeat)
            goal = 150 if name.startswith("diagnostics") else 200
            print(f"  {name:<32} median {median:7.1f} ms   p95 {p95:7.1f} ms   (goal p95 ≤ {goal} ms)")
            headline(f"language server: {name}", p95, "ms p95", baseline="its goal", ratio=p95 / goal,
                     goal=f"≤ {goal} ms")


if __name__ == "__main__":
    main()
