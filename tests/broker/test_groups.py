"""Consumer groups on the broker, with real clients: confluent-kafka members in processes
of their own (two, three, one killed with SIGKILL and one added), static membership,
cooperative-sticky, kafka-python beside confluent-kafka in one group.

What the members did is checked from their recorded history (``group_member.py``), not
from timings: every record consumed, each run of a member on a partition starting at an
offset no older than the last commit acknowledged before it and going on without a gap
(at-least-once: only records whose commit was never acknowledged are consumed again),
and the committed offsets at the end equal to the log ends.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import PRODUCER, wait_for
from .subprocess_broker import BrokerProcess

MEMBER = Path(__file__).with_name("group_member.py")
# small timeouts, so that a killed member is noticed within seconds
GROUP_BROKER = {"num.partitions": 1, "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
FAST_MEMBER = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 200, "max.poll.interval.ms": 10000}
# members that must not be dropped when a loaded machine starves them for a while
STEADY_MEMBER = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "max.poll.interval.ms": 10000}


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return GROUP_BROKER


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    for i in range(count):
        producer.produce(topic, b"r%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets, asked without joining it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


# --- members in processes, and their history ------------------------------------------------------


class Member:
    def __init__(self, name: str, bootstrap: str, group: str, topic: str, history: Path, **config: Any) -> None:
        self.name = name
        self.history = history
        settings = [f"{k}={v}" for k, v in {**FAST_MEMBER, **config}.items()]
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER), bootstrap, group, topic, str(history), *settings],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        # after its last line: whatever it owned, it owns no longer
        with self.history.open("a") as f:
            f.write(f"{time.monotonic_ns()} killed\n")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


Event = tuple[int, str, str, list[int]]  # (monotonic ns, member, what, numbers)


def history(members: list[Member]) -> list[Event]:
    events = []
    for m in members:
        if not m.history.exists():
            continue
        for line in m.history.read_text().splitlines():
            ns, what, *rest = line.split(" ")
            numbers = [int(x) for x in (rest[0].split(",") if what in ("assigned", "revoked") else rest) if x]
            events.append((int(ns), m.name, what, numbers))
    return sorted(events)


def assignments(events: list[Event]) -> dict[str, set[int]]:
    """Each member's partitions after the events (eager: an assignment replaces the last)."""
    held: dict[str, set[int]] = {}
    for _, member, what, numbers in events:
        if what == "assigned":
            held[member] = set(numbers)
        elif what in ("revoked", "killed"):
            held[member] = set()
    return held


def consumed(events: list[Event]) -> set[tuple[int, int]]:
    return {(n[0], n[1]) for _, _, what, n in events if what == "consumed"}


def balanced(members: list[Member], partitions: int) -> Callable[[], bool]:
    """Every live member holds partitions, no partition twice, all of them held."""

    def check() -> bool:
        held = assignments(history(members))
        live = [held.get(m.name, set()) for m in members if m.proc.poll() is None]
        every = [p for ps in live for p in ps]
        return all(live) and sorted(every) == list(range(partitions))

    return check


def all_consumed(members: list[Member], partitions: int, count: int) -> Callable[[], bool]:
    wanted = {(i % partitions, i // partitions) for i in range(count)}
    return lambda: wanted <= consumed(history(members))


def check_at_least_once(events: list[Event]) -> None:
    """The history's rules (see the module's docstring). Two members may hold a partition
    at once for a while (one the coordinator dropped that has not yet heard so): what
    counts is that no run starts before the last acknowledged commit."""
    acked: dict[int, int] = defaultdict(int)  # auto.offset.reset=earliest: 0 before any commit
    top: dict[int, int] = defaultdict(lambda: -1)
    runs: dict[tuple[str, int], int | None] = {}  # (member, partition) -> the next offset of its run
    for _, member, what, numbers in events:
        if what == "assigned":
            runs.update({(member, p): None for p in numbers})
        elif what in ("revoked", "killed"):
            gone = numbers if what == "revoked" else [p for m, p in runs if m == member]
            for p in gone:
                runs.pop((member, p), None)
        elif what == "consumed":
            p, offset = numbers
            assert (member, p) in runs, f"{member} consumed {p}:{offset} without holding it"
            expected = runs[(member, p)]
            if expected is None:  # a run starts: at the last acknowledged commit, or a later one in flight
                assert acked[p] <= offset <= top[p] + 1, f"{member} restarted {p} at {offset}, committed {acked[p]}"
            else:
                assert offset == expected, f"{member} skipped from {p}:{expected} to {offset}"
            runs[(member, p)] = offset + 1
            top[p] = max(top[p], offset)
        elif what == "committed":
            p, offset = numbers
            acked[p] = max(acked[p], offset)


def test_members_join_die_and_are_replaced(seglog_broker, tmp_path) -> None:
    bootstrap, topic, group, partitions = seglog_broker.bootstrap_servers, "work", "workers", 6
    create_topic(bootstrap, topic, partitions)
    members: list[Member] = []

    def add(name: str, **config: Any) -> None:
        members.append(Member(name, bootstrap, group, topic, tmp_path / f"{name}.history", **config))

    try:
        add("a", **{"record.delay.ms": 20})
        add("b")
        wait_for(balanced(members, partitions), what="two members sharing the partitions")
        produce(bootstrap, topic, partitions, 120)
        wait_for(all_consumed(members, partitions, 120), what="the first records consumed")

        add("c")
        wait_for(balanced(members, partitions), what="three members sharing the partitions")
        assert all(assignments(history(members)).values())
        produce(bootstrap, topic, partitions, 120)

        # a killed mid-stream: its partitions go to the others, then to d
        wait_for(lambda: any(n[1] >= 20 for _, m, w, n in history(members) if m == "a" and w == "consumed"))
        members[0].kill()
        wait_for(balanced(members, partitions), what="a's partitions taken over")
        add("d")
        wait_for(balanced(members, partitions), what="d given partitions")
        produce(bootstrap, topic, partitions, 120)
        wait_for(all_consumed(members, partitions, 360), what="every record consumed")
        wait_for(lambda: committed(bootstrap, group, topic, partitions) == dict.fromkeys(range(partitions), 60))
    finally:
        for m in members:
            m.stop()
    events = history(members)
    check_at_least_once(events)
    held = {m for _, m, w, n in events if w == "assigned" and n}
    assert held == {"a", "b", "c", "d"}


# --- in-process members ------------------------------------------------------------------------------


class Recorded:
    """A confluent-kafka member in this process, its rebalance callbacks recorded."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        self.assigned: list[set[int]] = []
        self.revoked: list[set[int]] = []
        self.records: list[tuple[int, int]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
                **STEADY_MEMBER,
                **config,
            }
        )
        self.consumer.subscribe(
            [topic],
            on_assign=lambda c, tps: self.assigned.append({tp.partition for tp in tps}),
            on_revoke=lambda c, tps: self.revoked.append({tp.partition for tp in tps}),
        )

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.records.append((msg.partition(), msg.offset()))

    def holding(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}


def poll_until(members: list[Recorded], condition: Callable[[], bool], what: str) -> None:
    def step() -> bool:
        for m in members:
            m.poll()
        return condition()

    wait_for(step, what=what)


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(seglog_broker) -> None:
    bootstrap, topic, group = seglog_broker.bootstrap_servers, "static", "statics"
    create_topic(bootstrap, topic, 4)
    a = Recorded(bootstrap, group, topic, **{"group.instance.id": "a"})
    b = Recorded(bootstrap, group, topic, **{"group.instance.id": "b"})
    poll_until([a, b], lambda: len(a.holding()) == len(b.holding()) == 2, "two static members with two each")
    before, b_rebalances = a.holding(), (len(b.assigned), len(b.revoked))
    a.consumer.close()  # a static member leaves no LeaveGroup behind: its place is kept
    a = Recorded(bootstrap, group, topic, **{"group.instance.id": "a"})
    # a rebalance would wait for b to rejoin, revoking b's partitions first: b is polled throughout
    poll_until([a, b], lambda: a.holding() == before, "the restarted member's old partitions")
    assert (len(b.assigned), len(b.revoked)) == b_rebalances
    assert b.holding() == set(range(4)) - before
    a.consumer.close()
    b.consumer.close()


def test_cooperative_sticky_moves_only_what_it_must(seglog_broker) -> None:
    bootstrap, topic, group = seglog_broker.bootstrap_servers, "coop", "cooperative"
    create_topic(bootstrap, topic, 4)
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    a = Recorded(bootstrap, group, topic, **strategy)
    poll_until([a], lambda: a.holding() == set(range(4)), "the first member with every partition")
    b = Recorded(bootstrap, group, topic, **strategy)
    poll_until([a, b], lambda: len(a.holding()) == len(b.holding()) == 2, "two members with two partitions each")
    # incremental: a gave up two partitions and kept two, never revoking all it held
    assert a.revoked == [set(range(4)) - a.holding()]
    assert a.assigned[0] == set(range(4)) and not any(a.assigned[1:])
    produce(bootstrap, topic, 4, 40)
    poll_until([a, b], lambda: len(a.records) + len(b.records) >= 40, "the records consumed")
    assert sorted(a.records + b.records) == sorted((i % 4, i // 4) for i in range(40))
    assert {p for p, _ in a.records} == a.holding() and {p for p, _ in b.records} == b.holding()
    a.consumer.close()
    b.consumer.close()


def test_kafka_python_and_confluent_kafka_in_one_group(seglog_broker) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

    bootstrap, topic, group = seglog_broker.bootstrap_servers, "mixed", "mixed-clients"
    create_topic(bootstrap, topic, 4)
    ours = Recorded(bootstrap, group, topic, **{"partition.assignment.strategy": "range"})
    theirs = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        max_poll_interval_ms=10000,
    )
    got: list[tuple[int, int]] = []

    def step() -> None:
        for batch in theirs.poll(timeout_ms=50).values():
            got.extend((r.partition, r.offset) for r in batch)

    def shared() -> bool:
        step()
        mine, other = ours.holding(), {tp.partition for tp in theirs.assignment()}
        return len(mine) == len(other) == 2 and mine | other == set(range(4))

    poll_until([ours], shared, "both clients holding two partitions")
    produce(bootstrap, topic, 4, 40)

    def everything() -> bool:
        step()
        return len(got) + len(ours.records) >= 40

    poll_until([ours], everything, "the records consumed by both")
    assert sorted(got + ours.records) == sorted((i % 4, i // 4) for i in range(40))
    ours.consumer.commit(asynchronous=False)
    theirs.commit()
    assert committed(bootstrap, group, topic, 4) == dict.fromkeys(range(4), 10)
    theirs_partitions = {tp.partition for tp in theirs.assignment()}
    assert {theirs.committed(KafkaPythonPartition(topic, p)) for p in theirs_partitions} == {10}
    theirs.close()
    ours.consumer.close()


def test_committed_offsets_survive_sigkill_of_the_broker(tmp_path) -> None:
    overrides = [f"{k}={v}" for k, v in GROUP_BROKER.items()]
    with BrokerProcess(tmp_path / "data", *overrides) as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "durable", 2)
        produce(bootstrap, "durable", 2, 20)
        member = Recorded(bootstrap, "survivors", "durable")
        poll_until([member], lambda: len(member.records) == 20, "the records consumed")
        member.consumer.commit(
            offsets=[TopicPartition("durable", 0, 7), TopicPartition("durable", 1, 10)], asynchronous=False
        )
        member.consumer.close()
        standalone = Consumer({"bootstrap.servers": bootstrap, "group.id": "by-hand"})
        standalone.commit(offsets=[TopicPartition("durable", 1, 3)], asynchronous=False)
        standalone.close()
        broker.kill()
    with BrokerProcess(tmp_path / "data", *overrides) as broker:
        bootstrap = broker.bootstrap_servers
        assert committed(bootstrap, "survivors", "durable", 2) == {0: 7, 1: 10}
        assert committed(bootstrap, "by-hand", "durable", 2) == {0: -1001, 1: 3}
        # and the group goes on from there
        member = Recorded(bootstrap, "survivors", "durable")
        poll_until([member], lambda: len(member.records) == 3, "the records after the committed offset")
        assert sorted(member.records) == [(0, 7), (0, 8), (0, 9)]
        member.consumer.close()


def test_a_consumer_offsets_topic_a_client_made_is_used_as_it_is(seglog_broker_factory) -> None:
    broker = seglog_broker_factory(config=GROUP_BROKER)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "__consumer_offsets", 3)  # not the broker's 50: Kafka then hashes over 3
    create_topic(bootstrap, "few", 1)
    produce(bootstrap, "few", 1, 5)
    member = Recorded(bootstrap, "a-group-hashed-past-3", "few")
    poll_until([member], lambda: len(member.records) == 5, "the records consumed")
    member.consumer.commit(asynchronous=False)
    member.consumer.close()
    assert committed(bootstrap, "a-group-hashed-past-3", "few", 1) == {0: 5}


def test_admin_clients_list_describe_remove_delete_offsets_and_groups(seglog_broker) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
    from kafka import TopicPartition as KafkaPythonPartition
    from kafka.admin import KafkaAdminClient, MemberToRemove

    bootstrap, topic, group = seglog_broker.bootstrap_servers, "adm", "admins"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 2, 10)
    member = Recorded(bootstrap, group, topic, **{"group.instance.id": "s1"})
    poll_until([member], lambda: len(member.records) == 10, "the records consumed")
    member.consumer.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(30).valid}
    assert listed[group].state == ConsumerGroupState.STABLE and not listed[group].is_simple_consumer_group
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert described.state == ConsumerGroupState.STABLE and described.partition_assignor == "range"
    (only,) = described.members
    assert only.group_instance_id == "s1" and only.host == "/127.0.0.1"
    assert sorted(tp.partition for tp in only.assignment.topic_partitions) == [0, 1]

    member.consumer.close()  # a static member does not leave: the admin client removes it
    theirs = KafkaAdminClient(bootstrap_servers=bootstrap)
    removed = theirs.remove_group_members(group, [MemberToRemove(group_instance_id="s1")])
    assert [e.errno for e in removed.values()] == [0]
    wait_for(lambda: admin.describe_consumer_groups([group])[group].result(30).state == ConsumerGroupState.EMPTY)
    deleted = theirs.delete_group_offsets(group, [KafkaPythonPartition(topic, 0)])
    assert [e.errno for e in deleted.values()] == [0]
    assert committed(bootstrap, group, topic, 2) == {0: -1001, 1: 5}
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3)])
    admin.alter_consumer_group_offsets([request])[group].result(30)
    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert sorted((tp.partition, tp.offset) for tp in fetched.topic_partitions) == [(0, 3), (1, 5)]
    admin.delete_consumer_groups([group])[group].result(30)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert committed(bootstrap, group, topic, 2) == {0: -1001, 1: -1001}
    theirs.close()
