"""Opening a partition's directory (loader.py, Kafka's LogLoader): recovery after an
unclean shutdown, from the recovery point, and the files a crash leaves."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from seglog.records import build_batch
from seglog.storage import checkpoint
from seglog.storage.txn_index import AbortedTxn, encode_entry

from .conftest import check_log, crash, new_log, open_logs, records


def corrupt_last_batch_payload(log_path: str) -> int:
    """Flip a byte inside the last batch (its framing stays whole); returns its position."""
    from seglog.records import BatchIterator

    data = bytearray(Path(log_path).read_bytes())
    last = list(BatchIterator(bytes(data)))[-1]
    data[last.position + last.size_in_bytes - 2] ^= 0xFF
    Path(log_path).write_bytes(bytes(data))
    return last.position


def test_unclean_shutdown_recovers_and_clean_shutdown_does_not(tmp_path, caplog, clock):
    manager, log = new_log(tmp_path / "clean", clock=clock)
    for i in range(10):
        log.append(records(2, start=i * 2))
    path = log.segments[-1].log_path
    manager.close()
    size = os.path.getsize(path)
    corrupt_last_batch_payload(path)
    with caplog.at_level(logging.INFO), open_logs(tmp_path / "clean") as manager:
        assert manager.partition("t", 0).log_end_offset == 20  # trusted: not scanned
    assert os.path.getsize(path) == size
    assert "recovering" not in caplog.text and "truncating" not in caplog.text

    caplog.clear()
    manager, log = new_log(tmp_path / "crashed", clock=clock)
    for i in range(10):
        log.append(records(2, start=i * 2))
    path = log.segments[-1].log_path
    crash(manager)
    position = corrupt_last_batch_payload(path)
    with caplog.at_level(logging.INFO), open_logs(tmp_path / "crashed") as manager:
        log = manager.partition("t", 0)
        assert log.log_end_offset == 18
        check_log(log)
    assert os.path.getsize(path) == position
    assert "recovering segment 0" in caplog.text
    assert f"truncating {size - position} bytes at position {position}: CRC mismatch" in caplog.text


def test_a_partition_missing_from_the_recovery_checkpoint_is_recovered(tmp_path, caplog, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(3))
    manager.close()
    checkpoint.write_offsets(str(tmp_path / "recovery-point-offset-checkpoint"), {})
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        assert manager.partition("t", 0).log_end_offset == 3
    assert "t-0: recovering segment 0" in caplog.text


def test_recovery_starts_at_the_recovery_point(tmp_path, caplog, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 500}, clock=clock)
    for i in range(30):
        log.append(records(1, start=i, size=60))
    log.flush(20)
    manager.checkpoint_recovery_points()
    bases = [s.base_offset for s in log.segments]
    crash(manager)
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        check_log(manager.partition("t", 0))
    recovered = [b for b in bases if f"recovering segment {b}\n" in caplog.text + "\n"]
    floor = max(b for b in bases if b <= 20)
    assert recovered == [b for b in bases if b >= floor]


# --- files a crash leaves ---------------------------------------------------------------------------------


def test_leftover_transient_and_orphan_files_are_resolved(tmp_path, caplog, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 400}, clock=clock)
    for i in range(20):
        log.append(records(1, start=i, size=60))
    bases = [s.base_offset for s in log.segments]
    d = Path(log.dir)
    manager.close()
    junk = [
        "00000000000000000000.log.deleted",
        "00000000000000000000.index.deleted",
        "00000000000000000003.log.cleaned",
        "00000000000000000003.timeindex.cleaned",
        "00000000000000000003.index.swap",
        "00000000000000000777.index",  # orphans: no .log of that base
        "00000000000000000777.timeindex",
    ]
    for name in junk:
        (d / name).write_bytes(b"\0" * 24)
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        assert [s.base_offset for s in log.segments] == bases
        assert [r.offset for r in log.records()] == list(range(20))
    for name in junk:
        assert not (d / name).exists(), name
    assert "removing orphaned index file 00000000000000000777.index" in caplog.text
    assert "removing leftover 00000000000000000000.log.deleted" in caplog.text


def test_an_orphaned_txnindex_is_removed_at_load(tmp_path, caplog, clock):
    """Kafka's LogLoader deletes every index file of a missing segment (isIndexFile:
    .index, .timeindex and .txnindex); a segment's own .txnindex stays."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 400}, clock=clock)
    for i in range(20):
        log.append(records(1, start=i, size=60))
    d = Path(log.dir)
    kept = d / f"{log.segments[-1].base_offset:020d}.txnindex"
    manager.close()
    entry = encode_entry(AbortedTxn(1, 2, 7, 3))
    orphan = d / "00000000000000000777.txnindex"
    for path in (orphan, kept):
        path.write_bytes(entry)
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        assert [r.offset for r in manager.partition("t", 0).records()] == list(range(20))
    assert not orphan.exists() and kept.read_bytes() == entry
    assert "removing orphaned index file 00000000000000000777.txnindex" in caplog.text


def test_an_interrupted_swap_is_completed(tmp_path, caplog, clock):
    """A .swap log (a cleaning that finished writing) replaces the segments it covers."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 400, "cleanup.policy": "compact"}, clock=clock)
    for i in range(20):
        log.append(records(1, start=i, size=60))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    d = Path(log.dir)
    manager.close()
    # a "cleaned" version of the first two segments, keeping every other record
    end = bases[2]
    kept = [(r.key, r.value, r.timestamp, (), i) for i, r in enumerate(records(end)) if i % 2 == 0]
    swap = build_batch(kept, keep_offsets=True)
    (d / "00000000000000000000.log.swap").write_bytes(bytes(swap))
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        assert [s.base_offset for s in log.segments] == [0, *bases[2:]]
        assert [r.offset for r in log.records()] == [*range(0, end, 2), *range(end, 20)]
        check_log(log, dense=False)
    assert "completing an interrupted swap" in caplog.text
    assert not any(n.endswith((".swap", ".deleted")) for n in os.listdir(d))
