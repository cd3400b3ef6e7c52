"""`github`: GitHub Actions workflow commands (`::error file=…,line=…::message`)."""

from __future__ import annotations

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(result, color: bool = False) -> str:
    lines = []
    for d in result.diagnostics:
        props = [f"file={_prop(d.file)}", f"line={d.line}", f"col={d.column}"]
        if d.end_line >= d.line:
            props += [f"endLine={d.end_line}", f"endColumn={d.end_column}"]
        props.append(f"title={_prop(f'{d.code} {d.name}'.strip())}")
        message = d.message + (f" (hint: {d.hint})" if d.hint else "")
        lines.append(f"::{LEVEL.get(d.severity, 'error')} {','.join(props)}::{_data(f'{d.code} {message}')}")
    return "\n".join(lines) + ("\n" if lines else "")
