"""`txcl test [PATHS]`: run the rule tests (`*.test.yaml`, `*.test.yml`, `*.test.json`).

Exit status: 0 every case passed, 1 a case failed (or coverage is under --fail-under),
2 a usage error, a test file or an OPS tree that does not load, or no test file found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from txcl.cli.common import color_option, fail, use_color


@click.command("test")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("-k", "select", metavar="SUBSTRING", help="Run only the cases whose name contains SUBSTRING.")
@click.option("-x", "--exitfirst", "stop_first", is_flag=True, help="Stop at the first failing case.")
@click.option("--output-format", type=click.Choice(["full", "concise", "json", "junit"]), default="full",
              show_default=True, help="How the report is written.")
@click.option("-o", "--output-file", "output_file", type=click.Path(dir_okay=False),
              help="Write the report to FILE in --output-format; the summary still goes to the terminal.")
@click.option("--coverage", is_flag=True, help="Measure which rules, conditions and scopes the cases exercise.")
@click.option("--coverage-report", type=click.Choice(["table", "json", "lcov"]), default="table", show_default=True,
              help="The coverage report's format (implies --coverage).")
@click.option("--coverage-file", type=click.Path(dir_okay=False),
              help="Write the coverage report to FILE instead of the terminal (implies --coverage).")
@click.option("--fail-under", type=click.FloatRange(0, 100), metavar="PCT",
              help="Exit 1 when the rule coverage is below PCT percent (implies --coverage).")
@click.option("--update", is_flag=True,
              help="Rewrite each failing case's expect.envelope with what it produced, keeping comments and order.")
@click.option("--allow-network", is_flag=True,
              help="Let EXEC targets that are not mocked call the network (off: such a call fails its case).")
@click.option("--ops-fixtures/--no-ops-fixtures", default=True, show_default=True,
              help="Also run each op's mock-request.json / mock-response.json pair as a case.")
@click.option("--workspace", type=click.Path(file_okay=False), default=None,
              help="The workspace (the folder holding OPS/); default: found from the first path or here.")
@click.option("--generate", "generate", type=click.IntRange(1, 100_000), metavar="N", default=None,
              help="Instead of the test files: walk each typed stack (one with a schema.json) over N inputs "
                   "generated from its $defs.input, its ops answered from their $defs.output; print the "
                   "smallest failing input as a ready-to-paste case.")
@click.option("--seed", type=int, default=0, show_default=True, help="With --generate: the random seed.")
@color_option
def command(paths: tuple[str, ...], select: str | None, stop_first: bool, output_format: str,
            output_file: str | None, coverage: bool, coverage_report: str, coverage_file: str | None,
            fail_under: float | None, update: bool, allow_network: bool, ops_fixtures: bool,
            workspace: str | None, generate: int | None, seed: int, color: str) -> None:
    """Run rule tests: each case runs a stack over its input with mocked ops and simulated
    workers on a virtual clock, and checks the outcome."""
    from txcl.errors import TxclLoadError
    from txcl.ops.tree import WorkspaceNotFound, find_workspace, load_ops
    from txcl.ruletest import report
    from txcl.ruletest.session import run_session
    from txcl.runtime.config import ConfigError, load_settings

    coverage = coverage or fail_under is not None or coverage_file is not None or coverage_report != "table"
    start = workspace or (paths[0] if paths else ".")
    try:
        root, _ = find_workspace(start if Path(start).is_dir() else str(Path(start).parent))
    except WorkspaceNotFound as exc:
        fail(str(exc))
    try:
        settings = load_settings(root, {})
    except ConfigError as exc:
        fail(str(exc))
    colored = use_color(color)
    try:
        tree = load_ops(root)
    except TxclLoadError as exc:
        from txcl.cli.common import print_error

        print_error(exc, color)
        fail(f"the OPS tree failed to load ({len(exc.diagnostics)} error{'s' if len(exc.diagnostics) != 1 else ''})")
    targets = list(paths) or [str(root)]
    if generate is not None:
        _generate(tree, settings, root, targets, generate, seed)
    from txcl.ruletest.spec import discover

    from txcl.ruletest.fixtures import fixture_ops

    if not discover(targets) and not (ops_fixtures and fixture_ops(tree)):
        fail(f"no test files (*.test.yaml, *.test.yml, *.test.json) under {', '.join(targets)}, "
             "and no op has a mock-request.json / mock-response.json pair")
    observers = []
    collector = None
    if coverage:
        from txcl.ruletest.coverage import CoverageCollector

        collector = CoverageCollector(tree)
        observers.append(collector)
    session = run_session(targets, workspace=root, tree=tree, settings=settings, select=select,
                          stop_first=stop_first, allow_network=allow_network, observers=observers,
                          ops_fixtures=ops_fixtures)
    from txcl.check.engine import display_path

    for diag in sorted(session.diagnostics, key=lambda d: (d.file, d.line, d.column)):
        # relative to the current folder, as txcl check shows files
        click.echo(diag.with_file(display_path(diag.file)).render(color=colored), err=True)
    if session.load_failed:
        errors = sum(1 for d in session.diagnostics if d.severity == "error")
        fail(f"{errors} problem{'s' if errors != 1 else ''} in the test files; no case ran")
    text = report.render(session, output_format, colored and output_file is None)
    if output_file:
        Path(output_file).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        click.echo(report.summary(session, colored))
    else:
        click.echo(text)
    if update and session.failed:
        from txcl.ruletest.update import update_expectations

        changed = update_expectations(session)
        click.echo(f"updated {changed} case{'s' if changed != 1 else ''}' expect.envelope", err=True)
    code = 1 if session.failed else 0
    if collector is not None:
        from txcl.ruletest.coverage import render_coverage

        text = render_coverage(collector, coverage_report, root)
        if coverage_file:
            Path(coverage_file).write_text(text, encoding="utf-8")
        else:
            click.echo(text)
        total = collector.percent()
        if fail_under is not None and total < fail_under:
            click.echo(f"txcl: coverage {total:.1f}% is under --fail-under {fail_under:g}%", err=True)
            code = 1
    raise SystemExit(code)


def _generate(tree: Any, settings: Any, root: Path, targets: list[str], count: int, seed: int) -> None:
    """`--generate N`: property-based runs of each typed stack under the targets; exit 1 on a failure."""
    from txcl.cli.common import require_extra
    from txcl.ops.scan import scan_ops
    from txcl.ruletest.generate import generate_stack
    from txcl.ruletest.runner import run_case

    require_extra("generate", "txcl test --generate")
    schemas = scan_ops(root / "OPS").stack_schemas
    wanted = [Path(t).resolve() for t in targets]
    stacks = []
    for stack in tree.user_stacks():
        owner = next((s for s in _lineage(stack) if s in schemas), None)
        if owner is None:
            continue
        stack_dir = (root / "OPS" / stack).resolve()
        if any(w == stack_dir or w in stack_dir.parents or stack_dir in w.parents for w in wanted):
            stacks.append((stack, schemas[owner]))
    if not stacks:
        fail("no typed stack (one with OPS/<stack>/schema.json) under " + ", ".join(targets))
    failed = 0
    for stack, schema in stacks:
        result = generate_stack(tree, settings, root, stack, schema, count, seed, run_case)
        if result.failure is None:
            click.echo(f"{stack}: {result.runs} generated runs passed")
            continue
        failed += 1
        click.echo(f"{stack}: FAILED: {result.failure}")
        if result.case_yaml:
            click.echo(f"the smallest failing case (paste it under `cases:` of a test file of stack {stack}):")
            click.echo(result.case_yaml)
    raise SystemExit(1 if failed else 0)


def _lineage(stack: str) -> list[str]:
    from txcl.ops.layout import lineage

    return lineage(stack)
