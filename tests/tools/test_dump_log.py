"""``seglog dump-log`` run as a user runs it, on real and on broken files."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys

from ..conftest import KAFKA_DATA

FLINK = KAFKA_DATA / "real_segments" / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data"


def dump(*args):
    return subprocess.run([sys.executable, "-m", "seglog.cli", "dump-log", *args], capture_output=True, text=True)


def test_batches_and_records_of_a_real_segment():
    result = dump("--files", str(FLINK / "_schemas-0" / "00000000000000000000.log"), "--print-data-log")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Dumping ") and lines[1] == "Log starting offset: 0"
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batch_lines) == 10 and all("isvalid: true" in line for line in batch_lines)
    assert any(" payload: null" in line for line in lines)  # the topic's tombstones


def test_json_lines():
    result = dump(
        "--json", "--print-data-log", "--files", str(FLINK / "__cluster_metadata-0" / "00000000000000000000.log")
    )
    assert result.returncode == 0
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert {o["type"] for o in objects} == {"batch", "record"}
    control = [o for o in objects if o["type"] == "record" and o["isControl"]]
    assert len(control) == 1 and control[0]["control"]["kind"] == "LeaderChange"
    record = next(o for o in objects if o["type"] == "record" and not o["isControl"])
    assert {"offset", "timestamp", "timestampType", "key", "value", "headers"} <= record.keys()
    if record["value"] is not None:
        base64.b64decode(record["value"])


def test_indexes_with_sanity_check():
    index = FLINK / "orders-0" / "00000000000000000000.index"
    result = dump("--index-sanity-check", "--files", f"{index},{index.with_suffix('.timeindex')}")
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("offset: ") >= 860 + 861
    assert "passed sanity check" in result.stdout


def test_corrupt_crc_goes_on_and_fails(tmp_path):
    target = tmp_path / "00000000000000000000.log"
    shutil.copy(FLINK / "orders-0" / "00000000000000000000.log", target)
    data = bytearray(target.read_bytes())
    data[300] ^= 0xFF  # inside the second batch's records
    target.write_bytes(data)
    result = dump("--json", "--files", str(target))
    assert result.returncode == 1
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    errors = [o for o in objects if o["type"] == "error"]
    assert len(errors) == 1 and "CRC mismatch" in errors[0]["message"] and errors[0]["position"] == 209
    assert sum(o["type"] == "batch" for o in objects) == 17194  # every batch still listed
    assert "Traceback" not in result.stderr


def test_broken_framing_and_missing_file(tmp_path):
    target = tmp_path / "00000000000000000000.log"
    data = bytearray((FLINK / "orders-0" / "00000000000000000000.log").read_bytes()[:5000])
    data[209 + 16] = 9  # the second batch's magic
    target.write_bytes(data)
    result = dump("--files", f"{target},{tmp_path / 'missing.log'}")
    assert result.returncode == 1
    assert "error at position 209: bad magic 9" in result.stdout
    assert "cannot read" in result.stdout and "Traceback" not in result.stderr
