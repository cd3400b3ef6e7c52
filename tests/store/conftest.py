"""Store fixtures: a fake clock and a continuation store on a real SQLite file in tmp_path."""

from __future__ import annotations

import pytest
from contstore_util import FakeClock, open_store


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tmp_path, clock):
    s = open_store(tmp_path / "txcl.db", clock)
    yield s
    s.close()
