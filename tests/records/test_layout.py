"""The v2 batch header written once: ``records/_batch_layout.h`` (the C of every layer)
and ``records/layout.py`` (Python) name the same offsets, sizes and attribute bits, and
they are Kafka's (each field where the header's struct unpacks it)."""

from __future__ import annotations

import re
from pathlib import Path

from seglog.records import Compression, RecordBatch, build_batch, layout
from seglog.records.legacy import MIN_MESSAGE_SIZE

HEADER_FILE = Path(layout.__file__).with_name("_batch_layout.h")


def c_constants() -> dict[str, int]:
    """The enum constants of the C header, their expressions evaluated in order."""
    text = re.sub(r"/\*.*?\*/", "", HEADER_FILE.read_text(), flags=re.S)
    values: dict[str, int] = {}
    for body in re.findall(r"enum\s*\{(.*?)\};", text, flags=re.S):
        for name, expression in re.findall(r"(\w+)\s*=\s*([^,]+),", body):
            values[name] = eval(expression, {}, dict(values))  # sums of names and numbers
    return values


def test_the_c_header_and_the_python_module_agree():
    c = c_constants()
    python = {name: getattr(layout, name) for name in dir(layout) if name.isupper() and name != "HEADER"}
    assert len(c) > 30
    assert c == python
    minimum = re.search(r"magic == 0 \? (\d+) : magic == 1 \? (\d+) : MIN_BATCH_LENGTH", HEADER_FILE.read_text())
    assert minimum is not None
    assert (int(minimum[1]), int(minimum[2])) == (MIN_MESSAGE_SIZE[0], MIN_MESSAGE_SIZE[1])


def test_each_field_is_where_the_header_struct_reads_it():
    fields = {
        "BASE_OFFSET": 0,
        "LENGTH": 1,
        "PARTITION_LEADER_EPOCH": 2,
        "MAGIC": 3,
        "CRC": 4,
        "ATTRIBUTES": 5,
        "LAST_OFFSET_DELTA": 6,
        "BASE_TIMESTAMP": 7,
        "MAX_TIMESTAMP": 8,
        "PRODUCER_ID": 9,
        "PRODUCER_EPOCH": 10,
        "BASE_SEQUENCE": 11,
        "RECORDS_COUNT": 12,
    }
    batch = bytearray(build_batch([(b"k", b"v", 1_700_000_000_000, ())], compression=Compression.NONE))
    for name, index in fields.items():
        offset, size = getattr(layout, f"{name}_OFFSET"), getattr(layout, f"{name}_LENGTH")
        marked = bytearray(batch)
        marked[offset : offset + size] = b"\x7f" * size
        before, after = layout.HEADER.unpack_from(batch), layout.HEADER.unpack_from(marked)
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        assert changed == [index], name
    assert layout.RECORDS_OFFSET == layout.HEADER_SIZE == layout.HEADER.size == 61
    assert RecordBatch(batch).record_count == 1
