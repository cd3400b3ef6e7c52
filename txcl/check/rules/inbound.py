"""TX244 unknown-cron-field: a read of `@cron.<field>` that the tick envelope never holds."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule, read_paths
from txcl.errors import Diagnostic


@file_rule("TX244")
def unknown_cron_field(ctx: FileContext) -> Iterator[Diagnostic]:
    from txcl.suggest import did_you_mean
    from txcl.vocabulary import CRON_FIELDS

    for path in read_paths(ctx.rule):
        segments = tuple(path.segments)
        if len(segments) < 3 or segments[:2] != ("_txc", "cron"):
            continue
        field = segments[2]
        if field in CRON_FIELDS:
            continue
        close = did_you_mean(field, list(CRON_FIELDS))
        yield ctx.diag("TX244", path.span, f"@cron.{field} is not a field of the cron tick; the read is always missing",
                       hint=f"did you mean @cron.{close}?" if close else
                       f"the fields are {', '.join(CRON_FIELDS)}")
