"""`concise`: one line per finding, `path:line:col: CODE message`."""

from __future__ import annotations

from txcl.check.formats.full import headline


def render(result, color: bool = False) -> str:
    lines = [headline(d, color) for d in result.diagnostics]
    return "\n".join(lines) + ("\n" if lines else "")
