"""Benchmarks for the value layer and the function registry.

Run: python bench/bench_functions.py
Prints medians in microseconds (and the deep_copy / copy.deepcopy ratio).
"""

from __future__ import annotations

import copy
import statistics
import timeit

from txcl.functions.registry import REGISTRY, call
from txcl.values import jsonio, paths
from txcl.values.merge import deep_copy, merge, merge_into


def envelope_1k() -> dict:
    env = {
        "_ts": "2026-11-29T10:00:00.000Z",
        "_txc": {"src": "http", "rid": "01JDXYZABCDEFGHJKMNPQRSTVW", "stack": "shop",
                 "web": {"req": {"method": "POST", "path": "/api/orders",
                                 "headers": {"content-type": ["application/json"],
                                             "user-agent": ["bench/1.0"]}}}},
        "order": {"id": 1234, "customer": {"name": "Ada Lovelace", "email": "ada@example.com",
                                           "tier": "gold"},
                  "items": [{"sku": f"SKU-{i}", "qty": i, "price": 9.99 + i} for i in range(9)],
                  "total": 123.45, "currency": "EUR"},
        "flags": {"beta": True, "discount": None},
        "shipping": {"address": {"street": "12 Analytical Engine Row", "city": "London",
                                 "postcode": "NW1 2DB", "country": "GB"},
                     "method": "express", "eta_days": 2, "insured": False},
        "notes": ["gift wrap", "leave at the door", "call before delivery"],
    }
    return env


def median_us(stmt, number: int, repeat: int = 7) -> float:
    times = timeit.repeat(stmt, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def main() -> None:
    env = envelope_1k()
    size = len(jsonio.dumps(env))
    out = {"order": {"status": "priced", "discount": {"pct": 10}}, "tags": ["a", "b"]}

    concat_spec = REGISTRY["concat"]
    results = {
        'call("concat", ["a", x])': median_us(lambda: call("concat", ["a", "bcd"]), 200_000),
        'concat impl direct': median_us(lambda: concat_spec.impl(["a", "bcd"]), 200_000),
        'call("concat", ["a", 42])': median_us(lambda: call("concat", ["a", 42]), 200_000),
        "paths.read hit (4 segments)": median_us(
            lambda: paths.read(env, ("order", "items", "3", "sku")), 200_000),
        "paths.read miss (2 segments)": median_us(
            lambda: paths.read(env, ("order", "nope")), 200_000),
        "merge(env, small output) [copy]": median_us(lambda: merge(env, out), 20_000),
        "merge_into(copy, small output)": median_us(
            lambda: merge_into(deep_copy(env), out), 20_000),
        "jsonio.dumps(env)": median_us(lambda: jsonio.dumps(env), 20_000),
        "jsonio.loads(text)": median_us(lambda: jsonio.loads(jsonio_text), 20_000),
    }
    dc = median_us(lambda: deep_copy(env), 20_000)
    cdc = median_us(lambda: copy.deepcopy(env), 5_000)
    results["deep_copy(env)"] = dc
    results["copy.deepcopy(env)"] = cdc

    print(f"envelope: {size} bytes of JSON")
    width = max(len(k) for k in results)
    for name, us in results.items():
        print(f"{name:<{width}}  {us:8.2f} µs")
    print(f"{'copy.deepcopy / deep_copy':<{width}}  {cdc / dc:8.1f} x")


jsonio_text = jsonio.dumps(envelope_1k())

if __name__ == "__main__":
    main()
