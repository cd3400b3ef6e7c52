"""`full`: headline, source excerpt with carets, hint; colour on a terminal."""

from __future__ import annotations

from txcl.errors import Diagnostic

COLORS = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "info": "\x1b[1;36m"}
BOLD, DIM, RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


def headline(d: Diagnostic, color: bool) -> str:
    if not color:
        return d.headline()
    code = f"{COLORS.get(d.severity, '')}{d.code}{RESET}"
    return f"{BOLD}{d.file}{RESET}{DIM}:{d.line}:{d.column}:{RESET} {code} {d.message}"


def render_one(d: Diagnostic, source: str | None, color: bool) -> str:
    text = d.render(source=source, color=color)
    first, _, rest = text.partition("\n")
    return headline(d, color) + ("\n" + rest if rest else "")


def render(result, color: bool = False) -> str:
    blocks = [render_one(d, d.source if d.source is not None else result.sources.get(d.file), color)
              for d in result.diagnostics]
    return "\n\n".join(blocks) + ("\n" if blocks else "")
