"""What the mechanisms (barrier, deferred join, continuable, itemized) need from around them,
as protocols: the walker's op runner and the process's continuation service. The mechanisms
import these, never the service or the walker themselves, so each reads on its own."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, Sequence, TypeVar

from txcl.store.protocol import ContinuationStore
from txcl.store.records import AdmitResult, ClaimRecord, Dispatch, ReleaseResult

if TYPE_CHECKING:
    from txcl.ops.tree import OpRule, OpsTree
    from txcl.syntax.targets import ExecTarget
    from txcl.runtime.config import Settings
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.trace.recorder import TraceRecorder

T = TypeVar("T")


class OpRunner(Protocol):
    """The walker's public op-running interface (``txcl.runtime.walker.Walker``)."""

    tree: "OpsTree"
    settings: "Settings"

    def facts(self, op: "OpRule") -> Any: ...

    async def run_op(self, run: "Run", frame: "Frame", pop: "PreparedOp", rec: "TraceRecorder") -> None: ...

    async def run_frame(self, run: "Run", frame: "Frame", rec: "TraceRecorder") -> None: ...

    async def call_target(self, run: "Run", frame: "Frame", pop: "PreparedOp", target: "ExecTarget", op_input: dict,
                          directives: dict, timeout_ms: int) -> tuple[Any, Any]: ...

    def stamped_input(self, frame: "Frame", pop: "PreparedOp", target: "ExecTarget", source: dict) -> dict: ...

    def tail(self, run: "Run", frame: "Frame", pop: "PreparedOp", raw: Any, trusted: bool,
             http_info: Any = None) -> tuple[dict | None, str | None, list[str]]: ...

    def finish_op(self, run: "Run", frame: "Frame", pop: "PreparedOp", raw: Any, trusted: bool, transport: str,
                  started_wall: float, started: float, rec: "TraceRecorder", *, input_value: Any = None,
                  http_info: Any = None, extra: dict | None = None) -> None: ...

    def record_step(self, run: "Run", frame: "Frame", pop: "PreparedOp", status: str, transport: str,
                    started_wall: float, started: float, rec: "TraceRecorder", *, error: str | None = None,
                    input_value: Any = None, output_value: Any = None, extra: dict | None = None) -> None: ...

    def note_dropped(self, rec: "TraceRecorder", pop: "PreparedOp", dropped: list[str]) -> None: ...

    def merge_outputs(self, run: "Run", stage: str, outputs: list[tuple[str, dict | None]], ran: list["OpRule"],
                      rec: "TraceRecorder") -> list["OpRule"]: ...

    def complete_scope(self, run: "Run", frame: "Frame", rec: "TraceRecorder") -> None: ...

    def redaction_paths(self, stack: str) -> tuple[set, set]: ...


class ContinuationServices(Protocol):
    """The process's continuation service as the mechanisms use it."""

    store: ContinuationStore
    settings: "Settings"
    inflight: dict[str, asyncio.Future]

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One store call, off the event loop (the one way async code reaches the store)."""

    async def call_batched(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A store call of one write transaction that may share its commit with others."""

    async def call_batched_on(self, run_id: str | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call_batched`` for a call that writes one run's records (on that run's store thread)."""

    async def call_admitting(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call_batched`` for an admission returning ``(admit, release)``; a release won
        comes back with its resume's bundle read on its claim."""

    async def call_admitting_on(self, runs: tuple[str, ...], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call_admitting`` for an admission of a call of `runs` (empty: not known)."""

    def run_of(self, opc: str) -> tuple[str, ...]:
        """The run of a call this process sent (empty: not known here)."""

    def snapshot_of(self, tree: "OpsTree") -> tuple[str, bytes]: ...

    async def send(self, dispatches: Sequence[Dispatch], origin_rid: str | None = None
                   ) -> tuple[list[Any], list[ClaimRecord]]: ...

    async def send_then(self, dispatches: Sequence[Dispatch], origin_rid: str | None = None,
                        after: Callable[[], Any] | None = None) -> tuple[list[Any], list[ClaimRecord], Any]: ...

    async def complete(self, opc: str, status: str, payload: Any, *, source: str, token: str | None = None,
                       best_effort: bool = False, transport: str | None = None
                       ) -> tuple[AdmitResult, ReleaseResult | None]: ...

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task: ...

    def start_resume(self, claim: ClaimRecord) -> None: ...

    def notify_run(self, run_id: str | None) -> None: ...


__all__ = ["OpRunner", "ContinuationServices"]
