"""The OPS tree on disk: `layout` (pure path rules), `scan` (walking `OPS/`,
layout diagnostics TX120–TX123 and skipped files for TX240), `tree` (`load_ops`, `OpsTree`,
snapshots)."""
