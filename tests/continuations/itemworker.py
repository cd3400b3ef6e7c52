"""A test worker for itemized runs: the TestWorker of contworker.py with two changes.

- its listen backlog fits a whole window of concurrent dispatches (the stdlib default of 5
  resets connections when 25 POSTs arrive at once);
- an item leaves its in-flight count when the worker *decides* to call back, before the
  callback is posted, so the count never includes an item whose completion txcl may already
  have admitted (and replaced by the next promoted item).
"""

from __future__ import annotations

from typing import Any

from contworker import Job, TestWorker, post_json


class ItemWorker(TestWorker):
    __test__ = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server.socket.listen(512)

    def callback(self, job: Job, output: Any = None, *, status: str = "completed", error: Any = None,
                 token: str | None = "<job>", url: str | None = None) -> tuple[int, Any]:
        body: dict[str, Any] = {"status": status}
        if status == "completed":
            body["output"] = output if output is not None else {}
        elif error is not None:
            body["error"] = error
        with self.lock:
            self.in_flight -= 1
        result = post_json(url or job.callback_url, body, job.token if token == "<job>" else token)
        with self.lock:
            self.callbacks.append(result)
        return result
