"""The test corpus of rules: every `.txcl` file of the repository and every rule written as
a string in the tests, with envelopes that put values of every JSON kind at the paths a rule
reads. Shared by the differential tests (generated code against the reference closures,
fused scopes against the general walk)."""

from __future__ import annotations

import ast as pyast
import copy
import random
from pathlib import Path
from typing import Any, Iterator

from txcl.errors import TxclError
from txcl.functions.registry import lookup
from txcl.syntax import ast
from txcl.syntax.parser import parse_rule
from txcl.values.paths import PathError, write

ROOT = Path(__file__).resolve().parents[1]

# What may stand at a path a rule reads: every JSON kind, and the awkward ones.
SAMPLES: list[Any] = [None, True, False, 0, 1, -3, 7, 2.5, -0.0, 1e300, 2**70, "", "gold", "u_12",
                      "10", "1e3", "true", "T", "  5", "héllo", [], [1, "a"], [{"k": "v"}], {}, {"k": 2}]


def corpus_texts() -> Iterator[tuple[str, str]]:
    for path in sorted(ROOT.rglob("*.txcl")):
        if ".git" not in path.parts:
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8", errors="replace")
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = pyast.parse(path.read_text(encoding="utf-8"))
        for node in pyast.walk(tree):
            if isinstance(node, pyast.Constant) and isinstance(node.value, str) and (
                    "WHEN" in node.value or "SET" in node.value or "EMIT" in node.value or "WITH" in node.value):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node.value


def corpus_rules() -> list[tuple[str, ast.Rule]]:
    rules = []
    for where, text in corpus_texts():
        try:
            rules.append((where, parse_rule(text)))
        except (TxclError, RecursionError, ValueError):
            continue
    return rules


def paths_read(node: Any) -> list[tuple[str, ...]]:
    """Every path a node reads (both sides of comparisons, call arguments)."""
    if isinstance(node, ast.Path):
        return [node.segments]
    if isinstance(node, ast.Comparison):
        return [node.left.segments, *paths_read(node.right)]
    if isinstance(node, ast.Not):
        return paths_read(node.operand)
    if isinstance(node, (ast.And, ast.Or)):
        return [p for item in node.items for p in paths_read(item)]
    if isinstance(node, ast.Call):
        return [p for arg in node.args for p in paths_read(arg)]
    return []


def deterministic(node: Any) -> bool:
    if isinstance(node, ast.Call):
        spec = lookup(node.name)
        return bool(spec is None or spec.deterministic) and all(deterministic(a) for a in node.args)
    if isinstance(node, ast.Comparison):
        return deterministic(node.right)
    if isinstance(node, ast.Not):
        return deterministic(node.operand)
    if isinstance(node, (ast.And, ast.Or)):
        return all(deterministic(item) for item in node.items)
    return True


def envelopes_for(paths: list[tuple[str, ...]], rnd: random.Random, count: int) -> list[dict]:
    envelopes: list[dict] = [{}]
    for _ in range(count):
        env: dict = {}
        for segments in paths:
            if not segments or rnd.random() < 0.15:
                continue
            try:
                env = write(env, segments, copy.deepcopy(rnd.choice(SAMPLES)))  # never share a sample
            except PathError:
                continue
            if not isinstance(env, dict):
                env = {}
        envelopes.append(env)
    return envelopes
