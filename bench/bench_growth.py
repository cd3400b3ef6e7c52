"""Growth benchmark: `python bench/bench_growth.py`.

Each workload is measured at 1x, 2x and 4x its base size (CPU time of this thread, median of
a few runs). Linear cost shows as 2x and 4x the base time; the "4x/1x" column is the ratio
against the base size measured in the same run (4.0 is linear, 16.0 quadratic); "gc paused"
is the same ratio with Python's cyclic garbage collector paused during the runs.

Workloads: `txcl check` with the full (excerpt) output of a file with thousands of findings;
`parse_rule` of a text with thousands of syntax errors; duplicate WITH keys (TX203); `txcl fmt`
of a clause with a `# noqa` on every item; the diagnostics of a rule holding one huge path;
re-parsing an edited file in the language server (memory of the parse cache, MB).
"""

from __future__ import annotations

import gc
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _cpu(fn: Callable[[], object], repeat: int = 3, collect: bool = True) -> float:
    """Median CPU seconds of `fn`; with `collect` False, Python's cyclic garbage collector is
    paused while it runs (its full collections scan every live object, which adds a cost that
    grows with the heap rather than with the work: the second column shows the code alone)."""
    samples = []
    for _ in range(repeat):
        from txcl.check.cache import clear_memory
        from txcl.syntax.parser import clear_cache
        clear_cache()
        clear_memory()
        gc.collect()
        if not collect:
            gc.disable()
        start = time.thread_time()
        fn()
        samples.append(time.thread_time() - start)
        gc.enable()
    return statistics.median(samples)


def _check_full(n: int) -> Callable[[], object]:
    from txcl.check import check_source
    text = "SET .v0 = 0,\n" + "".join(f"  .v{i} = 0{i},\n" for i in range(1, n)) + "  .end = 1\n"
    return lambda: "\n".join(d.render() for d in check_source(text, "x.txcl"))


def _parse_errors(n: int) -> Callable[[], object]:
    from txcl.errors import TxclSyntaxError
    from txcl.syntax.parser import parse_rule
    text = "SET .a = = 1\n" * n

    def run() -> object:
        try:
            parse_rule(text)
        except TxclSyntaxError as exc:
            return str(exc)
        return None
    return run


def _with_duplicates(n: int) -> Callable[[], object]:
    from txcl.check import check_source
    text = "WITH " + ", ".join(f"k{i % 50}.x{i} = 1, k{i % 50} = 2" for i in range(n)) + '\nEXEC "txco://noop"\n'
    return lambda: check_source(text, "x.txcl")


def _fmt_noqa(n: int) -> Callable[[], object]:
    from txcl.fmt import format_text
    text = "EMIT " + ",\n     ".join(f".a{i} = 012  # noqa: TX201" for i in range(n)) + "\n"
    return lambda: format_text(text)


def _huge_path(n: int) -> Callable[[], object]:
    from txcl.check import check_source
    text = "SET .a = " + ".b" * (n * 25) + "..\n"
    return lambda: [d.render() for d in check_source(text, "x.txcl")]


WORKLOADS = [
    ("check, full output, N findings", _check_full, 4000),
    ("parse_rule, N syntax errors", _parse_errors, 4000),
    ("check, N duplicate WITH keys (TX203)", _with_duplicates, 4000),
    ("fmt, N items each with # noqa", _fmt_noqa, 1000),
    ("check, one path of 50*N characters", _huge_path, 4000),
]


def _editor_memory() -> list[float]:
    """Peak RSS (MB) after 10, 20 and 40 edits of a 250 KB rule, each parsed again."""
    from txcl.check import check_source
    base = "EMIT " + ",\n     ".join(f'.field{i} = "value {i}"' for i in range(8000)) + "\n"
    out = []
    for k in range(40):
        check_source(base + f"# edit {k}\n", "x.txcl")
        if k + 1 in (10, 20, 40):
            out.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def main() -> None:
    print(f"{'workload':<40} {'1x':>9} {'2x':>9} {'4x':>9} {'4x/1x':>7} {'gc paused':>10}")
    for name, make, base in WORKLOADS:
        make(base // 4)()  # warm up (imports, the parser's tables)
        sized = [make(base * k) for k in (1, 2, 4)]
        times = [_cpu(fn) for fn in sized]
        paused = [_cpu(fn, collect=False) for fn in sized]
        print(f"{name.replace('N', str(base)):<40} " + " ".join(f"{t * 1000:>7.0f}ms" for t in times)
              + f" {times[2] / times[0]:>7.1f} {paused[2] / paused[0]:>10.1f}")
    m10, m20, m40 = _editor_memory()
    print(f"{'editor: peak RSS after 10/20/40 edits':<40} {m10:>7.0f}MB {m20:>7.0f}MB {m40:>7.0f}MB {m40 / m10:>7.2f}")


if __name__ == "__main__":
    main()
