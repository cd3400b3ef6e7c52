"""Store fixtures: a fake clock and a continuation store on each backend (a real SQLite file
in tmp_path; a fresh database on a real PostgreSQL server)."""

from __future__ import annotations

import pytest
from contstore_util import FakeClock, open_store


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(db_url, clock):
    s = open_store(db_url, clock)
    yield s
    s.close()
