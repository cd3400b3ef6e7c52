"""The step debugger behind `txcl dap`: a Debug Adapter Protocol server over a walk.

- `wire`: the protocol's framing (a `Content-Length` header, then JSON) over a byte stream;
- `breakpoints`: line, function and exception breakpoints, their conditions (TXCL), hit counts
  and log messages;
- `engine`: the `Debugger` a walker calls at every clause it reaches; it decides whether to stop
  there and holds the walk's thread while the client looks;
- `frames`: what a stopped walk shows (stack → scope → rule → clause, and their variables);
- `launch`: the three ways to start a walk (a stack on an input, a test case, a stored request);
- `adapter`: the protocol's requests and events, tying the rest together.

The walk runs in a thread of its own with its own event loop; stopping it blocks that thread,
so nothing in the walker waits differently for being debugged.
"""
