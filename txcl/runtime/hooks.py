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
    def frame_checks_due(self, run: "Run") -> bool:
        """Whether `join_check` may have work at the next frame of `run` (False: it would
        return at once, so the walker may run a scope of local rules without calling it)."""

    async def join_check(self, walker: "Walker", run: "Run", frame: "Frame") -> None:
        """At a frame's entry: merge ready deferred results into `run.envelope`, or suspend/fail the run."""

    async def dispatch_special(self, walker: "Walker", run: "Run", frame: "Frame",
                               ops: list["PreparedOp"]) -> list["PreparedOp"]:
        """When a scope's ops are prepared: take deferred, continuable and async ops; return the sync ops left.

        May suspend the run (set `run.status = "suspended"`), fail it, or put finished
        outputs into `frame.outcomes` (e.g. a continuable op that answered in time)."""

    async def segment_end(self, walker: "Walker", run: "Run") -> None:
        """The segment ended (completed, failed or suspended)."""


class NoHooks:
    """No continuation support: every op is dispatched synchronously."""

    def frame_checks_due(self, run: "Run") -> bool:
        return False

    async def join_check(self, walker: "Walker", run: "Run", frame: "Frame") -> None:
        return None

    async def dispatch_special(self, walker: "Walker", run: "Run", frame: "Frame",
                               ops: list["PreparedOp"]) -> list["PreparedOp"]:
        return ops

    async def segment_end(self, walker: "Walker", run: "Run") -> None:
        return None
