"""Helpers that exist only for tests (fault injection)."""
