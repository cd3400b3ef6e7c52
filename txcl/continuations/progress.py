"""A worker's reported progress (`{"status": "running", "progress": …}` heartbeats) in words,
as the wait page, the dashboard and `txcl runs show` print it."""

from __future__ import annotations


def progress_text(progress: object) -> str:
    """A worker's reported progress in words: `42 of 100 done`, its `message`, or its JSON."""
    import json

    if isinstance(progress, dict):
        done, total = progress.get("done"), progress.get("total")
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (done, total))
        if numbers:
            text = f"{done:g} of {total:g} done"
            message = progress.get("message")
            return f"{text}: {message}" if isinstance(message, str) and message else text
        if isinstance(progress.get("message"), str):
            return progress["message"]
    return json.dumps(progress, ensure_ascii=False, separators=(", ", ": "))[:300]


__all__ = ["progress_text"]
