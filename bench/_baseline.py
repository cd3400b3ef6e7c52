"""`--baseline REF`: measure the same thing with the txcl of another git revision of this
repository, in the same run, so a ratio compares two builds on one machine at one moment.

The revision is checked out in a temporary worktree and driven by THIS benchmark file in a
child process whose `sys.path` starts with that worktree (so `import txcl` is the revision's).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_CHILD = r"""
import importlib.util, json, sys
from pathlib import Path
root, bench_file, function = sys.argv[1:4]
args = json.loads(sys.argv[4])
sys.path.insert(0, root)
import txcl
if not Path(txcl.__file__).resolve().is_relative_to(Path(root).resolve()):
    sys.exit(f"the baseline imported txcl from {txcl.__file__}, not from {root}")
spec = importlib.util.spec_from_file_location("bench_baseline_driver", bench_file)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
print(json.dumps(getattr(bench, function)(*args)))
"""


@contextlib.contextmanager
def baseline_tree(ref: str):
    """A temporary git worktree of `ref` (this repository's revision); removed afterwards."""
    repo = Path(__file__).resolve().parent.parent
    if shutil.which("git") is None:
        raise SystemExit("--baseline needs git")
    where = Path(tempfile.mkdtemp(prefix="txcl-baseline-")) / "tree"
    made = subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(where), ref],
                          capture_output=True, text=True)
    if made.returncode != 0:
        shutil.rmtree(where.parent, ignore_errors=True)
        raise SystemExit(f"--baseline {ref}: git could not check it out: {made.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(where)], capture_output=True)
        shutil.rmtree(where.parent, ignore_errors=True)


def call_in_baseline(tree: Path, bench_file: str, function: str, *args: Any) -> Any:
    """`function(*args)` of `bench_file`, run by the baseline's txcl; its JSON result."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tree), str(Path(bench_file).resolve()), function,
                           json.dumps(list(args))], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"the baseline failed (exit {done.returncode}; a revision whose API differs from this "
                         f"benchmark's cannot be driven by it):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
