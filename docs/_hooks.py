"""MkDocs hook: the reference pages generated from the code (txcl.docsgen) are committed under
docs/reference/ (`python -m txcl.docsgen` writes them; a test checks they are up to date); a
page missing there is generated at build time."""

from __future__ import annotations

from mkdocs.structure.files import File, Files


def on_files(files: Files, config) -> Files:
    from txcl.docsgen import PAGES

    for path, make in PAGES.items():
        if files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, content=make()))
    return files
