"""``seglog dump-log`` run as a user runs it: on real segments, golden files and broken copies."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import random
import shutil
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from crc32c import crc32c

from seglog.records import (
    BatchIterator,
    Compression,
    Record,
    build_batch,
    end_transaction_marker,
)

from ..conftest import KAFKA_DATA

FLINK = KAFKA_DATA / "real_segments" / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data"
GOLDEN = KAFKA_DATA / "golden"
ORDERS = FLINK / "orders-0" / "00000000000000000000"
METADATA = FLINK / "__cluster_metadata-0"


def dump(*args: str | Path, command: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = command or [sys.executable, "-m", "seglog.cli"]
    result = subprocess.run([*argv, "dump-log", *map(str, args)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def files(*paths: Path) -> str:
    return ",".join(map(str, paths))


def lines(result: subprocess.CompletedProcess[str], prefix: str) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(prefix)]


def json_lines(result: subprocess.CompletedProcess[str]) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def _fix_crc(data: bytearray, at: int = 0) -> None:
    end = at + 12 + struct.unpack_from(">i", data, at + 8)[0]
    struct.pack_into(">I", data, at + 17, crc32c(memoryview(data)[at + 21 : end]))


# --- text, as Kafka prints it ------------------------------------------------------------


def test_a_batch_line_word_for_word():
    result = dump("--files", GOLDEN / "v2_none_basic.bin")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        f"Dumping {GOLDEN / 'v2_none_basic.bin'}",
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000002 size: 118 magic: 2 "
        "compresscodec: none crc: 443998212 isvalid: true",
    ]


def test_records_with_headers_and_nulls():
    result = dump("--print-data-log", "--files", files(GOLDEN / "v2_none_headers.bin", GOLDEN / "v2_none_nulls.bin"))
    assert result.returncode == 0
    records = lines(result, "| ")
    assert records[0] == (
        "| offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 1 sequence: -1 "
        "headerKeys: [content-type,trace-id] key: k payload: v"
    )
    assert "headerKeys: [null-value-header,empty,dup,dup]" in records[1]
    assert "headerKeys: [ünicöde-☃]" in records[2] and " key: " not in records[2]  # a null key is not printed
    # Kafka prints key and payload only when present: keySize/valueSize -1 say null
    nulls = records[3:]
    assert nulls[0].endswith("keySize: -1 valueSize: 8 sequence: -1 headerKeys: [] payload: null key")
    assert nulls[1].endswith("keySize: 13 valueSize: -1 sequence: -1 headerKeys: [] key: tombstone-key")
    assert nulls[3].endswith("keySize: -1 valueSize: -1 sequence: -1 headerKeys: []")


def test_deep_iteration_prints_records_without_their_data():
    result = dump("--deep-iteration", "--files", GOLDEN / "v2_gzip_many.bin")
    records = lines(result, "| ")
    assert len(records) == 1000 and not any(" payload: " in r for r in records)
    assert "compresscodec: gzip" in lines(result, "baseOffset:")[0]


def test_idempotent_producer_fields_and_sequences():
    result = dump("--deep-iteration", "--files", GOLDEN / "v2_none_idempotent.bin")
    (batch,) = lines(result, "baseOffset:")
    assert "baseSequence: 17 lastSequence: 19 producerId: 4242 producerEpoch: 3" in batch
    assert [r.split(" sequence: ")[1].split()[0] for r in lines(result, "| ")] == ["17", "18", "19"]


def test_legacy_messages_as_kafka_prints_them():
    result = dump("--print-data-log", "--files", files(GOLDEN / "v1_gzip.stored.bin", GOLDEN / "v0_none.bin"))
    assert result.returncode == 0
    wrapper = lines(result, "offset: 505 ")
    assert wrapper == [
        "offset: 505 position: 0 CreateTime: 0 size: 213 magic: 1 compresscodec: gzip crc: 3263842809 isvalid: true"
    ]
    records = lines(result, "| ")
    assert records[0].startswith(
        "| offset: 500 CreateTime: 1700000000000 keySize: 2 valueSize: 223 isValid: true crc: "
    )
    assert (
        records[5] == "| offset: 505 CreateTime: 1700000000005 keySize: -1 valueSize: -1 isValid: true crc: 3933621076"
    )
    assert lines(result, "offset: 0 position: 0 NoTimestampType: -1 size: 251 magic: 0 compresscodec: none")


def test_a_real_segment_with_tombstones():
    result = dump("--files", FLINK / "_schemas-0" / "00000000000000000000.log", "--print-data-log")
    assert result.returncode == 0, result.stdout
    out = result.stdout.splitlines()
    assert out[:2] == [f"Dumping {FLINK / '_schemas-0' / '00000000000000000000.log'}", "Log starting offset: 0"]
    batches = lines(result, "baseOffset:")
    assert len(batches) == 10 and all(b.endswith("isvalid: true") for b in batches)
    assert any("valueSize: -1" in line and " payload: " not in line for line in lines(result, "| "))


def test_lz4_log_append_time_segment():
    result = dump("--files", FLINK / "_confluent-monitoring-0" / "00000000000000000000.log")
    batches = lines(result, "baseOffset:")
    assert len(batches) == 1951
    assert all(" LogAppendTime: " in b and "compresscodec: lz4" in b for b in batches)


# --- control records ---------------------------------------------------------------------


def test_transaction_markers(tmp_path):
    data = build_batch([Record(b"k", b"v", 5)], base_offset=0, producer_id=9, producer_epoch=2, transactional=True)
    for offset, commit in [(1, True), (2, False)]:
        data += build_batch(
            [end_transaction_marker(commit, coordinator_epoch=3, timestamp=6)],
            base_offset=offset,
            control=True,
            transactional=True,
            producer_id=9,
            producer_epoch=2,
        )
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(data)
    result = dump("--print-data-log", "--files", target)
    assert result.returncode == 0
    records = lines(result, "| ")
    assert records[1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert records[2].endswith("endTxnMarker: ABORT coordinatorEpoch: 3")
    assert "isTransactional: true isControl: true" in lines(result, "baseOffset: 1 ")[0]
    control = [o for o in json_lines(dump("--json", "--deep-iteration", "--files", target)) if o.get("isControl")]
    assert [(o["controlType"], o["control"]) for o in control if o["type"] == "record"] == [
        ("COMMIT", {"version": 0, "coordinatorEpoch": 3}),
        ("ABORT", {"version": 0, "coordinatorEpoch": 3}),
    ]


def test_kraft_leader_change_and_snapshot_markers():
    result = dump("--deep-iteration", "--files", METADATA / "00000000000000000000.log")
    (change,) = [line for line in lines(result, "| ") if "LeaderChange" in line]
    assert change.endswith(
        'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}'
    )
    snapshot = METADATA / "00000000000000007752-0000000001.checkpoint"
    result = dump("--deep-iteration", "--files", snapshot)
    assert result.returncode == 0
    assert result.stdout.splitlines()[1] == "Snapshot end offset: 7752, epoch: 1"
    records = lines(result, "| ")
    assert records[0] == (
        "| offset: 0 CreateTime: 1713537222279 keySize: 4 valueSize: 11 sequence: -1 headerKeys: [] "
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":1713537222197}'
    )
    assert records[-1].endswith('SnapshotFooter {"version":0}')


# --- JSON Lines --------------------------------------------------------------------------


def test_json_lines_carry_every_record(tmp_path):
    path = GOLDEN / "v2_none_headers.bin"
    objects = json_lines(dump("--json", "--print-data-log", "--files", path))
    assert {o["type"] for o in objects} == {"batch", "record"}
    assert all(o["file"] == str(path) for o in objects)
    (batch,) = [o for o in objects if o["type"] == "batch"]
    assert batch["crc"] == 2087153355 and batch["isvalid"] is True and batch["count"] == 3
    records = [o for o in objects if o["type"] == "record"]
    expected = [r for b in BatchIterator(path.read_bytes()) for r in b.records()]

    def unb64(text):
        return None if text is None else base64.b64decode(text)

    got = [
        (
            o["offset"],
            o["timestamp"],
            unb64(o["key"]),
            unb64(o["value"]),
            [(h["key"], unb64(h["value"])) for h in o["headers"]],
        )
        for o in records
    ]
    assert got == [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in expected]
    assert all(o["timestampType"] == "CreateTime" and o["isControl"] is False for o in records)


BATCH_FIELDS = {
    "type", "file", "baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId",
    "producerEpoch", "partitionLeaderEpoch", "isTransactional", "isControl", "deleteHorizonMs", "position",
    "timestampType", "maxTimestamp", "size", "magic", "compresscodec", "crc", "isvalid",
}  # fmt: skip
RECORD_FIELDS = {
    "type", "file", "isControl", "sequence", "offset", "timestamp", "timestampType", "key", "value", "headers",
}  # fmt: skip


def test_json_lines_schema(tmp_path):
    # every object has a type; batch, record and index objects carry exactly these fields
    target = tmp_path / "00000000000000000000.log"
    data = build_batch([Record(b"k", None, 5, [("h", None), ("i", b"\x01")])], producer_id=3, producer_epoch=1)
    data += build_batch([end_transaction_marker(False, 2, 6)], base_offset=1, control=True, transactional=True)
    target.write_bytes(data)
    paths = [target, GOLDEN / "v1_gzip.stored.bin", ORDERS.with_suffix(".index"), ORDERS.with_suffix(".timeindex")]
    result = dump("--json", "--print-data-log", "--files", files(*paths))
    assert result.returncode == 0
    objects = json_lines(result)
    kinds = {o["type"] for o in objects}
    assert kinds == {"batch", "record", "offset-index-entry", "time-index-entry"}
    for o in objects:
        if o["type"] == "batch":
            assert set(o) == BATCH_FIELDS
        elif o["type"] == "record":
            extra = {"crc"} if o["file"].endswith(".bin") else {"controlType", "control"} if o["isControl"] else set()
            assert set(o) == RECORD_FIELDS | extra
        elif o["type"] == "offset-index-entry":
            assert set(o) == {"type", "file", "offset", "position"}
        else:
            assert set(o) == {"type", "file", "timestamp", "offset"}
    first, marker = [o for o in objects if o["type"] == "record"][:2]
    assert first == {
        "type": "record",
        "file": str(target),
        "isControl": False,
        "sequence": -1,
        "offset": 0,
        "timestamp": 5,
        "timestampType": "CreateTime",
        "key": "aw==",
        "value": None,  # null, not a string
        "headers": [{"key": "h", "value": None}, {"key": "i", "value": "AQ=="}],
    }
    assert marker["isControl"] is True and marker["controlType"] == "ABORT"
    assert marker["control"] == {"version": 0, "coordinatorEpoch": 2}


def test_json_lines_of_a_kraft_log():
    objects = json_lines(dump("--json", "--print-data-log", "--files", METADATA / "00000000000000000000.log"))
    assert sum(o["type"] == "batch" for o in objects) == 16_340
    (control,) = [o for o in objects if o["type"] == "record" and o["isControl"]]
    assert control["controlType"] == "LEADER_CHANGE" and control["control"]["leaderId"] == 1


def test_every_real_segment_of_a_broker_dir_in_one_run():
    logs = sorted(FLINK.glob("*/*.log"))
    result = dump("--json", "--deep-iteration", "--files", files(*logs))
    assert result.returncode == 0, result.stderr
    counts: dict[str, int] = {}
    for o in json_lines(result):
        counts[o["type"]] = counts.get(o["type"], 0) + 1
    assert counts == {"batch": 37_113, "record": 41_901}  # as kafka-data/README.md counts them


def test_console_script_and_module_agree():
    script = Path(sys.executable).parent / "seglog"
    args = ("--deep-iteration", "--files", GOLDEN / "v2_mixed_codecs_segment.bin")
    assert dump(*args, command=[str(script)]).stdout == dump(*args).stdout


# --- indexes -------------------------------------------------------------------------


def test_index_entries_checked_against_the_log():
    result = dump("--files", files(ORDERS.with_suffix(".index"), ORDERS.with_suffix(".timeindex")))
    assert result.returncode == 0, result.stdout
    assert len(lines(result, "offset: ")) == 860
    assert len(lines(result, "timestamp: ")) == 861
    relative, position = struct.unpack(">ii", ORDERS.with_suffix(".index").read_bytes()[:8])
    assert lines(result, "offset: ")[0] == f"offset: {relative} position: {position}"


def test_index_json():
    objects = json_lines(
        dump("--json", "--files", files(ORDERS.with_suffix(".index"), ORDERS.with_suffix(".timeindex")))
    )
    kinds = [o["type"] for o in objects]
    assert kinds.count("offset-index-entry") == 860 and kinds.count("time-index-entry") == 861
    first = objects[0]
    assert (first["offset"], first["position"]) == struct.unpack(">ii", ORDERS.with_suffix(".index").read_bytes()[:8])


def test_index_sanity_check_passes_on_real_indexes():
    indexes = sorted([*FLINK.glob("*/*.index"), *FLINK.glob("*/*.timeindex")])
    result = dump("--index-sanity-check", "--files", files(*indexes))
    assert result.returncode == 0, result.stdout
    assert len(lines(result, "offset: ")) == 0  # as Kafka's: a sanity check prints no entries
    assert result.stdout.count("passed sanity check.") == len(indexes)


def _segment_copy(tmp_path: Path) -> tuple[Path, Path, Path]:
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copy(ORDERS.with_suffix(suffix), tmp_path / f"00000000000000000000{suffix}")
    base = tmp_path / "00000000000000000000"
    return base.with_suffix(".log"), base.with_suffix(".index"), base.with_suffix(".timeindex")


def test_index_sanity_check_reports_each_bad_entry(tmp_path):
    log, index, timeindex = _segment_copy(tmp_path)
    data = bytearray(index.read_bytes())
    data[16:24], data[24:32] = data[24:32], data[16:24]  # entries 2 and 3 swapped: offsets go back
    struct.pack_into(">ii", data, 800, 5000, log.stat().st_size + 10)  # entry 100 points past the log
    index.write_bytes(data + b"\x00\x01\x02")  # and a partial entry at the end
    times = bytearray(timeindex.read_bytes())
    times[12:24], times[24:36] = times[24:36], times[12:24]
    timeindex.write_bytes(times)
    result = dump("--index-sanity-check", "--files", files(index, timeindex))
    assert result.returncode == 1
    errors = lines(result, "error at position ")
    assert any(e.startswith("error at position 24: entry 3 ") and "offset does not increase" in e for e in errors)
    assert any(e.startswith("error at position 800: entry 100 ") and "past the end of the log" in e for e in errors)
    assert any(e.startswith("error at position 6880: 3 bytes that are not a whole entry") for e in errors)
    assert any(e.startswith("error at position 24: entry 2 ") and "timestamp does not increase" in e for e in errors)
    assert result.stdout.count("failed sanity check.") == 2
    assert f"error(s) in {index}" in result.stderr and f"2 error(s) in {timeindex}" in result.stderr


def test_index_entry_that_disagrees_with_its_log(tmp_path):
    _, index, _ = _segment_copy(tmp_path)
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 40, struct.unpack_from(">i", data, 40)[0] + 1)  # entry 5: one offset too far
    index.write_bytes(data)
    result = dump("--files", index)
    assert result.returncode == 1
    (error,) = lines(result, "error at position ")
    assert error.startswith("error at position 40: entry 5 (offset ") and "the batch there ends at offset" in error
    assert len(lines(result, "offset: ")) == 860  # every entry still listed


def test_preallocated_zero_tail_and_empty_index(tmp_path):
    _, index, _ = _segment_copy(tmp_path)
    index.write_bytes(index.read_bytes() + bytes(8 * 1000))  # a crash left it at its preallocated size
    result = dump("--files", index)
    assert result.returncode == 0 and len(lines(result, "offset: ")) == 860
    empty = tmp_path / "00000000000000000042.index"
    empty.write_bytes(b"")
    assert f"{empty} is empty." in dump("--files", empty).stdout


# --- corrupt input ---------------------------------------------------------------------


def test_bad_crc_is_reported_and_the_dump_goes_on(tmp_path):
    target = tmp_path / "00000000000000000000.log"
    data = bytearray(ORDERS.with_suffix(".log").read_bytes())
    data[300] ^= 0xFF  # inside the second batch (position 209)
    target.write_bytes(data)
    result = dump("--json", "--files", target)
    assert result.returncode == 1
    objects = json_lines(result)
    errors = [o for o in objects if o["type"] == "error"]
    assert len(errors) == 1 and errors[0]["position"] == 209
    assert errors[0]["message"].startswith("CRC mismatch: stored 0x") and ", computed 0x" in errors[0]["message"]
    batches = [o for o in objects if o["type"] == "batch"]
    assert len(batches) == 17_194 and [b["isvalid"] for b in batches].count(False) == 1
    text = dump("--files", target)
    assert "isvalid: false" in lines(text, "baseOffset: 1 ")[0]
    assert lines(text, "error at position 209: CRC mismatch: stored 0x")


def test_broken_framing_ends_the_file_and_the_next_file_is_dumped(tmp_path):
    target = tmp_path / "00000000000000000000.log"
    data = bytearray(ORDERS.with_suffix(".log").read_bytes()[:5000])
    data[209 + 16] = 9  # the second batch's magic
    target.write_bytes(data)
    result = dump("--files", files(target, tmp_path / "missing.log", GOLDEN / "v2_none_basic.bin"))
    assert result.returncode == 1
    assert lines(result, "error at position 209: bad magic 9 (offset 1)")
    assert len(lines(result, "baseOffset: 0 ")) == 2  # the first batch of the broken file, and the golden one
    assert lines(result, f"error: cannot read {tmp_path / 'missing.log'}: No such file or directory")
    assert f"1 error(s) in {target}" in result.stderr


def test_a_partial_batch_at_the_end(tmp_path):
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(ORDERS.with_suffix(".log").read_bytes()[:5000])
    result = dump("--files", target)
    assert result.returncode == 1
    whole = list(BatchIterator(target.read_bytes()))
    end = whole[-1].position + whole[-1].size_in_bytes
    assert lines(result, f"Found {5000 - end} invalid bytes at the end of 00000000000000000000.log")
    assert lines(result, f"error at position {end}: ")


def test_unknown_codec_and_broken_records_go_on_to_the_next_batch(tmp_path):
    first = build_batch([Record(b"a", b"1", 1), Record(b"b", b"2", 2)], base_offset=0)
    second = build_batch([Record(b"c", b"3", 3)], base_offset=2, compression=Compression.GZIP)
    third = build_batch([Record(b"d", b"4", 4)], base_offset=3)
    struct.pack_into(">h", first, 21, 6)  # codec id 6 does not exist
    _fix_crc(first)
    struct.pack_into(">i", second, 57, 5)  # five records claimed, one there
    _fix_crc(second)
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(first + second + third)
    result = dump("--print-data-log", "--files", target)
    assert result.returncode == 1
    assert "compresscodec: unknown(6)" in lines(result, "baseOffset: 0 ")[0]
    assert lines(result, "error at position 0: unknown compression codec id 6")
    assert lines(result, f"error at position {len(first)}: record ")
    assert lines(result, "| offset: 3 ")  # the third batch is whole and printed


def test_the_records_before_a_fault_are_printed(tmp_path):
    batch = build_batch([Record(b"a", b"1", 1), Record(b"b", b"2", 2)], base_offset=7, compression=Compression.LZ4)
    struct.pack_into(">i", batch, 57, 3)  # a third record claimed
    _fix_crc(batch)
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(batch)
    result = dump("--print-data-log", "--files", target)
    assert result.returncode == 1
    assert [line.split(" CreateTime")[0] for line in lines(result, "| ")] == ["| offset: 7", "| offset: 8"]
    assert lines(result, "error at position 0: record count 3 disagrees with the batch: its records end after 2")


# --- decompression bombs: batches of a few KiB that inflate to MiBs ------------------------


def _bomb(path: Path, batches: int, count: int | None = None) -> Path:
    """A segment of gzip batches of 1,024 records of 4 KiB of zeros each (4 MiB inflated, ~10 KiB
    stored); ``count`` makes each claim that many records, CRC resealed."""
    data = bytearray()
    for i in range(batches):
        batch = build_batch([(None, bytes(4096))] * 1024, base_offset=i * 1024, compression=Compression.GZIP)
        if count is not None:
            struct.pack_into(">i", batch, 57, count)
            _fix_crc(batch)
        data += batch
    path.write_bytes(data)
    return path


def _dump_measured(*args: str | Path) -> tuple[int, list[str], int]:
    """The command run in this process (exit code, output lines, peak of Python's allocations)."""
    from seglog.cli import main

    out = io.StringIO()
    tracemalloc.start()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(["dump-log", *map(str, args)])
        peak = tracemalloc.get_traced_memory()[1] - len(out.getvalue())  # the output is not the dump's
    finally:
        tracemalloc.stop()
    return code, out.getvalue().splitlines(), peak


def test_deep_iteration_of_a_decompression_bomb_holds_a_chunk_not_a_batch(tmp_path):
    target = _bomb(tmp_path / "00000000000000000000.log", batches=8)
    assert target.stat().st_size < 200_000  # 32 MiB of records
    code, out, peak = _dump_measured("--deep-iteration", "--files", target)
    assert code == 0
    assert len([line for line in out if line.startswith("| offset: ")]) == 8 * 1024
    assert out[-1].startswith("| offset: 8191 ") and " valueSize: 4096 " in out[-1]
    assert peak < 2 << 20, peak  # a batch inflates to 4 MiB


def test_a_bomb_whose_batches_claim_one_record_costs_a_chunk_per_batch(tmp_path):
    # the damage the dump met when it inflated every batch whole: bytes past each batch's count
    target = _bomb(tmp_path / "00000000000000000000.log", batches=8, count=1)
    code, out, peak = _dump_measured("--deep-iteration", "--files", target)
    assert code == 1
    assert len([line for line in out if line.startswith("| offset: ")]) == 8  # each batch's one record
    faults = [line for line in out if line.startswith("error at position ")]
    assert len(faults) == 8 and all("record count 1 disagrees with the batch: more than " in f for f in faults)
    assert peak < 2 << 20, peak


def test_files_that_are_not_batches(tmp_path):
    snapshot = next(FLINK.glob("*/*.snapshot"))
    result = dump("--files", files(snapshot, tmp_path))
    assert result.returncode == 1
    assert lines(result, f"error: {snapshot.name} is a producer-state snapshot, which dump-log does not read")
    assert lines(result, f"error: cannot read {tmp_path}: Is a directory")


def test_usage_errors():
    result = subprocess.run([sys.executable, "-m", "seglog.cli", "dump-log"], capture_output=True, text=True)
    assert result.returncode == 2 and "--files" in result.stderr


def test_randomly_broken_segments_never_crash(tmp_path):
    rng = random.Random(7)
    sources = [p for p in sorted(FLINK.glob("*/*.log")) if 0 < p.stat().st_size < 2_000_000]
    sources += [GOLDEN / "v1_lz4.stored.bin", GOLDEN / "v2_mixed_codecs_segment.bin"]
    targets = []
    for i in range(40):
        data = bytearray(rng.choice(sources).read_bytes()[:20_000])
        for _ in range(rng.randrange(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        whole_first_batch = len(data) > 61 and data[16] == 2 and struct.unpack_from(">i", data, 8)[0] + 12 <= len(data)
        if whole_first_batch and rng.random() < 0.5:  # re-sealed: its records, not its CRC, meet the damage
            _fix_crc(data)
        target = tmp_path / f"{i:020d}.log"
        target.write_bytes(data)
        targets.append(target)
    for flags in ((), ("--print-data-log",), ("--json", "--print-data-log")):
        result = dump(*flags, "--files", files(*targets))
        assert result.returncode in (0, 1)
        assert result.stdout.count("Dumping ") == (0 if "--json" in flags else 40)


@pytest.mark.parametrize("flag", ["--print-data-log", "--json"])
def test_undecodable_bytes_in_keys_values_and_header_keys(tmp_path, flag):
    data = build_batch([Record(b"\xff\xfe", b"caf\xe9", 1, [("h\udcff", b"\x00")])])
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(data)
    result = dump(flag, "--print-data-log", "--files", target)
    assert result.returncode == 0
    if flag == "--json":
        assert "\\udc" not in result.stdout  # no lone surrogates, which strict JSON parsers refuse
        (record,) = [o for o in json_lines(result) if o["type"] == "record"]
        assert base64.b64decode(record["key"]) == b"\xff\xfe"
        assert record["headers"] == [{"key": "h\ufffd", "value": "AA=="}]  # as Java decodes the key
    else:
        assert "payload: caf\ufffd" in result.stdout and "headerKeys: [h\ufffd]" in result.stdout
