"""Fixtures of the coordinator tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import seglog


@pytest.fixture
def log(tmp_path: Path):
    """A real, empty ``__consumer_offsets-0`` (compacted) to append the coordinators' records to."""
    manager = seglog.open(str(tmp_path), background=False)
    manager.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    yield manager.partition("__consumer_offsets", 0)
    manager.close()
