"""Code lenses: Run, Test and Debug above a rule file; Run and Debug above each rule test case.

A lens carries a command the editor runs: `txcl.runInTerminal` (arguments: the workspace and
the `txcl` arguments to run there) or `txcl.debug` (argument: a `txcl` launch configuration for
`txcl dap`). The VS Code extension implements both; other editors map them as they like (see
docs/editors.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUN_IN_TERMINAL = "txcl.runInTerminal"
DEBUG = "txcl.debug"


@dataclass
class Lens:
    line: int  # 1-based
    title: str
    command: str
    arguments: list[Any]


def _workspace_of(path: Path) -> tuple[Path, Path] | None:
    from txcl.ops.tree import WorkspaceNotFound, find_workspace

    try:
        workspace, ops_dir = find_workspace(path.parent)
    except WorkspaceNotFound:
        return None
    return Path(workspace), Path(ops_dir)


def rule_lenses(path: str) -> list[Lens]:
    """Run, Test and Debug for a rule file of an OPS tree (none for a loose file)."""
    from txcl.lsp.analysis import stack_for_path

    file = Path(path).resolve()
    found = _workspace_of(file)
    stack = stack_for_path(str(file))
    if found is None or stack is None:
        return []
    workspace, _ = found
    from txcl.ops.layout import numbered_value

    scope = numbered_value(file.parent.name)
    rule = f"{stack}/{scope}/{file.stem}" if scope is not None else None
    request = file.parent / "mock-request.json"
    run_args = ["run", "--stack", stack] + (["--mock-request", str(request)] if request.is_file()
                                             else ["--input", "{}"])
    launch: dict[str, Any] = {"type": "txcl", "request": "launch", "name": f"Debug {stack} at {file.name}",
                              "workspace": str(workspace), "stack": stack}
    if request.is_file():
        launch["inputFile"] = str(request)
    else:
        launch["input"] = {}
    if rule is not None:
        launch["stopAt"] = [rule]
    return [Lens(1, "▶ Run", RUN_IN_TERMINAL, [str(workspace), run_args]),
            Lens(1, "Test", RUN_IN_TERMINAL, [str(workspace), ["test"]]),
            Lens(1, "Debug", DEBUG, [launch])]


def case_lenses(path: str, text: str) -> list[Lens]:
    """Run and Debug above each case of a rule test file."""
    from txcl.ruletest.spec import parse_test_text

    file = Path(path).resolve()
    found = _workspace_of(file)
    workspace = found[0] if found is not None else file.parent
    test_file, _ = parse_test_text(file, text, positions=False)
    if test_file is None:
        return []
    out: list[Lens] = []
    for case in test_file.cases:
        where = str(file)
        out.append(Lens(case.line, "▶ Run", RUN_IN_TERMINAL, [str(workspace), ["test", where, "-k", case.name]]))
        out.append(Lens(case.line, "Debug", DEBUG, [{"type": "txcl", "request": "launch",
                                                       "name": f"Debug {case.name}", "workspace": str(workspace),
                                                       "test": f"{where}::{case.name}"}]))
    return out
