"""What answers in place of the network while a case runs: mocked sync targets and simulated
async workers, on a virtual clock.

- A mocked `http(s)://` target is answered by the test's HTTP transport (httpx's
  MockTransport), so the request is built, sent and read back by the production code; a
  mocked `txco://` or `py://` target is answered through the walker's stand-in hook.
- An async worker answers the dispatch POST with its 202 (or never, `ack: false`) and
  schedules its callback at `after` on the virtual clock; the runner delivers it through the
  callback endpoint's own handler, so duplicates and conflicts are answered as in production.
- An HTTP target that is neither mocked nor a simulated worker is refused (the case fails
  naming it), unless the run allows the network.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from txcl.functions.registry import FunctionEnvironment
from txcl.ruletest.spec import Answer, Case, Mock


class VirtualClock:
    """Milliseconds since the epoch that move only when the runner says so (the store's clock
    and `&now`)."""

    def __init__(self, start_ms: int) -> None:
        self.ms = start_ms

    def __call__(self) -> int:
        return self.ms

    def advance_to(self, ms: int) -> None:
        self.ms = max(self.ms, ms)


class ClockEnvironment(FunctionEnvironment):
    """`&now` and UUIDv7 times read the virtual clock."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock

    def now_ns(self) -> int:
        return self.clock.ms * 1_000_000


@attrs.define
class Delivery:
    """A callback the simulated worker will send."""

    due_ms: int
    seq: int
    opc: str
    token: str | None
    body: dict
    target: str
    kind: str = "callback"  # callback | duplicate | conflicting
    answer: tuple[int, Any] | None = None  # what the callback endpoint answered


@attrs.define
class Call:
    """One call the run made to a stood-in target (for the report)."""

    target: str
    kind: str  # mock | worker | refused
    item_index: int | None = None


def _matches(target: str, url: str) -> bool:
    return target == url or target.rstrip("/") == url.rstrip("/")


def _fill(template: Any, item: Any, index: int) -> Any:
    """`each_output` with {item} / {index} filled in (a whole-string placeholder keeps the
    item's JSON type)."""
    if isinstance(template, str):
        if template == "{item}":
            return item
        if template == "{index}":
            return index
        return template.replace("{index}", str(index)).replace(
            "{item}", item if isinstance(item, str) else json.dumps(item, separators=(",", ":")))
    if isinstance(template, dict):
        return {k: _fill(v, item, index) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, item, index) for v in template]
    return template


class StandIns:
    def __init__(self, case: Case, clock: VirtualClock, allow_network: bool = False) -> None:
        self.case = case
        self.clock = clock
        self.allow_network = allow_network
        self.calls: list[Call] = []
        self.refused: list[str] = []
        self.pending: list[Delivery] = []
        self.sent: list[Delivery] = []
        self._seq = 0
        self._per_target: dict[str, int] = {}
        self._mock_calls: dict[str, int] = {}
        # set by the runner: delivers a callback that is due at once (`after: 0`) while the
        # request still runs, as a worker answering right away would
        self.deliver_now: Any = None

    # -------------------------------------------------------------- sync targets
    def _mock_for(self, text: str) -> tuple[str, Mock] | None:
        """The mock answering this call: its target's answers in call order, the last repeating."""
        for target, answers in self.case.mocks.items():
            if _matches(target, text):
                n = self._mock_calls.get(target, 0)
                self._mock_calls[target] = n + 1
                return target, answers[min(n, len(answers) - 1)]
        return None

    def local(self, target: Any, op_input: dict, op: Any = None) -> Any:
        """The walker's stand-in hook (txco://, py://, mcp+): a mocked answer, or None to call it."""
        from txcl.runtime.dispatch import OpError

        found = self._mock_for(target.text)
        if found is None:
            if target.kind == "mcp" and not self.allow_network:  # a network call: refused
                self.refused.append(target.text)
                self.calls.append(Call(target.text, "refused"))
                raise OpError(f"{target.text} is not mocked: txcl test makes no network calls "
                              "(mock it under `mocks:`, or pass --allow-network)")
            return None
        name, mock = found
        self.calls.append(Call(name, "mock"))
        if mock.error is not None:
            raise OpError(_error_text(mock.error))
        return json.loads(json.dumps(mock.output if mock.output is not None else {}))

    def http_handler(self, request: Any) -> Any:
        """The HTTP transport of sync ops: mocked answers; anything else refused."""
        import httpx

        url = str(request.url)
        found = self._mock_for(url)
        if found is None:
            return self._refuse(url, request)
        name, mock = found
        self.calls.append(Call(name, "mock"))
        if mock.error is not None:
            error = mock.error if isinstance(mock.error, dict) else {"message": _error_text(mock.error)}
            return httpx.Response(500, json={"error": error})
        return httpx.Response(200, json=mock.output if mock.output is not None else {})

    def _refuse(self, url: str, request: Any) -> Any:
        import httpx

        self.refused.append(url)
        self.calls.append(Call(url, "refused"))
        raise httpx.ConnectError(f"{url} is not mocked: txcl test makes no network calls "
                                 "(mock it under `mocks:`, or pass --allow-network)", request=request)

    # -------------------------------------------------------------- async workers
    def _answers_for(self, url: str) -> tuple[str, tuple[Answer, ...]] | None:
        for target, answers in self.case.workers.items():
            if _matches(target, url):
                return target, answers
        return None

    def _worker_answers(self, url: str) -> tuple[str, tuple[Answer, ...]] | None:
        """The simulated worker of `url`: its `workers:` answers, or a mock given for an async
        target (the worker answers at once with its output)."""
        found = self._answers_for(url)
        if found is not None:
            return found
        mocked = self._mock_for(url)
        if mocked is None:
            return None
        name, mock = mocked
        return name, (Answer(status="failed" if mock.error is not None else "completed",
                             output=mock.output, error=mock.error),)

    def _respond(self, name: str, answers: tuple[Answer, ...], body: dict, opc: str | None,
                 token: str | None) -> Answer:
        """Pick this call's answer and schedule its callback(s)."""
        index = (body.get("_txc") or {}).get("item_index")
        call = self._per_target.get(name, 0)
        self._per_target[name] = call + 1
        answer = answers[min(call, len(answers) - 1)] if len(answers) > 1 else answers[0]
        self.calls.append(Call(name, "worker", index))
        if answer.ack and answer.after_ms is not None and opc:
            payload = self._payload(answer, body, index)
            due = self.clock.ms + answer.after_ms
            self._schedule(Delivery(due, 0, opc, token, payload, name))
            for _ in range(answer.duplicate):
                self._schedule(Delivery(due, 0, opc, token, payload, name, kind="duplicate"))
            if answer.conflicting is not None:
                self._schedule(Delivery(due, 0, opc, token, {"status": "completed", "output": answer.conflicting},
                                        name, kind="conflicting"))
        return answer

    def worker_handler(self, request: Any) -> Any:
        """The transport of worker dispatches: ack 202 (or not), schedule the callback."""
        import httpx

        url = str(request.url)
        found = self._worker_answers(url)
        if found is None:
            return self._refuse(url, request)
        body = json.loads(request.content or b"{}")
        opc = (body.get("_txc") or {}).get("op_continuation_id")
        answer = self._respond(*found, body, opc, request.headers.get("x-txco-continuation-token"))
        if not answer.ack:
            raise httpx.ReadTimeout(f"the simulated worker {found[0]} never acks", request=request)
        return httpx.Response(202, json={"job_id": f"sim-{len(self.calls)}"})

    def in_process(self, dispatch: Any) -> bool:
        """An async call txcl itself would make (an `mcp+` tool) or a job a worker would claim
        (`queue://`): answered by the simulated worker of its target like an HTTP worker
        (True), or refused as a failed call; False (make the real call) only for an `mcp+`
        target with --allow-network and no stand-in for it (no worker claims jobs here)."""
        target = dispatch.exec_target or ""
        found = self._worker_answers(target)
        body = {"input": dispatch.input, "_txc": {"op_continuation_id": dispatch.opc,
                                                 "item_index": dispatch.item_index if dispatch.kind == "itemized"
                                                 else None}}
        queued = target[:8].lower() == "queue://" or target[:7].lower() == "nats://"
        if found is None:
            if self.allow_network and not queued:
                return False
            self.refused.append(target)
            self.calls.append(Call(target, "refused"))
            message = (f"nothing claims the jobs of {target} in txcl test: give its answers under `workers:`"
                       if queued else
                       f"{target} is not mocked: txcl test makes no network calls "
                       "(give it under `workers:` or `mocks:`, or pass --allow-network)")
            self._schedule(Delivery(self.clock.ms, 0, dispatch.opc, dispatch.token,
                                    {"status": "failed", "error": {"message": message}}, target))
            return True
        answer = self._respond(*found, body, dispatch.opc, dispatch.token)
        if not answer.ack:  # nobody to wait for: the call failed at once
            self._schedule(Delivery(self.clock.ms, 0, dispatch.opc, dispatch.token,
                                    {"status": "failed", "error": {"message": f"{found[0]}: no answer"}}, found[0]))
        return True

    def _payload(self, answer: Answer, body: dict, index: Any) -> dict:
        if answer.status == "failed":
            return {"status": "failed", "error": answer.error if answer.error is not None else
                    {"message": "the simulated worker failed"}}
        i = index if isinstance(index, int) else 0
        if answer.outputs is not None:
            output = answer.outputs[i] if i < len(answer.outputs) else {}
        elif answer.each_output is not None:
            output = _fill(answer.each_output, body.get("input"), i)
        else:
            output = answer.output if answer.output is not None else {}
        return {"status": "completed", "output": output}

    def _schedule(self, delivery: Delivery) -> None:
        self._seq += 1
        delivery.seq = self._seq
        if delivery.due_ms <= self.clock.ms and self.deliver_now is not None:
            self.sent.append(delivery)
            self.deliver_now(delivery)
            return
        self.pending.append(delivery)

    def next_delivery(self) -> Delivery | None:
        """The earliest callback due (dispatch order among equal times)."""
        if not self.pending:
            return None
        best = min(self.pending, key=lambda d: (d.due_ms, d.seq))
        self.pending.remove(best)
        self.sent.append(best)
        return best


def _error_text(error: Any) -> str:
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return json.dumps(error)


__all__ = ["VirtualClock", "ClockEnvironment", "StandIns", "Delivery", "Call"]
