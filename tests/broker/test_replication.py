"""Replication between real brokers (child processes), driven over the wire by a test
controller: followers fetch and append the leader's bytes, acks=all waits for the ISR,
the ISR shrinks and grows through AlterPartition, min.insync.replicas refuses, and a leader
change truncates the old leader's divergent suffix."""

from __future__ import annotations

import threading
import time

from seglog.errors import SeglogError

from .cluster_driver import (
    StandInController,
    pause,
    produce,
    resume,
    segment_bytes,
    start_broker,
)
from .conftest import wait_for

NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND = 19, 20


def _identical(root, ids, topic, index=0):
    logs = [segment_bytes(root, i, topic, index) for i in ids]
    return logs[0] if all(log == logs[0] for log in logs) else None


def test_acks_all_waits_for_the_isr_which_shrinks_and_grows(tmp_path) -> None:
    """Three brokers, one leader: acknowledged records are byte-identical in every log dir; a
    paused follower leaves the ISR after replica.lag.time.max.ms (AlterPartition) and acks=all
    goes on without it; with one ISR member left min.insync.replicas=2 refuses; resumed, the
    followers catch up and rejoin."""
    overrides = ("replica.lag.time.max.ms=1500", "min.insync.replicas=2")
    brokers = {i: start_broker(tmp_path, i, *overrides) for i in (1, 2, 3)}
    controller = StandInController("events")
    try:
        controller.elect(0, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3])
        controller.tell(brokers, is_new=True)
        leader = brokers[1]
        offsets = [produce(leader, "events", 0, [b"a%d" % n, b"b%d" % n]) for n in range(20)]
        assert [(o["error_code"], o["base_offset"]) for o in offsets] == [(0, 2 * n) for n in range(20)]
        replicated = wait_for(lambda: _identical(tmp_path, [1, 2, 3], "events"), what="identical logs")
        assert replicated.count(b"a19") == 1

        # follower 3 stops: acks=all waits until the leader drops it from the ISR, then answers
        # (a follower slow to start on a loaded machine may have left the ISR and come back)
        wait_for(lambda: sorted(controller.states[0].isr) == [1, 2, 3], what="a full ISR")
        before = len(controller.isr_changes())
        pause(brokers[3])
        answer = produce(leader, "events", 0, [b"while 3 sleeps"])
        assert answer["error_code"] == 0 and answer["base_offset"] == 40
        assert controller.isr_changes()[before:] == [(1, 0, [1, 2])]  # sent before the produce was answered

        # follower 2 stops too: the waiting produce is appended but the ISR shrinks below 2
        pause(brokers[2])
        assert produce(leader, "events", 0, [b"appended, not acknowledged"])["error_code"] == (
            NOT_ENOUGH_REPLICAS_AFTER_APPEND
        )
        assert controller.isr_changes()[-1] == (1, 0, [1])
        refused = produce(leader, "events", 0, [b"refused"])
        assert refused["error_code"] == NOT_ENOUGH_REPLICAS
        assert produce(leader, "events", 0, [b"acks=1 still goes"], acks=1)["error_code"] == 0

        # both come back: they catch up, rejoin the ISR, and acks=all is answered again
        resume(brokers[2])
        resume(brokers[3])
        wait_for(lambda: sorted(controller.states[0].isr) == [1, 2, 3], what="the ISR grown back")
        assert produce(leader, "events", 0, [b"all back"])["error_code"] == 0
        final = wait_for(lambda: _identical(tmp_path, [1, 2, 3], "events"), what="identical logs")
        assert b"refused" not in final and b"all back" in final
    finally:
        controller.close()
        for b in brokers.values():
            resume(b) if b.proc.poll() is None else None
            b.kill()


def test_a_leader_change_truncates_the_old_leaders_divergent_suffix(tmp_path) -> None:
    """The leader writes records nobody replicates (acks=1, its followers paused) and dies; a
    follower leads the next epoch and takes acks=all writes; the old leader comes back as a
    follower, truncates what diverged (OffsetForLeaderEpoch) and ends byte-identical. Every
    acknowledged acks=all record is in the new leader's log at its offset. A killed follower
    restarts from its log and its checkpointed high watermark."""
    brokers = {i: start_broker(tmp_path, i, "replica.lag.time.max.ms=1000") for i in (1, 2, 3)}
    controller = StandInController("history")
    acknowledged: dict[int, bytes] = {}
    try:
        controller.elect(0, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3])
        controller.tell(brokers, is_new=True)
        for n in range(10):
            answer = produce(brokers[1], "history", 0, [b"first-%d" % n])
            assert answer["error_code"] == 0
            acknowledged[answer["base_offset"]] = b"first-%d" % n
        wait_for(lambda: _identical(tmp_path, [1, 2, 3], "history"), what="identical logs")

        # the followers pause; the leader takes writes they never get, and dies
        pause(brokers[2])
        pause(brokers[3])
        # (this one may reach them: it answers the fetches they left waiting at the leader)
        assert produce(brokers[1], "history", 0, [b"maybe replicated"], acks=1)["error_code"] == 0
        for n in range(5):
            assert produce(brokers[1], "history", 0, [b"lost-%d" % n], acks=1)["error_code"] == 0
        brokers[1].kill()
        resume(brokers[2])
        resume(brokers[3])

        # broker 2 leads epoch 1; broker 3 is killed while following and restarted
        controller.elect(0, leader=2, isr=[2, 3], replicas=[1, 2, 3])
        controller.tell(brokers)
        for n in range(10):
            answer = produce(brokers[2], "history", 0, [b"second-%d" % n])
            assert answer["error_code"] == 0
            acknowledged[answer["base_offset"]] = b"second-%d" % n
        wait_for(lambda: _identical(tmp_path, [2, 3], "history"), what="broker 3 caught up")
        brokers[3].kill()
        brokers[3] = start_broker(tmp_path, 3, "replica.lag.time.max.ms=1000")
        brokers[1] = start_broker(tmp_path, 1, "replica.lag.time.max.ms=1000")
        controller.tell(brokers, to=[1, 3])
        answer = produce(brokers[2], "history", 0, [b"third"])
        assert answer["error_code"] == 0
        acknowledged[answer["base_offset"]] = b"third"

        final = wait_for(lambda: _identical(tmp_path, [1, 2, 3], "history"), what="the old leader truncated")
        assert b"lost-" not in final
        records = _records(tmp_path, 2, "history")
        assert all(records.get(offset) == value for offset, value in acknowledged.items())
        # the restarted follower's high watermark checkpoint: the leader's, once it caught up
        wait_for(lambda: _checkpoint(tmp_path, 3) == ("history", 0, max(acknowledged) + 1), what="broker 3's HW")
    finally:
        controller.close()
        for b in brokers.values():
            resume(b) if b.proc.poll() is None else None
            b.kill()


def _records(root, broker_id: int, topic: str) -> dict[int, bytes]:
    import seglog

    with seglog.open(root / f"broker-{broker_id}", read_only=True) as logs:
        return {r.offset: r.value for r in logs.partition(topic, 0).records(0, end_offset=None)}


def _checkpoint(root, broker_id: int) -> tuple[str, int, int] | None:
    lines = (root / f"broker-{broker_id}" / "replication-offset-checkpoint").read_text().split("\n")
    entries = [line.split() for line in lines[2:] if line.strip()]
    return (entries[0][0], int(entries[0][1]), int(entries[0][2])) if entries else None


def test_no_acknowledged_record_is_lost_across_leader_kills(tmp_path) -> None:
    """A producer writes acks=all without pause and records every acknowledged offset; the
    leader is SIGKILLed four times, each time a live ISR member is elected (as the
    controller's offline election does) and the killed broker comes back as a follower.
    Every acknowledged record is in the last leader's log at its offset, and every replica
    holds the same bytes."""
    overrides = ("replica.lag.time.max.ms=1000", "min.insync.replicas=2")
    brokers = {i: start_broker(tmp_path, i, *overrides) for i in (1, 2, 3)}
    controller = StandInController("kills")
    acknowledged: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def producer() -> None:
        n = 0
        while not stop.is_set():
            value = b"record-%d" % n
            try:
                answer = produce(brokers[controller.states[0].leader], "kills", 0, [value], timeout_ms=5_000)
            except (SeglogError, OSError):
                time.sleep(0.05)  # the leader is gone: the next one is elected
                continue
            if answer["error_code"] == 0:
                acknowledged.append((answer["base_offset"], value))
            n += 1

    writer = threading.Thread(target=producer, daemon=True)
    try:
        controller.elect(0, leader=1, isr=[1, 2, 3], replicas=[1, 2, 3])
        controller.tell(brokers, is_new=True)
        writer.start()
        for _ in range(4):
            acked = len(acknowledged)
            wait_for(lambda a=acked: len(acknowledged) >= a + 20, what="acknowledged writes")
            state = controller.states[0]
            old = state.leader
            brokers[old].kill()
            survivors = [b for b in state.isr if b != old]
            controller.elect(0, leader=survivors[0], isr=survivors, replicas=[1, 2, 3])
            controller.tell(brokers)
            brokers[old] = start_broker(tmp_path, old, *overrides)
            controller.tell(brokers, to=[old])
            wait_for(lambda: len(controller.states[0].isr) == 3, what="the killed broker back in the ISR")
        stop.set()
        writer.join(30)
        leader = controller.states[0].leader
        wait_for(lambda: _identical(tmp_path, [1, 2, 3], "kills"), what="identical logs")
        records = _records(tmp_path, leader, "kills")
        assert len(acknowledged) >= 80
        assert [(o, records.get(o)) for o, _ in acknowledged] == acknowledged  # (an offset acknowledged twice fails)
    finally:
        stop.set()
        controller.close()
        for b in brokers.values():
            b.kill()
