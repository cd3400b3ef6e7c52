"""MkDocs hook: the reference pages generated from the code (txcl.docsgen) are added to the
site at build time, never written into docs/ by hand."""

from __future__ import annotations

from mkdocs.structure.files import File, Files


def on_files(files: Files, config) -> Files:
    from txcl.docsgen import PAGES

    for path, make in PAGES.items():
        files.append(File.generated(config, path, content=make()))
    return files
