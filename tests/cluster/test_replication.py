"""Replication in a real cluster: three ``seglog broker`` processes, a real ZooKeeper and the
controller inside a broker. Followers fetch and append the leader's bytes, acks=all waits for
the ISR, a paused follower leaves the ISR through the controller (AlterPartition, written to
the partition's state znode) and rejoins, min.insync.replicas refuses, and after leader kills
no acknowledged record is lost and the old leader's divergent suffix is truncated.

Two clusters: one whose ZooKeeper sessions outlast a paused follower (its ISR changes come from
its leader, not from its session expiring), one whose short sessions let a killed leader be
replaced quickly.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from seglog.cli import main
from seglog.client import PLAINTEXT, ClientSecurity, connect
from seglog.cluster import znodes
from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.common import TopicPartition
from seglog.errors import ErrorCode
from seglog.protocol import ApiKey
from seglog.protocol.message_data import (
    DeleteRecordsRequestData,
    DeleteRecordsResponseData,
    FetchRequestData,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    OffsetForLeaderEpochRequestData,
    ProduceRequestData,
    ProduceResponseData,
)
from seglog.records import Record
from seglog.records.batch import build_batch
from seglog.tools.cluster import BrokerProcess, LocalCluster

from .conftest import wait_until
from .history import History
from .security import client_properties

NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND = 6, 19, 20
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75
REQUEST_TIMED_OUT = 7
FETCHING = [
    "replica.fetch.wait.max.ms=200",
    "replica.fetch.backoff.ms=100",
    "replica.high.watermark.checkpoint.interval.ms=100",
    "min.insync.replicas=2",
    "controlled.shutdown.retry.backoff.ms=200",
]


def chrooted_cluster(
    zookeeper: ZooKeeperServer, directory: Path, name: str, overrides: list[str], security: str = "plaintext"
) -> LocalCluster:
    """Three brokers whose znodes are under ``/name`` (``/name-sasl_ssl`` for a SASL_SSL-only one)."""
    if security != "plaintext":
        name = f"{name}-{security}"
    admin = KazooClient(hosts=zookeeper.connect_string)
    admin.start()
    admin.ensure_path(f"/{name}")
    admin.stop()
    admin.close()
    connect = f"{zookeeper.connect_string}/{name}"
    secure = security == "sasl_ssl"
    return LocalCluster(directory, 3, zookeeper=connect, port=None, overrides=FETCHING + overrides, secure=secure)


@pytest.fixture(scope="module")
def patient(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Sessions of 30 s: a follower paused for seconds stays registered; lagging 1.5 s, it leaves the ISR."""
    overrides = ["zookeeper.session.timeout.ms=30000", "replica.lag.time.max.ms=1500"]
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("patient"), "patient", overrides)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def hasty(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Sessions of 3 s: a killed leader is replaced within seconds."""
    overrides = ["zookeeper.session.timeout.ms=3000", "replica.lag.time.max.ms=5000"]
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("hasty"), "hasty", overrides)
    local.start()
    try:
        yield local
    finally:
        local.stop()


def zk_of(cluster: LocalCluster) -> ZkClient:
    return ZkClient(cluster.zookeeper_connect, session_timeout_ms=10_000)


def create_topic(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **client_properties(cluster)})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])], operation_timeout=30)[topic].result(60)


def state(zk: ZkClient, topic: str) -> znodes.LeaderAndIsr:
    found = zk.get_partition_state(TopicPartition(topic, 0))
    assert found is not None
    return found.leader_and_isr


def produce(
    broker: BrokerProcess,
    topic: str,
    values: list[bytes],
    acks: int = -1,
    timeout_ms: int = 30_000,
    source_host: str | None = None,
    security: ClientSecurity = PLAINTEXT,
) -> ProduceResponseData.PartitionProduceResponse:
    """One Produce request of one batch to partition 0 (from ``source_host``, if given): its answer
    (error_code, base_offset)."""
    records = build_batch([Record(key=None, value=v) for v in values])
    body = ProduceRequestData(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            ProduceRequestData.TopicProduceData(
                name=topic, partition_data=[ProduceRequestData.PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    timeout = timeout_ms / 1000 + 30
    with connect(broker.address, timeout=timeout, source_host=source_host, security=security) as client:
        answer: ProduceResponseData = client.request(ApiKey.PRODUCE, body)
    return answer.responses[0].partition_responses[0]


def leader_epoch_errors(broker: BrokerProcess, topic: str, current_leader_epoch: int) -> tuple[int, int, int]:
    """Fetch (v12), ListOffsets and OffsetForLeaderEpoch of partition 0, sent to ``broker`` by a consumer
    that knows ``current_leader_epoch`` (KIP-320): their error codes."""
    fetch = FetchRequestData(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        topics=[
            FetchRequestData.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequestData.FetchPartition(
                        partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0, partition_max_bytes=1024
                    )
                ],
            )
        ],
    )
    latest = ListOffsetsRequestData.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=current_leader_epoch, timestamp=-1
    )
    list_offsets = ListOffsetsRequestData(
        replica_id=-1, topics=[ListOffsetsRequestData.ListOffsetsTopic(name=topic, partitions=[latest])]
    )
    end_offsets = OffsetForLeaderEpochRequestData(
        topics=[
            OffsetForLeaderEpochRequestData.OffsetForLeaderTopic(
                topic=topic,
                partitions=[
                    OffsetForLeaderEpochRequestData.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=current_leader_epoch, leader_epoch=0
                    )
                ],
            )
        ]
    )
    with connect(broker.address, timeout=10) as client:
        fetched = client.request(ApiKey.FETCH, fetch, version=12).responses[0].partitions[0]
        listed = client.request(ApiKey.LIST_OFFSETS, list_offsets).topics[0].partitions[0]
        ended = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, end_offsets).topics[0].partitions[0]
    return fetched.error_code, listed.error_code, ended.error_code


def wait_until_led(cluster: LocalCluster, zk: ZkClient, topic: str) -> int:
    """Until the leader ZooKeeper names for partition 0 serves it at the leader epoch written there
    (it applied the controller's LeaderAndIsr); that leader's id."""
    found = state(zk, topic)
    wait_until(
        lambda: leader_epoch_errors(cluster.brokers[found.leader], topic, found.leader_epoch) == (0, 0, 0),
        what=f"broker {found.leader} to lead {topic}-0 at leader epoch {found.leader_epoch}",
    )
    return found.leader


def segment_bytes(broker: BrokerProcess, topic: str) -> bytes:
    """Partition 0's records on one broker: its .log files in offset order."""
    d = broker.log_dir / f"{topic}-0"
    return b"".join((d / name).read_bytes() for name in sorted(os.listdir(d)) if name.endswith(".log"))


def identical(cluster: LocalCluster, topic: str) -> bytes | None:
    logs = [segment_bytes(b, topic) for b in cluster.brokers.values()]
    return logs[0] if all(log == logs[0] for log in logs) else None


def test_acks_all_waits_for_the_isr_which_shrinks_and_grows(patient: LocalCluster) -> None:
    """acks=all records are byte-identical on all replicas; a SIGSTOPped follower leaves the ISR
    (the leader's AlterPartition, written by the controller to ZooKeeper) and acks=all goes on
    without it; with one ISR member min.insync.replicas=2 refuses; after SIGCONT both rejoin."""
    with zk_of(patient) as zk:
        leader = zk.get_controller_id()  # the leader's AlterPartition must reach a running controller
        assert leader is not None
        first, second = (b for b in (1, 2, 3) if b != leader)
        create_topic(patient, "events", [leader, first, second])
        wait_until(lambda: state(zk, "events").isr == (leader, first, second), what="a full ISR")
        wait_until(lambda: produce(patient.brokers[leader], "events", [b"first"]).error_code == 0, what="a leader")
        for n in range(20):
            answer = produce(patient.brokers[leader], "events", [b"a%d" % n, b"b%d" % n])
            assert (answer.error_code, answer.base_offset) == (0, 1 + 2 * n)
        replicated = wait_until_found(lambda: identical(patient, "events"), "identical logs")
        assert replicated.count(b"b19") == 1

        # one follower stops: acks=all waits until the leader drops it from the ISR, then answers
        patient.brokers[second].signal(signal.SIGSTOP)
        answer = produce(patient.brokers[leader], "events", [b"while one sleeps"])
        assert (answer.error_code, answer.base_offset) == (0, 41)
        assert state(zk, "events").isr == (leader, first)  # written before the produce was answered

        # the other stops too: the waiting produce is appended but the ISR shrinks below 2
        patient.brokers[first].signal(signal.SIGSTOP)
        answer = produce(patient.brokers[leader], "events", [b"appended, not acknowledged"])
        assert answer.error_code == NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert state(zk, "events").isr == (leader,)
        assert produce(patient.brokers[leader], "events", [b"refused"]).error_code == NOT_ENOUGH_REPLICAS
        assert produce(patient.brokers[leader], "events", [b"acks=1 goes"], acks=1).error_code == 0

        # both come back: they catch up, rejoin the ISR, and acks=all is answered again
        patient.brokers[first].signal(signal.SIGCONT)
        patient.brokers[second].signal(signal.SIGCONT)
        wait_until(lambda: sorted(state(zk, "events").isr) == [1, 2, 3], what="the ISR grown back")
        assert produce(patient.brokers[leader], "events", [b"all back"]).error_code == 0
        final = wait_until_found(lambda: identical(patient, "events"), "identical logs")
        assert b"refused" not in final and b"all back" in final


def delete_records(broker: BrokerProcess, topic: str, offset: int, timeout_ms: int) -> tuple[int, int]:
    """DeleteRecords of partition 0 before ``offset``: its (error code, low watermark)."""
    body = DeleteRecordsRequestData(
        topics=[
            DeleteRecordsRequestData.DeleteRecordsTopic(
                name=topic,
                partitions=[DeleteRecordsRequestData.DeleteRecordsPartition(partition_index=0, offset=offset)],
            )
        ],
        timeout_ms=timeout_ms,
    )
    with connect(broker.address, timeout=timeout_ms / 1000 + 30) as client:
        answer: DeleteRecordsResponseData = client.request(ApiKey.DELETE_RECORDS, body)
    found = answer.topics[0].partitions[0]
    return found.error_code, found.low_watermark


def log_start_offset(broker: BrokerProcess, topic: str) -> int:
    """ListOffsets EARLIEST of partition 0 on any replica (the debugging replica id -2 may ask a follower)."""
    earliest = ListOffsetsRequestData.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)
    body = ListOffsetsRequestData(
        replica_id=-2, topics=[ListOffsetsRequestData.ListOffsetsTopic(name=topic, partitions=[earliest])]
    )
    with connect(broker.address, timeout=10) as client:
        answer: ListOffsetsResponseData = client.request(ApiKey.LIST_OFFSETS, body)
    found = answer.topics[0].partitions[0]
    assert found.error_code == ErrorCode.NONE
    return found.offset


def test_delete_records_waits_for_every_replica(
    patient: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's DelayedDeleteRecords: the leader moves its log start offset at once and answers
    once every live replica's log starts there too (each follower says so in its next fetch).
    With a follower paused the answer waits until the request's timeout_ms and is
    REQUEST_TIMED_OUT with the low watermark the paused follower holds back (``seglog
    delete-records`` waits for that answer too); with it running again, the answer is the new
    low watermark, and every replica's log starts there."""
    with zk_of(patient) as zk:
        leader = zk.get_controller_id()
        assert leader is not None
        first, second = (b for b in (1, 2, 3) if b != leader)
        create_topic(patient, "trimmed", [leader, first, second])
        wait_until(lambda: state(zk, "trimmed").isr == (leader, first, second), what="a full ISR")
        wait_until(lambda: produce(patient.brokers[leader], "trimmed", [b"r0"]).error_code == 0, what="a leader")
        assert produce(patient.brokers[leader], "trimmed", [b"r%d" % n for n in range(1, 10)]).error_code == 0

        patient.brokers[second].signal(signal.SIGSTOP)
        try:
            # the paused follower's log still starts at 0 (it stays registered: 30 s sessions)
            assert delete_records(patient.brokers[leader], "trimmed", 4, timeout_ms=1000) == (REQUEST_TIMED_OUT, 0)
            assert log_start_offset(patient.brokers[leader], "trimmed") == 4  # deleted on the leader all the same
            # the command waits for that answer (its socket outlasts --timeout-ms)
            offsets = tmp_path / "offsets.json"
            offsets.write_text('{"partitions": [{"topic": "trimmed", "partition": 0, "offset": 5}]}')
            command = ["delete-records", "--bootstrap-server", patient.brokers[leader].address, "--timeout-ms", "1000"]
            assert main([*command, "--offset-json-file", str(offsets)]) == 1
            timed_out = f"partition: trimmed-0\terror: Kafka error code {REQUEST_TIMED_OUT}"
            assert capsys.readouterr().out == f"Records delete operation completed:\n{timed_out}\n"
        finally:
            patient.brokers[second].signal(signal.SIGCONT)
        assert delete_records(patient.brokers[leader], "trimmed", 6, timeout_ms=60_000) == (0, 6)
        assert [log_start_offset(patient.brokers[b], "trimmed") for b in (leader, first, second)] == [6, 6, 6]


def wait_until_found(find: Any, what: str) -> Any:
    found: list[Any] = []

    def check() -> Any:
        found.append(find())
        return found[-1]

    wait_until(check, what=what)
    return found[-1]


def test_a_new_leader_keeps_every_acknowledged_record(hasty: LocalCluster) -> None:
    """A confluent-kafka producer (acks=all) writes without pause and records every acknowledged
    value; the leader is SIGKILLed three times (the controller elects a new one from the ISR)
    and restarted. Every acknowledged record is in the last leader's log at its offset and a
    consumer reads them all; every replica ends byte-identical."""
    with zk_of(hasty) as zk:
        create_topic(hasty, "kills", [1, 2, 3])
        wait_until(lambda: state(zk, "kills").isr == (1, 2, 3), what="a full ISR")
        with History(hasty.bootstrap_servers, "kills") as history:
            for _ in range(3):
                history.wait_for(50)
                old = state(zk, "kills")
                hasty.brokers[old.leader].kill()
                moved = functools.partial(lambda gone: state(zk, "kills").leader not in (-1, gone), old.leader)
                wait_until(moved, 60, "a new leader")
                assert state(zk, "kills").leader in old.isr
                hasty.start_broker(old.leader)
                wait_until(lambda: len(state(zk, "kills").isr) == 3, 60, "the killed broker back in the ISR")
            history.wait_for(50)
        leader = hasty.brokers[state(zk, "kills").leader]
        wait_until_found(lambda: identical(hasty, "kills"), "identical logs")
        assert len(history.acknowledged) >= 200
        history.check(leader)


def test_an_old_leader_truncates_its_divergent_suffix(hasty: LocalCluster) -> None:
    """The leader takes acks=1 records its paused followers never get, and is SIGKILLed; the
    controller elects a follower, which takes acks=all writes; the old leader comes back as a
    follower, truncates what diverged (OffsetForLeaderEpoch) and ends byte-identical."""
    with zk_of(hasty) as zk:
        create_topic(hasty, "history", [1, 2, 3])
        wait_until(lambda: state(zk, "history").isr == (1, 2, 3), what="a full ISR")
        old = wait_until_led(hasty, zk, "history")  # ZooKeeper's state comes before the leader's
        for n in range(10):
            assert produce(hasty.brokers[old], "history", [b"first-%d" % n]).error_code == 0
        wait_until_found(lambda: identical(hasty, "history"), "identical logs")

        followers = [b for b in (1, 2, 3) if b != old]
        for b in followers:
            hasty.brokers[b].signal(signal.SIGSTOP)
        # (this one may reach them: it answers the fetches they left waiting at the leader, or
        # sent before they stopped and read by it late; the pause lets those answers go first)
        assert produce(hasty.brokers[old], "history", [b"maybe replicated"], acks=1).error_code == 0
        time.sleep(1)
        for n in range(5):
            assert produce(hasty.brokers[old], "history", [b"lost-%d" % n], acks=1).error_code == 0
        hasty.brokers[old].kill()
        held = segment_bytes(hasty.brokers[old], "history")  # its log as it died
        for b in followers:
            hasty.brokers[b].signal(signal.SIGCONT)

        wait_until(lambda: state(zk, "history").leader in followers, 60, "a new leader")
        new = hasty.brokers[state(zk, "history").leader]
        wait_until(lambda: produce(new, "history", [b"second"]).error_code == 0, what="the new leader to write")
        for n in range(10):
            assert produce(new, "history", [b"second-%d" % n]).error_code == 0
        history = segment_bytes(new, "history")
        hasty.start_broker(old)
        final = wait_until_found(lambda: identical(hasty, "history"), "the old leader truncated")
        assert final == history and b"second-9" in final and b"lost-4" in held
        if final.startswith(held):  # every record reached a follower before it stopped: no suffix diverged
            pytest.skip("the loaded machine let the stopped followers take every record: nothing to truncate")
        assert b"lost-" not in final


def test_requests_from_another_leader_epoch_are_fenced(hasty: LocalCluster) -> None:
    """KIP-320: Fetch, ListOffsets and OffsetForLeaderEpoch carry the client's current leader epoch.
    Once the partition's epoch has moved (a reassignment that only reorders the replicas moves it,
    the leader staying), an older epoch is FENCED_LEADER_EPOCH and a newer one UNKNOWN_LEADER_EPOCH,
    on a follower as on the leader (the epoch is checked before the role, as Kafka's
    localLogWithEpochOrThrow does); -1 asks for no check."""
    with zk_of(hasty) as zk:
        create_topic(hasty, "epochs", [1, 2, 3])
        wait_until_led(hasty, zk, "epochs")
        assert state(zk, "epochs").leader_epoch == 0
        reorder = {TopicPartition("epochs", 0): [1, 3, 2]}
        zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment(reorder))
        wait_until(lambda: zk.get(znodes.REASSIGN_PARTITIONS) is None, 60, "the reassignment done")
        epoch = state(zk, "epochs").leader_epoch
        assert epoch > 0 and wait_until_led(hasty, zk, "epochs") == 1
        leader, follower = hasty.brokers[1], hasty.brokers[3]
        not_leader = (NOT_LEADER_OR_FOLLOWER,) * 3
        wait_until(lambda: leader_epoch_errors(follower, "epochs", epoch) == not_leader, what="the follower's epoch")
        for broker in (leader, follower):
            assert leader_epoch_errors(broker, "epochs", epoch - 1) == (FENCED_LEADER_EPOCH,) * 3
            assert leader_epoch_errors(broker, "epochs", epoch + 1) == (UNKNOWN_LEADER_EPOCH,) * 3
        assert leader_epoch_errors(leader, "epochs", -1) == (0, 0, 0)
        assert leader_epoch_errors(follower, "epochs", -1) == not_leader
