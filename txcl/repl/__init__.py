"""The TXCL REPL (`txcl repl`).

- `session.ReplSession`: the working envelope and everything an entry does (no terminal).
- `entry`: classifying entries, deciding when a multi-line rule is complete.
- `completion`: keyword/function/path/WITH-key/scheme completion as a plain function.
- `render`: JSON, envelope diffs, colours.
- `app`: the prompt-toolkit loop and the batch mode for piped input.
"""
