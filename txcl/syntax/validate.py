"""Per-rule load checks (placeholder)."""
from __future__ import annotations


def validate_rule(rule, filename):
    return []
