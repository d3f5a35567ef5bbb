"""A partition log's role (leader or follower, at a leader epoch that never goes back)
and who moves its high watermark (a standalone log's owner keeps it at the log end; a
broker's replica manager moves it with update/maybe_increment_high_watermark)."""

from __future__ import annotations

import pytest

from seglog.config import BrokerConfig, LogConfig
from seglog.errors import FencedLeaderEpochError, KafkaStorageError, NotLeaderOrFollowerError
from seglog.records import build_batch
from seglog.storage import PartitionLog, Role

from .conftest import new_log, open_logs, records


def replicated_log(path, **kw) -> PartitionLog:
    path.mkdir()
    return PartitionLog(str(path), "t", 0, LogConfig(BrokerConfig(), {}), standalone=False, **kw)


def copied_batches(log: PartitionLog, start: int) -> bytes:
    """The batches of ``log`` from ``start``, as a follower fetches them."""
    return b"".join(bytes(b.buffer) for b in log.batches(start))


def test_a_log_opens_as_leader_at_the_epoch_of_its_checkpoint(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    assert (log.role, log.leader_epoch) == (Role.LEADER, 0)
    log.become_leader(4)
    log.append(records(2))
    manager.close()
    with open_logs(tmp_path, clock=clock) as manager:
        log = manager.partition("t", 0)
        assert (log.role, log.leader_epoch) == (Role.LEADER, 4)
        with pytest.raises(AttributeError):
            log.leader_epoch = 9  # changed only by become_leader / become_follower


def test_a_leader_stamps_its_epoch_and_a_follower_keeps_the_leaders(tmp_path, clock):
    manager, leader = new_log(tmp_path / "a", clock=clock)
    leader.become_leader(3)
    leader.append(records(2))
    leader.become_leader(5)
    leader.append(records(2))
    manager2, follower = new_log(tmp_path / "b", clock=clock)
    follower.become_follower(5)
    follower.append_as_follower(copied_batches(leader, 0))
    assert [b.partition_leader_epoch for b in follower.batches()] == [3, 5]
    assert follower.leader_epoch_cache.entries == [(3, 0), (5, 2)]
    manager.close()
    manager2.close()


def test_a_follower_refuses_a_producers_append(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(2))
    log.become_follower(1)
    for append in (
        lambda: log.append(records(1)),
        lambda: log.append_batches(build_batch(records(1))),
        lambda: log.try_append_batches(build_batch(records(1))),
    ):
        with pytest.raises(NotLeaderOrFollowerError) as refused:
            append()
        assert refused.value.error_code == 6 and refused.value.file == log.dir
    assert log.log_end_offset == 2
    log.become_leader(2)  # and leads again
    assert log.append(records(1)) == (2, 2)
    assert {b.partition_leader_epoch for b in log.batches(2)} == {2}
    manager.close()


@pytest.mark.parametrize("become", ["become_leader", "become_follower"])
def test_an_epoch_never_goes_back(tmp_path, clock, become):
    manager, log = new_log(tmp_path, clock=clock)
    log.become_follower(7)
    getattr(log, become)(7)  # the same epoch again: allowed (an ISR change keeps the epoch)
    with pytest.raises(FencedLeaderEpochError) as fenced:
        getattr(log, become)(6)
    assert fenced.value.error_code == 74 and "older than its epoch 7" in str(fenced.value)
    assert log.leader_epoch == 7 and log.role is (Role.LEADER if become == "become_leader" else Role.FOLLOWER)
    manager.close()


def test_a_read_only_or_closed_log_has_no_role_to_change(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    manager.close()
    with pytest.raises(KafkaStorageError, match="closed"):
        log.become_leader(1)
    with open_logs(tmp_path, read_only=True) as reader, pytest.raises(KafkaStorageError, match="read-only"):
        reader.partition("t", 0).become_follower(1)


def test_a_standalone_log_keeps_its_high_watermark_at_its_log_end(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    assert log.standalone
    for i in range(5):
        log.append(records(1, start=i))
        assert log.high_watermark == i + 1
    log.truncate_to(3)
    assert log.high_watermark == 3
    manager.close()


def test_a_replicated_logs_high_watermark_moves_only_when_its_owner_says(tmp_path):
    log = replicated_log(tmp_path / "t-0")
    log.append(records(5))
    assert log.high_watermark == 0
    assert log.maybe_increment_high_watermark(3) and log.high_watermark == 3
    assert not log.maybe_increment_high_watermark(2) and log.high_watermark == 3  # never back
    assert log.maybe_increment_high_watermark(99) and log.high_watermark == 5  # clamped to the log end
    assert log.update_high_watermark(1) == 1  # a follower takes its leader's, whatever it is
    log.close()


def test_a_replicated_log_reopens_at_its_checkpointed_high_watermark(tmp_path):
    log = replicated_log(tmp_path / "t-0")
    log.append(records(5))
    log.close()
    again = PartitionLog(
        str(tmp_path / "t-0"), "t", 0, LogConfig(BrokerConfig(), {}), standalone=False, high_watermark=2
    )
    assert (again.high_watermark, again.log_end_offset) == (2, 5)
    again.close()
