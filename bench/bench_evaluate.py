"""Evaluation benchmarks (issue: language core). Run: python bench/bench_evaluate.py

Prints medians for a 3-condition WHEN with a regex on a 1 KB envelope, `&concat("a", .x)`
evaluated as a value, and applying a whole rule (SET/SELECT/WITH/EMIT, no EXEC).
Reference (Go) figures on the same machines: WHEN 4.9–6.9 µs, concat 1.0–1.3 µs,
whole rule 39–42 µs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import headline, median_us, report  # noqa: E402

import txcl  # noqa: E402
from txcl.evaluate.rule import finish_output, prepare  # noqa: E402
from txcl.evaluate.values import compile_value  # noqa: E402
from txcl.evaluate.when import when_matches  # noqa: E402
from txcl.values.merge import deep_copy, merge_into  # noqa: E402

RULE = """WHEN .user.id =~ /^u_/ && .amount > 1000
SET .source = "x", .n = &add(.a, 1)
SELECT .body AS .payload DEFAULT "none", .q
WITH timeout = 2000, label = "v2"
PRIORITY 5
EXEC "https://hook.example.com/processed"
EMIT .meta.processed_at = &now("rfc3339")
"""


def envelope_1kb() -> dict:
    env = {
        "user": {"id": "u_12345", "name": "Ada Lovelace", "tier": "gold"},
        "amount": 1500,
        "a": 41,
        "q": "query",
        "body": {"text": "x" * 200},
        "items": [{"sku": f"sku-{i}", "qty": i, "price": 9.5 + i} for i in range(8)],
        "_ts": "2026-11-29T12:00:00.000Z",
        "_txc": {"src": "cli", "rid": "01JXAMPLE0000000000000000", "stack": "shop"},
    }
    while len(json.dumps(env)) < 1024:
        env.setdefault("pad", "")
        env["pad"] += "p" * 32
    return env


def main() -> None:
    rule = txcl.parse_rule(RULE.strip())
    env = envelope_1kb()
    three = txcl.parse_rule('WHEN .user.id =~ /^u_/ && .amount > 1000 && .user.tier == "gold"')
    assert when_matches(three, env)
    # the same with a pattern that is not plain text (`^u_` is answered by str.startswith)
    three_re = txcl.parse_rule('WHEN .user.id =~ /^u_[0-9a-z]+$/ && .amount > 1000 && .user.tier == "gold"')
    assert when_matches(three_re, env)
    concat = compile_value(txcl.parse_rule('SET .x = &concat("a", .a)').set_pre[0].value)

    def whole_rule() -> None:
        prepared = prepare(rule, deep_copy(env))
        finished = finish_output(rule, prepared, {})
        target = deep_copy(env)
        merge_into(target, finished.output)

    small = {"user": {"id": "u_1"}, "amount": 1500, "a": 1, "body": "b", "q": 1}

    def whole_rule_small() -> None:
        prepared = prepare(rule, deep_copy(small))
        finished = finish_output(rule, prepared, {})
        merge_into(dict(small), finished.output)

    text = json.dumps(env)
    print(f"envelope size: {len(text)} bytes")
    yardstick = median_us(lambda: json.dumps(json.loads(text)), 5000)
    report("yardstick: json.loads + json.dumps of the same envelope", yardstick, "µs")
    when_us = median_us(lambda: when_matches(three, env), 20000)
    report("WHEN: 3 conditions incl. regex, 1 KB envelope", when_us, "µs", "≤ 5 µs")
    when_re_us = median_us(lambda: when_matches(three_re, env), 20000)
    report("  the same, the regex not plain text (RE2)", when_re_us, "µs", "≤ 5 µs")
    concat_us = median_us(lambda: concat(env, None), 20000)
    report('&concat("a", .x) as a value', concat_us, "µs", "≤ 2 µs")
    report("whole rule (SET/SELECT/WITH/EMIT + merge), small envelope", median_us(whole_rule_small, 5000), "µs", "≤ 20 µs")
    report("whole rule incl. 2 deep copies of the 1 KB envelope", median_us(whole_rule, 5000), "µs")
    report("  of which: deep_copy of the 1 KB envelope", median_us(lambda: deep_copy(env), 5000), "µs")
    apply_us = median_us(lambda: txcl.apply_rule(rule, env), 2000)
    report("txcl.apply_rule (public API, copies everything), 1 KB", apply_us, "µs")
    base = "json round trip of the envelope"
    headline("WHEN, 3 conditions incl. a regex, 1 KB", when_us, "µs", baseline=base, ratio=when_us / yardstick,
             goal="≤ Go reference (2.8–3.5 µs)")
    headline("  the same, a regex RE2 runs (/^u_[0-9a-z]+$/)", when_re_us, "µs", baseline=base,
             ratio=when_re_us / yardstick, goal="≤ Go reference (2.8–3.5 µs)")
    headline('&concat("a", .a), compiled', concat_us, "µs", baseline=base, ratio=concat_us / yardstick,
             goal="≤ 1.5 × Go (0.73–0.76 µs)")
    headline("txcl.apply_rule, 1 KB envelope", apply_us, "µs", baseline=base, ratio=apply_us / yardstick,
             goal="≤ Go reference (36–40 µs)")

if __name__ == "__main__":
    main()
