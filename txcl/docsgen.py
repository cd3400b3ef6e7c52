"""Reference pages generated from the code, for the documentation site (`mkdocs.yml` runs
`docs/hooks.py`, which calls these at build time; the test suite calls them too).

- `functions_page()`: the function registry — signature, arity, what it returns, whether it
  is deterministic, and examples whose results are computed here, so the page cannot drift.
- `rule_codes_page()`: the rule-code table with the explanation and the bad and good example
  of each code (the text of `txcl rule`).
- `settings_page()`: every runtime setting — flag, environment variable, configuration key,
  default, kind of value and meaning.
- `cli_page()`: every command and option, from the click commands.
"""

from __future__ import annotations

import json
from typing import Any

#: Examples of every function: (expression, envelope). The page shows each with the result
#: computed when the site is built (time and randomness fixed: 2026-01-02T03:04:05Z).
FUNCTION_EXAMPLES: dict[str, list[tuple[str, dict]]] = {
    "add": [("&add(2, 3)", {}), ("&add(.price, 0.5)", {"price": 10})],
    "sub": [("&sub(10, 4)", {}), ("&sub(.total, .discount)", {"total": 100, "discount": 12.5})],
    "mul": [("&mul(.total, 0.8)", {"total": 125}), ("&mul(6, 7)", {})],
    "div": [("&div(10, 4)", {}), ("&div(9, 3)", {}), ("&div(1, 0)", {})],
    "mod": [("&mod(17, 5)", {}), ("&mod(-17, 5)", {})],
    "concat": [('&concat("order ", .id, ": ", .qty, " items")', {"id": "A7", "qty": 3}),
               ('&concat("a", .missing, "b")', {})],
    "join": [('&join(.tags, ", ")', {"tags": ["tea", "pot", 3]})],
    "split": [('&split("a,b,c", ",")', {}), ('&split("abc", "")', {})],
    "len": [('&len("tea")', {}), ("&len(.items)", {"items": [1, 2, 3]}), ('&len("é")', {})],
    "substr": [('&substr("teapot", 0, 3)', {})],
    "pad": [('&pad("7", 3, "0")', {}), ('&pad("7", -3, ".")', {})],
    "repeat": [('&repeat("ab", 3)', {})],
    "array": [('&array(1, "two", .three)', {"three": 3})],
    "object": [('&object("sku", .sku, "qty", 2)', {"sku": "tea"})],
    "get": [('&get(.order, "items.0.sku")', {"order": {"items": [{"sku": "tea"}]}}),
            ('&get(.order, "missing")', {"order": {}})],
    "has": [('&has(.order, "coupon")', {"order": {"coupon": None}}), ('&has(.order, "x")', {"order": {}})],
    "set": [('&set(.order, "status", "paid")', {"order": {"id": 1}})],
    "json": [("&json(.body)", {"body": '{"a": [1, 2]}'})],
    "to_json": [('&to_json(.order)', {"order": {"b": 1, "a": "<x>"}})],
    "b64encode": [('&b64encode("tea")', {})],
    "b64decode": [('&b64decode("dGVh")', {})],
    "urlencode": [('&urlencode("a b&c")', {})],
    "urldecode": [('&urldecode("a+b%26c")', {})],
    "sha256": [('&sha256("tea")', {})],
    "now": [("&now()", {}), ('&now("rfc3339")', {}), ('&now("millis")', {})],
    "uuid": [("&uuid()", {})],
    "tz": [('&tz("Europe/Paris", "hour", 9)', {})],
    "tz_offsets": [('&tz_offsets("Europe/Paris", "2026-03-28T00:00:00Z", 2)', {})],
    "try_json": [('&try_json("not json")', {})],
    "try_get": [('&try_get("not an object", "a")', {})],
    "try_b64decode": [('&try_b64decode("%%%")', {})],
    "try_urldecode": [('&try_urldecode("%zz")', {})],
    "try_substr": [('&try_substr("tea", 2, 9)', {})],
    "try_tz_offsets": [('&try_tz_offsets("Mars/Base", "2026-01-01T00:00:00Z", 1)', {})],
}

#: A call that fails, for every function that can: the page shows the error it gives.
FUNCTION_ERRORS: dict[str, str] = {
    "add": '&add("two", 1)', "sub": "&sub(1, .missing)", "mul": '&mul(2, "x")', "div": "&div(1, 0)",
    "mod": "&mod(7, 0)", "concat": "", "join": '&join("a,b", ",")', "split": '&split(1, ",")',
    "len": "&len(5)", "substr": '&substr("tea", 2, 1)', "pad": '&pad("7", 3, "")',
    "repeat": '&repeat("ab", -1)', "array": "", "object": '&object(1, "x")',
    "get": '&get("text", "a")', "has": "", "set": '&set(.list, "x", 1)', "json": '&json("{")',
    "to_json": "", "b64encode": "&b64encode(1)", "b64decode": '&b64decode("***")',
    "urlencode": "&urlencode(1)", "urldecode": '&urldecode("%zz")', "sha256": "&sha256(1)",
    "now": '&now("weekly")', "uuid": "", "tz": '&tz("Mars/Base", "hour", 9)',
    "tz_offsets": '&tz_offsets("Europe/Paris", "yesterday", 1)',
}

EXAMPLE_TIME_NS = 1_767_323_045_000_000_000  # 2026-01-02T03:04:05Z


def evaluate_example(expression: str, envelope: dict) -> tuple[bool, Any]:
    """(ok, result or error text) of one example, with time and randomness fixed."""
    from txcl.errors import TxclError
    from txcl.evaluate.expression import eval_expression
    from txcl.functions.registry import FixedEnvironment, use_environment

    with use_environment(FixedEnvironment(EXAMPLE_TIME_NS, random=b"\x42")):
        try:
            return True, eval_expression(expression, dict(envelope))
        except TxclError as exc:
            return False, str(exc).splitlines()[0]


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def functions_page() -> str:
    from txcl.functions.registry import REGISTRY

    out = ["# Functions", "",
           "Functions are called with `&name(arguments)` in SET, EMIT, SELECT … DEFAULT and WITH "
           "values, and with literal arguments in WHEN and UNTIL. Names are case-sensitive; a name "
           "that does not exist or a wrong number of arguments is an error when the rule loads "
           "(TX101, TX102). A call that fails at run time fails the SET or EMIT it is in (the op "
           "goes on with the error as its input, as described in the language reference); the "
           "`try_` forms give null instead.",
           "", "The examples on this page are evaluated when the site is built (with the clock at "
           "2026-01-02T03:04:05Z), so what they show is what txcl does.", "",
           "| Function | Arguments | Returns | Deterministic |", "|---|---|---|---|"]
    specs = sorted(REGISTRY.values(), key=lambda s: (s.name.startswith("try_"), s.name))
    for spec in specs:
        out.append(f"| [`{spec.name}`](#{spec.name}) | {_md_cell(spec.arity_text())} | {_md_cell(spec.doc)} | "
                   f"{'yes' if spec.deterministic else 'no'} |")
    for spec in specs:
        out += ["", f"## {spec.name}", "", f"`&{spec.signature}` — {spec.doc}.", "",
                f"Arguments: {spec.arity_text()}. "
                + ("Deterministic: the same arguments give the same result." if spec.deterministic else
                   "Not deterministic: it reads the clock or randomness, so `txcl check` never evaluates it.")]
        examples = list(FUNCTION_EXAMPLES.get(spec.name, []))
        failing = FUNCTION_ERRORS.get(spec.name)
        if failing:
            examples.append((failing, {"list": [1]} if ".list" in failing else {}))
        elif spec.is_try:
            out += ["", "It never fails: where the plain function fails, it gives null."]
        elif spec.name in ("concat", "array", "to_json"):
            out += ["", "It fails only when its result would be more than 1 MiB larger than the strings it is "
                        "given (the size limit of functions)."]
        elif spec.name in FUNCTION_ERRORS:
            out += ["", "It never fails."]
        if examples:
            out += ["", "| Expression | Envelope | Result |", "|---|---|---|"]
            for expression, envelope in examples:
                ok, result = evaluate_example(expression, envelope)
                shown = f"`{_md_cell(_show(result))}`" if ok else f"error: {_md_cell(result)}"
                env = f"`{_md_cell(_show(envelope))}`" if envelope else ""
                out.append(f"| `{_md_cell(expression)}` | {env} | {shown} |")
    return "\n".join(out) + "\n"


def rule_codes_page() -> str:
    from txcl.codes import CODES, FIXABLE

    families = [("TX0", "Syntax (TX0xx)"), ("TX1", "Rules that cannot load (TX1xx)"),
                ("TX12", None), ("TX2", "Lint findings (TX2xx)"), ("TX3", "Style (TX3xx)"),
                ("TX4", "Rule test files (TX4xx)")]
    out = ["# Rule codes", "",
           "Every problem txcl reports has a stable code. `txcl rule CODE` prints the same "
           "explanation in the terminal; `txcl check --output-format sarif` links here. Errors "
           "stop a tree from loading; warnings and infos are `txcl check` findings that "
           "`# noqa: CODE` can silence.", "",
           "| Code | Name | Severity | Fixable | Summary |", "|---|---|---|---|---|"]
    for code, info in CODES.items():
        out.append(f"| [{code}](#{code.lower()}) | {info.name} | {info.severity} | {'yes' if code in FIXABLE else ''} | "
                   f"{_md_cell(info.summary)} |")
    heading = None
    for code, info in CODES.items():
        title = next((t for prefix, t in families if code.startswith(prefix) and t), None)
        if title != heading and title is not None:
            heading = title
            out += ["", f"## {title}"]
        doc = info if info.documented else None
        fix = " Fixable: `txcl check --fix` rewrites it safely." if code in FIXABLE else ""
        out += ["", f"### {code}", "", f"**{info.name}** ({info.severity}) — {info.summary}.{fix}"]
        if doc is not None:
            out += ["", doc.explanation, "", "Bad:", "", "```", doc.bad, "```", "", "Good:", "", "```", doc.good, "```"]
    return "\n".join(out) + "\n"


def settings_page() -> str:
    from txcl.runtime.config import SETTING_HELP, default_text, settings_keys

    out = ["# Settings", "",
           "Every runtime setting can be given as a command-line flag, an environment variable "
           "or a key of the `[serve]` table of `txcl.toml` (or `[tool.txcl.serve]` in "
           "`pyproject.toml`); a flag wins over the environment, which wins over the file. Keys "
           "use `_` where flags use `-`. Durations are written `250ms`, `5s`, `10m`, `2h`, `7d` "
           "or as milliseconds; sizes as `64KiB`, `30MiB` or bytes.", "",
           "| Flag | Environment | Config key | Default | Kind | Meaning |", "|---|---|---|---|---|---|"]
    for key in settings_keys():
        unit, text = SETTING_HELP[key]
        out.append(f"| `--{key.replace('_', '-')}` | `TXCL_{key.upper()}` | `{key}` | {default_text(key)} | "
                   f"{unit or 'text'} | {_md_cell(text)} |")
    return "\n".join(out) + "\n"


def cli_page() -> str:
    import click

    from txcl.cli.main import LazyGroup, cli

    ctx = click.Context(cli, info_name="txcl", **cli.context_settings)  # -h too, as `txcl … --help` shows
    out = ["# Command line", "", "Every command of `txcl` with its options, as `txcl COMMAND --help` "
           "prints them.", ""]
    for name in LazyGroup().list_commands(ctx):
        command = cli.get_command(ctx, name)
        if command is None:
            continue
        sub = click.Context(command, info_name=f"txcl {name}", parent=ctx)
        formatter = sub.make_formatter()
        formatter.width = 100
        command.format_help(sub, formatter)
        out += [f"## txcl {name}", "", "```text", formatter.getvalue().rstrip(), "```", ""]
    return "\n".join(out)


def runtime_errors_page() -> str:
    from txcl.runtime_codes import all_codes

    out = ["# Runtime error codes", "",
           "What a request, a durable run or a worker's callback answers when something goes wrong "
           "at run time: the body is `{\"error\": {\"code\": \"txcl_…\", \"message\": \"…\", …}}`, and "
           "a failed run records the same object (`txcl runs show`). The code is stable; the message "
           "is for people. (Diagnostics about rule files have `TX…` codes: see "
           "[Rule codes](rule-codes.md).)", "",
           "| Code | HTTP status | Message | Meaning |", "|---|---|---|---|"]
    for entry in all_codes():
        out.append(f"| `{entry.code}` | {entry.http_status} | {_md_cell(entry.template)} | {_md_cell(entry.doc)} |")
    out += ["", "A message's `{fields}` are filled in where the error is raised (the op's name, a "
            "count). The HTTP status is the one a request or callback answers with when the error "
            "ends it; an error inside a run that a client polls is reported in the poll's body."]
    return "\n".join(out) + "\n"


def metrics_page() -> str:
    from txcl.metrics import CATALOGUE, NAMESPACE

    out = ["# Metrics", "",
           "What `txcl serve --metrics` exports on `/_txc/metrics` (Prometheus text format) and what the "
           "OpenTelemetry meter exports when it is configured (the same names, dots for the underscores "
           "after the namespace: `txcl.requests`). Each serve process exports its own numbers; see "
           "[Operating txcl](../operating.md#metrics) for adding them up.", "",
           "| Metric | Kind | Labels | Meaning |", "|---|---|---|---|"]
    for spec in CATALOGUE:
        name = f"{NAMESPACE}_{spec.name}" + ("_total" if spec.kind == "counter" else "")
        labels = ", ".join(f"`{label}`" for label in spec.labels) or "—"
        out.append(f"| `{name}` | {spec.kind} | {labels} | {_md_cell(spec.doc)} |")
    out += ["", "Application metrics (`EMIT @telemetry.metrics`) are exported as `txcl_app_<name>` "
            "(a counter or a histogram, dots in the name become underscores), their attributes as labels.",
            "", "Besides these, the Prometheus endpoint exports the process's own `process_*` and "
            "`python_*` metrics (CPU, memory, open files, garbage collections)."]
    return "\n".join(out) + "\n"


PAGES = {
    "reference/functions.md": functions_page,
    "reference/rule-codes.md": rule_codes_page,
    "reference/runtime-errors.md": runtime_errors_page,
    "reference/settings.md": settings_page,
    "reference/cli.md": cli_page,
    "reference/metrics.md": metrics_page,
}

def write_pages(docs: str = "docs") -> list[str]:
    """Write every generated page under `docs` (what `python -m txcl.docsgen` does); the pages
    are committed, so links to them work on GitHub too, and a test keeps them up to date."""
    from pathlib import Path

    written = []
    for path, make in PAGES.items():
        target = Path(docs) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        text = make()
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(str(target))
    return written


if __name__ == "__main__":
    import sys

    changed = write_pages(sys.argv[1] if len(sys.argv) > 1 else "docs")
    print("\n".join(changed) if changed else "the reference pages are up to date")


__all__ = ["PAGES", "write_pages", "FUNCTION_EXAMPLES", "evaluate_example", "functions_page", "rule_codes_page",
           "settings_page", "cli_page"]
