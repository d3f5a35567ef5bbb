"""Shared fixtures: where the Kafka data that nobody here wrote lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

KAFKA_DATA = Path(
    os.environ.get("SEGLOG_KAFKA_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "kafka-data")
)


@pytest.fixture(scope="session")
def kafka_data() -> Path:
    if not KAFKA_DATA.is_dir():
        pytest.fail(f"Kafka test data not found at {KAFKA_DATA} (set SEGLOG_KAFKA_DATA)")
    return KAFKA_DATA
