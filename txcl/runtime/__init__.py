"""The interpreter.

- `interpreter.Interpreter` — the Python API: `await run(envelope, stack=...)` /
  `run_sync(...)` return `Completed`, `Failed` or `Suspended`; `drive(run)` steps an existing
  `Run` (a resume) to the end of its segment.
- `walker.Walker` — the scope walk as a state machine: `step(run, rec)` performs one frame
  (`step_local` one of local rules only, in a single call); `enter`, `select_ops`,
  `dispatch_sync`, `tail` and `complete_scope` are the frame's pieces.
- `state` — `Run` (JSON-serialisable position, envelope, budgets, joins), `Frame`,
  `PreparedOp`, `OpOutcome`.
- `hooks.WalkHooks` — where the continuation layer plugs in (at a frame's entry, when a scope's ops are prepared, at a segment's end).
- `budget`, `loop`, `kv`, `config` (the runtime settings).
- `dispatch` + `schemes/` — EXEC classification and the txco/http/py/goto transports.
"""
