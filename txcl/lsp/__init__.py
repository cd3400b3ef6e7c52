"""The TXCL language server (`txcl lsp`).

- `server`: pygls wiring and LSP type/position conversion.
- `analysis`: diagnostics, hover, completion, outline and formatting over document text.
- `positions`: txcl (1-based, code points) ↔ LSP (0-based, UTF-16/8/32 units) positions.
- `vocabulary`: keywords, WITH keys, EXEC schemes and functions with their docs (shared
  with the REPL).
"""
