"""Latency of the interactive tooling on the repository's rule files.

Prints medians per file for: the Pygments lexer (highlighting a REPL line or a pygmentize
run), the language server's diagnostics (`txcl check` per keystroke), hover and completion
lookups, the outline and fmt; plus the REPL's work for one typed rule.

    python bench/bench_tooling.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from txcl.highlight import TxclLexer
from txcl.lsp import analysis
from txcl.repl.session import ReplSession

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 5


def rule_files() -> list[tuple[Path, str]]:
    out = []
    for path in sorted(ROOT.rglob("*.txcl")):
        if "node_modules" in path.parts:
            continue
        try:
            out.append((path, path.read_bytes().decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return out


def per_file_us(files: list[tuple[Path, str]], fn) -> float:
    """Median over rounds of the mean time per file, in microseconds."""
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for path, text in files:
            fn(path, text)
        samples.append((time.perf_counter() - start) / len(files) * 1e6)
    return statistics.median(samples)


def main() -> None:
    files = rule_files()
    sizes = [len(t) for _, t in files]
    print(f"{len(files)} rule files, median {statistics.median(sizes):.0f} characters")
    lexer = TxclLexer()
    analysis.diagnostics_for(files[0][1], str(files[0][0]))  # warm imports and caches
    rows = [
        ("lex (pygments tokens)", lambda p, t: list(lexer.get_tokens_unprocessed(t))),
        ("lsp diagnostics (txcl check)", lambda p, t: analysis.diagnostics_for(t, str(p))),
        ("lsp hover at middle", lambda p, t: analysis.hover(t, len(t) // 2)),
        ("lsp completion at end", lambda p, t: analysis.completions(t, len(t))),
        ("lsp outline", lambda p, t: analysis.outline(t, str(p))),
    ]
    for name, fn in rows:
        print(f"{name:32s} {per_file_us(files, fn):9.0f} us/file")
    session = ReplSession({"order": {"total": 120}, "user": {"id": 7}})
    rule = 'WHEN .order.total >= 100\nSET .c = "EUR"\nSELECT .order.total AS .amount\nEMIT .seen = true'

    def repl_rule(_p: Path, _t: str) -> None:
        session.envelope = {"order": {"total": 120}, "user": {"id": 7}}
        session.submit(rule)

    print(f"{'repl: one typed rule':32s} {per_file_us([(Path('-'), '')] * 50, repl_rule):9.0f} us")


if __name__ == "__main__":
    main()
