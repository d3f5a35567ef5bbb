"""Real broker Fetch responses (kafka-go's and kafkajs's fixtures in kafka-data): decoded here
and encoded again, byte for byte; records come out as slices of the frame."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from seglog.protocol import ApiKey, decode_response, encode_response, frame_size

from ..conftest import KAFKA_DATA

CAPTURES = KAFKA_DATA / "wire_captures"
KAFKA_GO = sorted((CAPTURES / "segmentio_kafka-go" / "fixtures").glob("*.hex"))
KAFKAJS = sorted((CAPTURES / "tulios_kafkajs" / "src" / "protocol" / "requests" / "fetch" / "fixtures").glob("*.json"))


def _joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


def _records(body: dict) -> list[memoryview]:
    return [p.records for t in body.responses for p in t.partitions if p.records is not None]


@pytest.mark.parametrize("path", KAFKA_GO, ids=[p.stem for p in KAFKA_GO])
def test_kafka_go_fetch_v10_byte_exact(path: Path) -> None:
    raw = bytes.fromhex(path.read_text().strip())
    assert frame_size(raw[:4], len(raw)) == len(raw) - 4
    frame = memoryview(raw)[4:]
    body = decode_response(ApiKey.FETCH, 10, frame)
    records = _records(body)
    assert records and all(r.obj is raw for r in records)  # slices of the frame, not copies
    expected = (CAPTURES / "segmentio_kafka-go" / "extracted_records" / f"{path.stem}.records.bin").read_bytes()
    assert b"".join(bytes(r) for r in records) == expected
    assert _joined(encode_response(ApiKey.FETCH, 10, int.from_bytes(raw[4:8], "big"), body)) == raw


@pytest.mark.parametrize("path", KAFKAJS, ids=[p.stem for p in KAFKAJS])
def test_kafkajs_fetch_byte_exact(path: Path) -> None:
    version = int(re.match(r"v(\d+)_", path.name).group(1))  # type: ignore[union-attr]
    raw = (0).to_bytes(4, "big") + bytes(json.loads(path.read_text())["data"])  # kafkajs keeps no correlation id
    body = decode_response(ApiKey.FETCH, version, raw)
    extracted = CAPTURES / "tulios_kafkajs" / "extracted_records"
    for topic in body.responses:
        for partition in topic.partitions:
            cut = extracted / f"{path.stem}.p{partition.partition_index}.records.bin"
            if cut.exists():
                assert bytes(partition.records) == cut.read_bytes()
    assert _joined(encode_response(ApiKey.FETCH, version, 0, body)) == (len(raw)).to_bytes(4, "big") + raw
