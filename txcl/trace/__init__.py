"""Traces: `recorder` (per-segment buffer), `redact`, `writer` (group commit),
`reader` (printing for `txcl trace`)."""
