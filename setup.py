"""Copy grammar/ and stdlib/ into the package so an installed wheel finds them.

From a checkout, `txcl.resources` reads the top-level directories directly.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent


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


setup(cmdclass={"build_py": BuildWithData})
