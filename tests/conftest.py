"""Shared fixtures: where the Kafka data that nobody here wrote lives."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]


def _find_kafka_data() -> Path:
    """``SEGLOG_KAFKA_DATA``, else ``../shared/kafka-data`` beside the checkout, else beside
    the checkout it was cloned from (a clone made elsewhere of a local checkout)."""
    if "SEGLOG_KAFKA_DATA" in os.environ:
        return Path(os.environ["SEGLOG_KAFKA_DATA"])
    beside = _REPO.parent / "shared" / "kafka-data"
    if beside.is_dir():
        return beside
    origin = subprocess.run(
        ["git", "-C", str(_REPO), "config", "--get", "remote.origin.url"], capture_output=True, text=True
    ).stdout.strip()
    if origin and "://" not in origin and ":" not in origin.split("/")[0]:  # a local path, not a server
        cloned_from = (_REPO / origin).resolve().parent / "shared" / "kafka-data"
        if cloned_from.is_dir():
            return cloned_from
    return beside


KAFKA_DATA = _find_kafka_data()


def pytest_configure(config: pytest.Config) -> None:
    if not KAFKA_DATA.is_dir():
        pytest.exit(f"Kafka test data not found at {KAFKA_DATA} (set SEGLOG_KAFKA_DATA)", returncode=4)


@pytest.fixture(scope="session")
def kafka_data() -> Path:
    return KAFKA_DATA
