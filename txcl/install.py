"""The pip command that installs an extra of txcl where the user is: txcl is installed from a
checkout or a wheel file (it is not on a package index yet), so `pip install 'txcl[serve]'`
would fail. pip records where a distribution came from (`direct_url.json`); the command names
the same place."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlsplit


def install_command(extras: str) -> str:
    """`pip install …` adding `extras` (e.g. "serve" or "serve,postgres") to this txcl."""
    from importlib import metadata

    try:
        text = metadata.distribution("txcl").read_text("direct_url.json")
    except Exception:  # noqa: BLE001 - no metadata at all: running from a source tree
        text = None
    if text:
        try:
            info = json.loads(text)
        except ValueError:
            info = {}
        url = info.get("url", "") if isinstance(info, dict) else ""
        if url.startswith("file://"):
            if isinstance(info.get("dir_info"), dict):
                path = unquote(urlsplit(url).path)
                editable = "-e " if info["dir_info"].get("editable") else ""
                return f"pip install {editable}'{path}[{extras}]'"
            if "archive_info" in info:
                return f"pip install 'txcl[{extras}] @ {url}'"
    root = Path(__file__).resolve().parent.parent
    project = root / "pyproject.toml"
    if project.is_file() and 'name = "txcl"' in project.read_text(encoding="utf-8", errors="replace"):
        return f"pip install -e '{root}[{extras}]'"  # a checkout on the path
    return f"pip install 'txcl[{extras}]'"


def missing_extra(what: str, extra: str) -> str:
    """`<what> needs the '<extra>' extra, which is not installed: <command>`."""
    return f"{what} needs the '{extra}' extra, which is not installed: {install_command(extra)}"


__all__ = ["install_command", "missing_extra"]
