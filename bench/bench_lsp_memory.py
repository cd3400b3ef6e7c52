"""Memory of the language server's analysis under edits: a 200 KB rule file (3,500 EMIT items)
and a 20 KB one, each changed and re-checked as `txcl lsp` does on every full-text edit (the
same `diagnostics_for`), RSS of this process reported after 10, 100 and 1,000 edits. Bounded
means flat after the first few dozen.

    python bench/bench_lsp_memory.py [--edits 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def rss_mib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // (1 << 20)


def text_of(items: int) -> str:
    lines = ["WHEN .a == 1"] + [f'EMIT .a{i} = &concat("x", .b{i}), .c{i} = {i}  # note {i}' for i in range(items)]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=1000)
    args = ap.parse_args()
    from txcl.lsp import analysis

    marks = {10, 100, args.edits}
    with tempfile.TemporaryDirectory() as tmp:
        for label, items in (("200 KB", 3500), ("20 KB", 350)):
            base = text_of(items)
            path = os.path.join(tmp, f"big{items}.txcl")
            started = time.perf_counter()
            report = []
            for n in range(1, args.edits + 1):
                analysis.diagnostics_for(base.replace(".a1 ", f".a1{n} ", 1), path)
                if n in marks:
                    report.append(f"{n}: {rss_mib()} MiB")
            per = (time.perf_counter() - started) / args.edits * 1000
            print(f"{label} file ({len(base):,} characters): RSS after " + ", ".join(report) +
                  f"; {per:.1f} ms per edit")


if __name__ == "__main__":
    main()
