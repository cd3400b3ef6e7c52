"""Parser benchmark: `python bench/bench_parse.py`.

Prints medians for
  (a) parsing the 7-clause rule uncached (parser only, and parse_rule incl. TX1xx checks),
  (b) a cached re-parse (parse_rule of the same text and filename),
  (c) reading and parsing 1,000 generated rule files from a temp dir (as load_ops does, the
      garbage collector paused; and with it running, for comparison),
  (d) reading them again in a fresh state with the parse cache on disk filled,
  (e) reading them again with the parse cache in memory filled,
and a bare Lark LALR parse (Lark's own contextual lexer, parse tree, no AST) of the same
grammar for a ratio. When the parser runs compiled (`txcl --version`), (a) is measured again
as plain Python in a child process (TXCL_PURE_PYTHON=1), five times, each paired with the
compiled parser measured again just before; the headline takes the medians of those pairs. Times are
per-thread CPU time, so other processes on a busy machine distort them less; wall-clock
medians are shown beside them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import headline  # noqa: E402

RULE = '''WHEN .user.id =~ /^u_/ && .amount > 1000
SET .source = "x", .n = &add(.a, 1)
SELECT .body AS .payload DEFAULT "none", .q
WITH timeout = 2000, label = "v2"
PRIORITY 5
EXEC "https://hook.example.com/processed"
EMIT .meta.processed_at = &now("rfc3339")
'''


def measure(fn, batch: int, repeats: int = 25, setup=None) -> tuple[float, float]:
    """Median (cpu µs, wall µs) per call over `repeats` batches of `batch` calls; `setup`
    runs before each batch, outside the timing."""
    cpu, wall = [], []
    for _ in range(repeats):
        if setup is not None:
            setup()
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(batch):
            fn()
        cpu.append((time.thread_time_ns() - c0) / batch / 1000)
        wall.append((time.perf_counter_ns() - w0) / batch / 1000)
    return statistics.median(cpu), statistics.median(wall)


def paired_ratio(parser, bare, rounds: int = 31, batch: int = 50) -> float:
    """Median over rounds of (txcl parse time / bare Lark time), measured back to back so
    that load from other processes affects both sides of each ratio alike."""
    ratios = []
    for _ in range(rounds):
        c0 = time.thread_time_ns()
        for _ in range(batch):
            parser.parse(RULE, "bench.txcl")
        c1 = time.thread_time_ns()
        for _ in range(batch):
            bare.parse(RULE)
        c2 = time.thread_time_ns()
        ratios.append((c1 - c0) / (c2 - c1))
    return statistics.median(ratios)


def plain_python_figures() -> tuple[float, float]:
    """(a) measured as plain Python in a child process: (parser only, parse_rule) µs CPU."""
    done = subprocess.run([sys.executable, __file__, "--only-a"], capture_output=True, text=True, check=True,
                          env=dict(os.environ, TXCL_PURE_PYTHON="1"))
    parse_only, full = done.stdout.split()
    return float(parse_only), float(full)


def measure_a(repeats: int = 25) -> tuple[tuple[float, float], tuple[float, float]]:
    """(a): the rule parsed uncached, by the parser alone and by parse_rule (with its checks)."""
    from txcl.syntax.parser import clear_cache, get_parser, parse_rule

    parser = get_parser()
    rule, diags = parser.parse(RULE, "bench.txcl")  # (rule, TX0xx diagnostics)
    assert not diags and rule is not None, diags
    parse_only = measure(lambda: parser.parse(RULE, "bench.txcl"), 200, repeats)

    def uncached() -> None:
        clear_cache()
        parse_rule(RULE, "bench.txcl")

    return parse_only, measure(uncached, 200, repeats)


def generated_rule(i: int) -> str:
    return (f'WHEN .user.id =~ /^u_{i}/ && .amount > {1000 + i}\n'
            f'SET .source = "s{i}", .n = &add(.a{i}, {i})\n'
            f'SELECT .body AS .payload DEFAULT "none{i}", .q{i % 7}\n'
            f'WITH timeout = {2000 + i}, label = "v{i}"\n'
            f'PRIORITY {i % 10}\n'
            f'EXEC "https://hook{i}.example.com/processed"\n'
            f'EMIT .meta.processed_at = &now("rfc3339"), .meta.n = {i}\n')


def main() -> int:
    from lark import Lark

    from txcl.resources import grammar_path
    from txcl.syntax import diskcache
    from txcl.syntax.batch import parsing_many
    from txcl.syntax.compiled import summary
    from txcl.syntax.parser import clear_cache, get_parser, parse_rule

    if sys.argv[1:] == ["--only-a"]:
        parse_only, full = measure_a()
        print(parse_only[0], full[0])
        return 0
    t0 = time.perf_counter()
    parser = get_parser()
    build_ms = (time.perf_counter() - t0) * 1000
    compiled = summary() == "parser compiled"
    print(f"{summary()} (txcl --version)")

    parse_only, full = measure_a()
    parse_rule(RULE, "bench.txcl")
    cached = measure(lambda: parse_rule(RULE, "bench.txcl"), 20000)

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(1000):
            p = Path(tmp) / f"r{i:04d}.txcl"
            p.write_text(generated_rule(i), encoding="utf-8")
            paths.append(p)

        # The parse cache in memory is emptied before each timed round, not inside it: freeing
        # the previous round's 1,000 syntax trees (~10 ms) is no part of loading them cold.
        def read_all() -> None:
            with parsing_many():  # as load_ops and txcl check do
                for p in paths:
                    parse_rule(p.read_text(encoding="utf-8"), str(p))

        def read_all_collector_on() -> None:
            for p in paths:
                parse_rule(p.read_text(encoding="utf-8"), str(p))

        def read_all_again() -> None:  # the parse cache in memory holds every file
            with parsing_many():
                for p in paths:
                    parse_rule(p.read_text(encoding="utf-8"), str(p))

        previous = diskcache.active()
        diskcache.disable()
        try:
            files = measure(read_all, 1, repeats=7, setup=clear_cache)
            files_gc = measure(read_all_collector_on, 1, repeats=7, setup=clear_cache)
            clear_cache()
            read_all()
            files_warm = measure(read_all_again, 1, repeats=7)
            diskcache.enable(Path(tmp) / "parse-cache.sqlite3")
            clear_cache()
            read_all()  # fills the cache on disk
            # memory cleared before each round: every rule from disk
            files_disk = measure(read_all, 1, repeats=7, setup=clear_cache)
        finally:
            diskcache.disable()
            if previous is not None:
                diskcache.enable(previous.path)

    bare = Lark(grammar_path().read_text(encoding="utf-8"), parser="lalr", lexer="contextual")
    bare.parse(RULE)
    bare_cpu = measure(lambda: bare.parse(RULE), 100)
    bare_pos = Lark(grammar_path().read_text(encoding="utf-8"), parser="lalr",
                    lexer="contextual", propagate_positions=True)
    bare_pos_cpu = measure(lambda: bare_pos.parse(RULE), 100)

    print(f"parser build (first use)                 {build_ms:8.1f} ms")
    print(f"(a) 7-clause rule, parser only, uncached {parse_only[0]:8.1f} µs cpu "
          f"({parse_only[1]:.1f} µs wall)")
    print(f"(a) parse_rule uncached (+TX1xx checks)  {full[0]:8.1f} µs cpu "
          f"({full[1]:.1f} µs wall)")
    print(f"(b) parse_rule cached                    {cached[0]:8.2f} µs cpu "
          f"({cached[1]:.2f} µs wall)")
    print(f"(c) read + parse 1,000 rule files        {files[0] / 1000:8.1f} ms cpu "
          f"({files[1] / 1000:.1f} ms wall)")
    print(f"    the same, garbage collector running  {files_gc[0] / 1000:8.1f} ms cpu "
          f"({files_gc[1] / 1000:.1f} ms wall)")
    print(f"(d) 1,000 files from the cache on disk   {files_disk[0] / 1000:8.1f} ms cpu "
          f"({files_disk[1] / 1000:.1f} ms wall)")
    print(f"(e) 1,000 files, cache in memory warm    {files_warm[0] / 1000:8.1f} ms cpu "
          f"({files_warm[1] / 1000:.1f} ms wall)")
    print(f"bare Lark LALR (contextual lexer, tree)  {bare_cpu[0]:8.1f} µs cpu "
          f"({bare_cpu[1]:.1f} µs wall)")
    print(f"bare Lark LALR + propagate_positions     {bare_pos_cpu[0]:8.1f} µs cpu "
          f"({bare_pos_cpu[1]:.1f} µs wall)")
    ratio = paired_ratio(parser, bare)
    print(f"ratio txcl parser / bare Lark            {ratio:8.2f}x "
          f"(median of paired rounds; vs. with positions "
          f"{paired_ratio(parser, bare_pos):.2f}x)")
    parse_full = full[0]
    if compiled:
        paired = []  # (compiled parser only, compiled parse_rule, plain parser only, plain parse_rule)
        for _ in range(5):  # taking turns, so a busy minute slows both alike
            own_only, own_full = measure_a(repeats=9)
            paired.append((own_only[0], own_full[0], *plain_python_figures()))
        own_only, parse_full, plain_only, plain_full = (statistics.median(p[i] for p in paired) for i in range(4))
        print(f"(a) paired: compiled {own_only:.1f} µs parser only, {parse_full:.1f} µs parse_rule; as plain Python "
              f"(TXCL_PURE_PYTHON=1) {plain_only:.1f} µs, {plain_full:.1f} µs; compiled / plain "
              f"{statistics.median(p[0] / p[2] for p in paired):.2f}, {statistics.median(p[1] / p[3] for p in paired):.2f}"
              f" (medians of 5 paired rounds)")
    headline("parse one 7-clause rule, cold" + (" (compiled)" if compiled else ""), parse_full, "µs",
             baseline="bare Lark parse, same grammar", ratio=parse_full / bare_cpu[0], goal="≤ 100 µs")
    if compiled:
        headline("  the same, as plain Python", plain_full, "µs", baseline="bare Lark parse, same grammar",
                 ratio=plain_full / bare_cpu[0], goal="≤ 100 µs")
    headline("read + parse 1,000 rule files, cold", files[0] / 1000, "ms", baseline="bare Lark × 1,000",
             ratio=files[0] / (bare_cpu[0] * 1000), goal="≤ 5 × Go (29–33 ms)")
    headline("read 1,000 rule files, parse cache on disk", files_disk[0] / 1000, "ms",
             baseline="the same files parsed", ratio=files_disk[0] / files[0], goal="≤ 5 × Go (29–33 ms)")
    headline("read 1,000 rule files, parse cache in memory", files_warm[0] / 1000, "ms",
             baseline="the same files parsed", ratio=files_warm[0] / files[0], goal="≤ 1 × Go (29–33 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
