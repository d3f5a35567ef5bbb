"""Golden batches built by kafka-python decode to exactly the records its manifest lists."""

from __future__ import annotations

import hashlib
import json

import pytest

from seglog.records import BatchIterator, LegacyBatch

from ..conftest import KAFKA_DATA

MANIFEST = json.loads((KAFKA_DATA / "golden" / "manifest.json").read_text())
BY_NAME = {f["file"]: f for f in MANIFEST["files"]}


def _hex(data):
    return None if data is None else data.hex()


def _expected_records(entry):
    source = BY_NAME[entry.get("records_same_as", entry["file"])]
    out = []
    for batch in source["batches"]:
        for r in batch["records"]:
            ts = -1 if r["timestamp"] is None else r["timestamp"]
            ts_type = -1 if r["timestamp_type"] is None else r["timestamp_type"]
            headers = [tuple(h) for h in r.get("headers", [])]
            out.append((r["offset"], ts, ts_type, r["key_hex"], r["value_hex"], headers))
    return out


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_golden_file_decodes_to_manifest(name):
    entry = BY_NAME[name]
    data = (KAFKA_DATA / "golden" / name).read_bytes()
    scan = BatchIterator(data)
    got, batches = [], []
    for batch in scan:
        batch.validate()
        batches.append(batch)
        for r in batch.records():
            headers = [(k, _hex(v)) for k, v in r.headers]
            got.append((r.offset, r.timestamp, int(batch.timestamp_type), _hex(r.key), _hex(r.value), headers))
    assert scan.remaining == 0
    assert got == _expected_records(entry)
    assert len(batches) == len(entry["batches"])
    for batch, expected in zip(batches, entry["batches"], strict=True):
        assert batch.magic == expected["magic"]
        assert int(batch.compression) == expected["compression_type"]
        assert batch.is_valid is expected["crc_valid"]
        ts_type = expected["timestamp_type"]
        assert int(batch.timestamp_type) == (-1 if ts_type is None else ts_type)
        if isinstance(batch, LegacyBatch):
            assert batch.offset == expected["base_offset"]  # kafka-python's base offset of a wrapper: its own
        else:
            assert batch.base_offset == expected["base_offset"]
            assert batch.last_offset_delta == expected["last_offset_delta"]
            assert batch.base_timestamp == expected["first_timestamp"]
            assert batch.max_timestamp == expected["max_timestamp"]
            assert batch.producer_id == expected["producer_id"]
            assert batch.producer_epoch == expected["producer_epoch"]
            assert batch.base_sequence == expected["base_sequence"]
            assert batch.is_transactional is expected["is_transactional"]
            assert batch.is_control is expected["is_control_batch"]
            assert batch.crc == expected["crc"]
            assert batch.attributes == expected["attributes"]


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_golden_file_is_the_one_the_manifest_describes(name):
    data = (KAFKA_DATA / "golden" / name).read_bytes()
    assert len(data) == BY_NAME[name]["size"]
    assert hashlib.sha256(data).hexdigest() == BY_NAME[name]["sha256"]


@pytest.mark.parametrize("name", sorted(n for n, e in BY_NAME.items() if "patched_from_builder_output" in e))
def test_stored_files_carry_the_broker_edits(name):
    patch = BY_NAME[name]["patched_from_builder_output"]
    batches = list(BatchIterator((KAFKA_DATA / "golden" / name).read_bytes()))
    if "partitionLeaderEpoch" in patch:
        assert {b.partition_leader_epoch for b in batches} == {patch["partitionLeaderEpoch"]}
    if isinstance(patch.get("baseOffset"), int):
        assert batches[0].base_offset == patch["baseOffset"]
    if "wrapper_offset" in patch:  # a broker stores a wrapper under its last inner offset
        wrapper = batches[0]
        assert wrapper.last_offset == patch["wrapper_offset"]
        # v1 inner offsets are relative to it; v0 inner offsets are absolute and read as written
        inner = [r.offset for r in wrapper.records()]
        assert inner == (list(range(500, 506)) if wrapper.magic == 1 else list(range(6)))


def test_every_golden_file_was_read():
    names = {p.name for p in (KAFKA_DATA / "golden").glob("*.bin")}
    assert names == set(BY_NAME) and len(names) == 39
