"""The tables a txcl configuration file may hold, checked in one place.

`txcl.toml` (or `[tool.txcl]` in pyproject.toml) holds four tables: `[serve]` (runtime and
server settings), `[egress]` (what ops may reach), `[lmtp]` (mail in) and `[check]` (the linter). Any other key — a misspelled table, or a lint
key such as `select` written at the top level — is an error naming the file and the key,
with a suggestion. (Unlike ruff, lint keys are not accepted at the top level: one place per
setting keeps `txcl.toml` unambiguous.)
"""

from __future__ import annotations

from typing import Any

TABLES = ("serve", "check", "egress", "lmtp")
LINT_KEYS = ("select", "ignore", "extend-select", "extend-ignore", "per-file-ignores", "severity", "exclude",
             "extend-exclude", "allow")


def top_level_problem(table: Any, where: str) -> str | None:
    """What is wrong with the top level of a configuration table (None: nothing)."""
    if not isinstance(table, dict):
        return f"{where}: must be a table"
    check = "[tool.txcl.check]" if "tool.txcl" in where else "[check]"
    for key in table:
        if key in TABLES:
            continue
        if key.replace("_", "-") in LINT_KEYS:
            return f"{where}: {key!r} is a lint setting: put it under {check}"
        from txcl.suggest import did_you_mean

        close = did_you_mean(key, TABLES)
        hint = f" (did you mean {close!r}?)" if close else f" (expected {' or '.join(TABLES)})"
        return f"{where}: unknown table {key!r}{hint}"
    return None


__all__ = ["TABLES", "LINT_KEYS", "top_level_problem"]
