"""``seglog.records.crc32c``, the batch's checksum (``records/_crc32c.h``, which storage's
C walks include too), against the crc32c package: the CPU's instruction and the portable
tables, across the lengths where its three-stream loops change."""

from __future__ import annotations

import os

from crc32c import crc32c as reference
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.records import _codec, crc32c


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=40_000), skip=st.integers(0, 15))
def test_crc32c_is_the_packages(data, skip):
    view = memoryview(data)[min(skip, len(data)) :]
    assert crc32c(view) == reference(view)
    assert crc32c(view, hardware=False) == reference(view)


def test_crc32c_across_the_stream_lengths():
    data = os.urandom(3 * 4096 * 2 + 3 * 256 * 3 + 77)
    for n in (0, 1, 7, 8, 767, 768, 769, 12287, 12288, 12289, 24576 + 768 + 5, len(data)):
        for skip in (0, 3):
            assert crc32c(data[skip : skip + n]) == reference(data[skip : skip + n])
    assert _codec.HARDWARE_CRC in (0, 1)
