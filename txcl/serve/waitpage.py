"""The browser's wait page and small error pages.

Self-contained HTML (no scripts, no external resources): a `<meta http-equiv="refresh">`
re-requests the same poll URL every `--poll-retry-after`; when the run has finished, that
refresh shows the final answer instead.
"""

from __future__ import annotations

from txcl.continuations.progress import progress_text

import datetime as _dt
import html


def _since(created_ms: int | None) -> str:
    if not created_ms:
        return ""
    moment = _dt.datetime.fromtimestamp(created_ms / 1000.0, tz=_dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def wait_page(*, rcid: str, created_ms: int | None, refresh_s: int, progress: list[dict] | None = None) -> bytes:
    since = _since(created_ms)
    since_html = f"<p>Started {html.escape(since)}.</p>" if since else ""
    if progress:
        items = "".join("<li>" + html.escape(p.get("op") or "") + ": " + html.escape(progress_text(p.get("progress")))
                        + "</li>" for p in progress[:20])
        since_html += '<ul id="txcl-progress">' + items + "</ul>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{int(refresh_s)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Still working…</title>
<style>body{{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}}
small{{color:#666}}</style></head>
<body><h1>Still working on your request</h1>
<p id="txcl-wait">Your request is still being worked on. This page refreshes every {int(refresh_s)} s
and shows the answer as soon as it is ready.</p>
{since_html}
<p><small>continuation {html.escape(rcid)}</small></p>
</body></html>
""".encode("utf-8")


def error_page(*, status: int, title: str, message: str) -> bytes:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>
<body><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p><p><small>HTTP {int(status)}</small></p>
</body></html>
""".encode("utf-8")
