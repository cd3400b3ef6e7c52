"""Where the continuations layer plugs into the walk.

The walker calls these at fixed points; the default does nothing special, so async and
continuable modes fall back to synchronous dispatch when no continuation support is
installed. A hook signals a suspend or a failure by changing `run.status` (suspension is a
normal outcome, never an exception).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.runtime.walker import Walker


class WalkHooks(Protocol):
    async def join_check(self, walker: "Walker", run: "Run", frame: "Frame") -> None:
        """Step 3: merge ready deferred results into `run.envelope`, or suspend/fail the run."""

    async def dispatch_special(self, walker: "Walker", run: "Run", frame: "Frame",
                               ops: list["PreparedOp"]) -> list["PreparedOp"]:
        """Steps 8–11: take deferred, continuable and async ops; return the sync ops left.

        May suspend the run (set `run.status = "suspended"`), fail it, or put finished
        outputs into `frame.outcomes` (e.g. a continuable op that answered in time)."""

    async def segment_end(self, walker: "Walker", run: "Run") -> None:
        """Step 17: the segment ended (completed, failed or suspended)."""


class NoHooks:
    """No continuation support: every op is dispatched synchronously."""

    async def join_check(self, walker: "Walker", run: "Run", frame: "Frame") -> None:
        return None

    async def dispatch_special(self, walker: "Walker", run: "Run", frame: "Frame",
                               ops: list["PreparedOp"]) -> list["PreparedOp"]:
        return ops

    async def segment_end(self, walker: "Walker", run: "Run") -> None:
        return None
