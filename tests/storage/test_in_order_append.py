"""An idempotent producer's batch next in order is appended in one C call
(``_scan.append_batch`` finds it in the producer state, ``on_in_order_append`` records
it): every observable must be what the general path (``analyze`` + ``on_append``)
leaves. Each scenario runs through a log that takes the one call and through one
that never does (flush.ms set: its appends take the general path), and the two are
compared append by append: answers or errors, the producer entries and transactions,
the .log, .txnindex and .snapshot files, the state after a clean reopen and after a
crash. (Each guard of ``_scan.c``'s ``in_order_entry`` fails a test here when removed.)"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from seglog.records import build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage import producer_state_manager
from seglog.storage.producer_entry import INT32_MAX, AppendOrigin
from seglog.storage.producer_snapshot import read as read_snapshot

from .conftest import MS, crash, new_log, open_logs, records

NOW = int(time.time() * 1000)  # (the producers' batches recent: none expires at a reopen)
GENERAL = {"flush.ms": 10**15}  # (a flush by time, never due: the one call refuses such a log)


def batch(pid, epoch, seq, n, *, start=0, transactional=False):
    return build_batch(
        records(n, start=start, ts=NOW),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


def marker(pid, epoch, commit):
    return build_batch([end_transaction_marker(commit, 3, MS)], producer_id=pid, producer_epoch=epoch, control=True)


def follower_batch(log, data):
    """A leader's copy of a producer's batch at the log end (recorded unchecked)."""
    data = bytearray(data)
    data[0:8] = log.log_end_offset.to_bytes(8, "big")
    return data


class Pair:
    """The same steps on two logs: one that may take the one call, one that may not."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, topic_config: dict) -> None:
        self.paths = (tmp_path / "fast", tmp_path / "general")
        self.managers, self.logs = [], []
        self.clock = lambda: NOW + 5  # (one clock for both: LogAppendTime stamps the same time on each)
        for path, config in zip(self.paths, ({}, GENERAL), strict=True):
            manager, log = new_log(path, config={**topic_config, **config}, clock=self.clock)
            self.managers.append(manager)
            self.logs.append(log)
        self.fast = 0  # appends the one call took (none of them on the general log)
        record = producer_state_manager.ProducerStateManager.on_in_order_append

        def counted(state, *args):
            assert state is self.logs[0].producer_state, "the general log took the one call"
            self.fast += 1
            return record(state, *args)

        monkeypatch.setattr(producer_state_manager.ProducerStateManager, "on_in_order_append", counted)

    def both(self, step):
        """``step(log)`` on each; the same answer or the same error from both, then the same state."""
        outcomes = []
        for log in self.logs:
            try:
                outcomes.append(("ok", step(log)))
            except Exception as e:  # the error must match too
                outcomes.append((type(e).__name__, str(e).replace(str(self.paths[len(outcomes)]), "")))
        assert outcomes[0] == outcomes[1]
        self.same_state()
        return outcomes[0]

    def append(self, data: bytearray, origin=AppendOrigin.CLIENT):
        return self.both(lambda log: log.append_batches(bytearray(data), origin=origin))

    def same_state(self):
        fast, general = (log.producer_state for log in self.logs)
        assert fast.producers == general.producers
        assert fast.map_end_offset == general.map_end_offset
        assert fast.last_snapshot_offset == general.last_snapshot_offset
        assert fast.unstable == general.unstable
        for log in self.logs:
            assert log.producer_state.map_end_offset == log.log_end_offset
        assert [log.log_end_offset for log in self.logs] == [self.logs[0].log_end_offset] * 2
        assert self.files(0) == self.files(1)

    def files(self, i):
        """Every file of the partition's dir, by name, as bytes (snapshots as their entries)."""
        d = self.logs[i].dir
        out = {}
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if name.endswith(".snapshot"):
                out[name] = read_snapshot(path)
            elif name.endswith((".log", ".txnindex")):
                out[name] = Path(path).read_bytes()
        return out

    def reopen(self, *, crashed=False):
        for k, manager in enumerate(self.managers):
            if crashed:
                crash(manager)
            else:
                manager.close()
            self.managers[k] = open_logs(self.paths[k], None, clock=self.clock)
            self.logs[k] = self.managers[k].partition("t", 0)
        self.same_state()

    def close(self):
        for manager in self.managers:
            manager.close()


@pytest.fixture(params=[{}, {"message.timestamp.type": "LogAppendTime"}], ids=["CreateTime", "LogAppendTime"])
def pair(tmp_path, monkeypatch, request):
    # (LogAppendTime: the batch's max timestamp, which the producer's entry keeps, is the stamp)
    p = Pair(tmp_path, monkeypatch, request.param)
    yield p
    p.close()


def test_in_order_batches_retries_gaps_epochs_and_producers_leave_the_general_paths_state(pair):
    pair.append(build_batch(records(1)))  # (the leader epoch's first batch: the general path's)
    pair.append(batch(7, 0, 0, 3))  # a new producer: the general path's
    for i in range(1, 8):  # more in order than the five kept batches
        assert pair.append(batch(7, 0, 3 * i, 3, start=3 * i))[0] == "ok"
    assert pair.fast == 7
    first = pair.append(batch(7, 0, 12, 3))  # a retry of a kept batch: its first append's offsets
    assert first[1][:2] == (13, 15)
    assert pair.append(batch(7, 0, 0, 3))[0] == "OutOfOrderSequenceError"  # no longer kept: out of order
    assert pair.append(batch(7, 0, 30, 1))[0] == "OutOfOrderSequenceError"
    assert pair.append(batch(7, 1, 24, 1))[0] == "OutOfOrderSequenceError"  # a new epoch starts at 0
    assert pair.append(batch(7, 1, 0, 2))[0] == "ok"  # the epoch bump
    assert pair.append(batch(7, 0, 2, 1))[0] == "InvalidProducerEpochError"  # the old epoch, next in its order
    assert pair.append(batch(7, 1, 2, 2))[0] == "ok"
    pair.append(batch(8, 5, 100, 2))  # another producer, starting anywhere
    pair.append(batch(8, 5, 102, 2))
    assert pair.fast == 9  # (the retry, the gaps, the bump and the new producers: none)


def test_sequences_wrap_from_int32_max_to_zero_in_order(pair):
    pair.append(build_batch(records(1)))
    pair.append(batch(9, 0, INT32_MAX - 1, 2))  # last sequence Int.MaxValue
    assert pair.append(batch(9, 0, 0, 2))[0] == "ok"  # next in order: 0
    pair.append(batch(9, 0, 2, 1))
    assert pair.append(batch(9, 0, INT32_MAX, 1))[0] == "OutOfOrderSequenceError"
    pair.append(batch(10, 0, INT32_MAX - 5, 3))
    assert pair.append(batch(10, 0, INT32_MAX - 2, 5))[0] == "ok"  # a batch across the wrap: last sequence 1
    assert pair.append(batch(10, 0, 2, 1))[0] == "ok"
    assert pair.logs[0].producer_state.producers[10].last_seq == 2
    assert pair.fast == 4


def test_transactions_open_and_end_as_on_the_general_path(pair):
    pair.append(build_batch(records(1)))
    pair.append(batch(11, 0, 0, 2))
    # an in-order transactional batch of a producer outside a transaction begins one
    assert pair.append(batch(11, 0, 2, 2, transactional=True))[0] == "ok"
    assert pair.logs[0].producer_state.first_unstable_offset(0) == 3
    assert pair.append(batch(11, 0, 4, 1, transactional=True))[0] == "ok"  # inside it: the one call
    # a coordinator's (a transactional offset commit's), in order or not: no sequence of it is checked
    pair.append(batch(11, 0, 5, 1, transactional=True), origin=AppendOrigin.COORDINATOR)
    pair.append(batch(11, 0, 1000, 1, transactional=True), origin=AppendOrigin.COORDINATOR)
    assert pair.append(batch(11, 0, 1001, 1))[0] == "InvalidTxnStateError"  # outside it, while it is open
    pair.append(marker(11, 0, commit=False), origin="coordinator")
    assert pair.append(batch(11, 0, 1001, 1))[0] == "ok"
    assert pair.append(batch(11, 0, 1002, 1, transactional=True))[0] == "ok"  # a new transaction: general
    pair.append(marker(11, 0, commit=True), origin="coordinator")
    assert pair.fast == 3


def test_a_kept_batch_a_leader_copied_out_of_order_is_still_a_duplicate(pair):
    pair.append(build_batch(records(1)))
    # recorded unchecked, as a replica does: sequences 10-11 then 0-9 kept
    for data in (batch(12, 0, 10, 2), batch(12, 0, 0, 10)):
        pair.both(lambda log, data=data: log.append_as_follower(follower_batch(log, data)))
    # next in order after 9, and a retry of the batch 10-11: acknowledged with its offsets, not written
    answer = pair.append(batch(12, 0, 10, 2))
    assert answer[0] == "ok" and answer[1][:2] == (1, 2)
    assert pair.fast == 0


def test_a_roll_a_snapshot_a_reopen_and_a_crash_keep_the_state(pair):
    pair.append(build_batch(records(1)))
    pair.append(batch(13, 2, 0, 3))
    for i in range(1, 6):
        pair.append(batch(13, 2, 3 * i, 3, start=3 * i))
    pair.both(lambda log: log.roll().base_offset)  # a snapshot at the roll
    for i in range(6, 9):
        pair.append(batch(13, 2, 3 * i, 3, start=3 * i))
    fast_before = pair.fast
    pair.reopen()  # a clean close: a snapshot at the log end
    assert pair.append(batch(13, 2, 24, 3))[1][:2] == (25, 27)  # a retry of the last batch, which snapshots keep
    assert pair.append(batch(13, 2, 21, 3))[0] == "OutOfOrderSequenceError"  # (the others are not kept)
    pair.append(batch(13, 2, 27, 3))
    pair.append(batch(13, 2, 30, 3))
    pair.reopen(crashed=True)  # the state rebuilt from the last snapshot and the log after it
    assert pair.append(batch(13, 2, 30, 3))[1][:2] == (31, 33)
    assert pair.append(batch(13, 2, 33, 3))[0] == "ok"
    assert pair.fast > fast_before  # (the one call taken after the reopens too)


def test_a_batch_of_no_record_next_in_order_takes_the_general_path(pair):
    pair.append(build_batch(records(1)))
    pair.append(batch(14, 0, INT32_MAX - 1, 2))
    empty = build_batch([], producer_id=14, producer_epoch=0, base_sequence=0)
    pair.append(empty)  # (its last sequence is before its first: what the general path makes of it, kept)
    pair.append(build_batch([], producer_id=14, producer_epoch=0, base_sequence=5))
    pair.append(batch(14, 0, 0, 1))  # in order after the empty one's last sequence (Int.MaxValue): the one call
    assert pair.fast == 1
