"""Modules written for C (Cython), built by `pip install` when a C compiler is at hand; each
stands in for part of a Python module that works without it (see txcl.syntax.compiled.native)."""
