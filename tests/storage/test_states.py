"""The state tables of segment.py, index.py and log.py: each object goes only where its
table says, and a move the table does not have is an error naming the file."""

from __future__ import annotations

import pytest

from seglog.errors import CorruptIndexError, IllegalStateTransitionError, KafkaStorageError
from seglog.storage import LogState
from seglog.storage.index import IndexState, OffsetIndex
from seglog.storage.segment import LogSegment, SegmentState

from .conftest import new_log, open_logs, records


def test_segments_go_from_active_to_sealed_and_both_to_deleted(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 400}, clock=clock)
    for i in range(12):
        log.append(records(1, start=i, size=60))
    *sealed, active = log.segments
    assert active.state is SegmentState.ACTIVE and {s.state for s in sealed} == {SegmentState.SEALED}
    log.truncate_to(sealed[-1].base_offset + 1)  # a sealed segment becomes the last: active again
    assert log.segments[-1] is sealed[-1] and sealed[-1].state is SegmentState.ACTIVE
    assert active.state is SegmentState.DELETED
    with pytest.raises(IllegalStateTransitionError) as illegal:
        active.active = True
    assert illegal.value.file == active.log_path and "from deleted to active" in str(illegal.value)
    manager.close()


def test_an_index_rebuilt_in_memory_becomes_writable_when_written_out(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    index = OffsetIndex(path, 0, 4096, in_memory=True)
    assert index.state is IndexState.IN_MEMORY and index.writable
    index.append(5, 0)
    index.write_out()
    assert index.state is IndexState.WRITABLE and index.entries == 1
    index.close()
    assert index.state is IndexState.CLOSED and not index.writable
    reader = OffsetIndex(path, 0, 4096, writable=False)
    assert reader.state is IndexState.READ_ONLY and reader.lookup(5) == (5, 0)
    with pytest.raises(CorruptIndexError, match="not open for writing"):
        reader.append(9, 100)


def test_a_log_is_open_read_only_or_closed(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(2))
    assert log.state is LogState.OPEN and not log.closed and not log.read_only
    with open_logs(tmp_path, read_only=True) as readers:
        reader = readers.partition("t", 0)
        assert reader.state is LogState.READ_ONLY and reader.read_only
    assert reader.state is LogState.CLOSED and reader.read_only
    manager.close()
    assert log.state is LogState.CLOSED and log.closed
    log.close()  # again: nothing to do
    with pytest.raises(KafkaStorageError, match="closed"):
        log.append(records(1))


def test_a_segment_opened_from_its_files_is_sealed_until_the_log_says(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(2))
    manager.close()
    assert LogSegment(log.dir, 0).state is SegmentState.SEALED
