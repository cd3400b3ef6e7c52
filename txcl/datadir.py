"""The workspace's data folder: `<workspace>/.txcl-data/` holds the default SQLite database
and the checker's cache.

Its name matches no `*.txcl` glob (the old `.txcl/` did, so tools that look for rule files
found a folder), and it carries a `.gitignore` of `*` so its contents never reach version
control. A workspace that still has a `.txcl/` folder from an older txcl has it renamed on
first use.
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = ".txcl-data"
LEGACY_DATA_DIR = ".txcl"
DB_FILE = "txcl.db"
_GITIGNORE = "# txcl's data (database, caches): nothing here belongs in version control\n*\n"


def data_dir(workspace: str | Path) -> Path:
    """The data folder of `workspace` (the legacy `.txcl/` folder renamed to it if needed;
    nothing is created)."""
    workspace = Path(workspace)
    folder = workspace / DATA_DIR
    legacy = workspace / LEGACY_DATA_DIR
    if not folder.exists() and legacy.is_dir() and not legacy.is_symlink():
        try:
            legacy.rename(folder)
        except OSError:  # read-only workspace, or another process renamed it first
            pass
        if folder.is_dir():
            mark(folder)
    return folder


def default_db(workspace: str | Path) -> Path:
    return data_dir(workspace) / DB_FILE


def mark(folder: Path) -> None:
    """Give a data folder its `.gitignore` (when it has none)."""
    ignore = folder / ".gitignore"
    if not ignore.exists():
        try:
            ignore.write_text(_GITIGNORE, encoding="utf-8")
        except OSError:
            pass


def make(folder: Path) -> None:
    """Create `folder` (and its parents); a data folder also gets its `.gitignore`."""
    folder.mkdir(parents=True, exist_ok=True)
    if folder.name == DATA_DIR:
        mark(folder)


__all__ = ["DATA_DIR", "DB_FILE", "data_dir", "default_db", "mark", "make"]
