"""What pyproject.toml cannot say: data files copied into the package, and the parser's
optional compiled twins.

- grammar/ and stdlib/ are copied into the package so an installed wheel finds them (from a
  checkout, `txcl.resources` reads the top-level directories directly).
- `txcl._native.otlp_c`, the OTLP span encoder written for C (txcl/_native/otlp_c.pyx),
  stamped the same way; txcl.otlp encodes in Python without it.
- `txcl.syntax._lexer_c` and `txcl.syntax._parser_c` are compiled by Cython from
  `txcl/syntax/lexer.py` and `txcl/syntax/parser.py`, each copy stamped with its source's
  SHA-256 so an edited source is never shadowed by an old build (see
  txcl/syntax/compiled.py). They are optional: without Cython or a C compiler, or with
  TXCL_PURE_PYTHON=1 set at install, the package installs without them and runs as plain
  Python.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
STAMPED = Path("build") / "cython-sources"  # relative: setuptools wants relative source paths


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "txcl" / "_data"
        for name in ("grammar", "stdlib"):
            src = ROOT / name
            if src.is_dir():
                dst = target / name
                if dst.exists():
                    shutil.rmtree(dst)
                shutil.copytree(src, dst)


def _stamped(module: str, source: str) -> str:
    """A copy of `source` under build/, its digest appended, named after `module`."""
    text = (ROOT / source).read_bytes()
    stamped = text + f'\n__txcl_source_sha256__ = "{hashlib.sha256(text).hexdigest()}"\n'.encode("ascii")
    copy = STAMPED / (module.rsplit(".", 1)[1] + Path(source).suffix)
    (ROOT / copy).parent.mkdir(parents=True, exist_ok=True)
    if not (ROOT / copy).is_file() or (ROOT / copy).read_bytes() != stamped:
        (ROOT / copy).write_bytes(stamped)  # (left alone when unchanged: no needless rebuild)
    return str(copy)


def _twins() -> dict[str, str]:
    """The compiled module → its source, from txcl/syntax/compiled.py (loaded as a file: it
    needs only the standard library, and the package cannot be imported before it is built)."""
    spec = importlib.util.spec_from_file_location("_txcl_compiled", ROOT / "txcl" / "syntax" / "compiled.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {twin: name.replace(".", "/") + ".py" for name, twin in module.TWINS.items()}


# modules written for C, standing in for part of a Python module when built (the Python
# module works without them): the OTLP span encoder of txcl.otlp
NATIVE = {"txcl._native.otlp_c": "txcl/_native/otlp_c.pyx"}


def compiled_twins() -> list:
    if os.environ.get("TXCL_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
    except ImportError:
        return []
    os.chdir(ROOT)
    modules = [Extension(module, [_stamped(module, source)])
               for module, source in {**_twins(), **NATIVE}.items()]
    # annotation_typing off: type hints stay hints, as in Python (no new TypeErrors)
    built = cythonize(modules, build_dir=str(STAMPED / "c"), quiet=True,
                      compiler_directives={"language_level": 3, "annotation_typing": False})
    for extension in built:
        extension.optional = True  # no C compiler: a warning, and the install goes on without it
    return built


setup(cmdclass={"build_py": BuildWithData}, ext_modules=compiled_twins())
