"""Per-code documentation, as read from the rule-code table (:mod:`txcl.codes`).

Each code's explanation, bad and good examples live in its one entry there; this module
only renders them: `txcl rule TXnnn`, SARIF help texts and the reference page read it. For
tree-level codes the examples are file layouts (one `path: text` per line).
"""

from __future__ import annotations

from txcl.codes import CODES, CodeInfo


def markdown(entry: CodeInfo) -> str:
    return f"{entry.explanation}\n\nBad:\n\n```\n{entry.bad}\n```\n\nGood:\n\n```\n{entry.good}\n```\n"


def text(entry: CodeInfo) -> str:
    indent = lambda s: "\n".join("    " + line for line in s.splitlines())  # noqa: E731
    fixable = " (safe fix: txcl check --fix)" if entry.fixable else ""
    return (f"{entry.code} {entry.name} ({entry.severity}){fixable}\n\n{entry.explanation}\n\n"
            f"Bad:\n{indent(entry.bad)}\n\nGood:\n{indent(entry.good)}\n")


# every documented code (all of them: a test keeps it so)
DOCS: dict[str, CodeInfo] = {code: entry for code, entry in CODES.items() if entry.documented}


def doc(code: str) -> CodeInfo | None:
    return DOCS.get(code.upper())


__all__ = ["DOCS", "doc", "markdown", "text"]
