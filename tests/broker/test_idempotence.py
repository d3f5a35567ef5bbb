"""Idempotent producers against the broker: InitProducerId, retries after a connection
the broker cut acknowledged without a second append, sequence gaps refused, the
producer state kept across a SIGKILL; and the WriteTxnMarkers API."""

from __future__ import annotations

import socket
from typing import Any

from confluent_kafka import Producer

import seglog
from seglog.broker.routes import Route
from seglog.client import BlockingConnection, connect
from seglog.protocol import ApiKey
from seglog.protocol.message_data import (
    InitProducerIdRequestData,
    ListOffsetsRequestData,
    MetadataRequestData,
    ProduceRequestData,
    WriteTxnMarkersRequestData,
    WriteTxnMarkersResponseData,
)
from seglog.records import build_batch
from seglog.storage.producer_state_manager import ProducerStateManager

from .conftest import PRODUCER
from .subprocess_broker import BrokerProcess

OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def cut_connections_after_every(broker: Any, nth: int) -> list[int]:
    """Have the broker drop every client connection right after each ``nth`` produce
    request is appended, before its response goes: the producer must retry what was
    written (a fault injected into the broker's socket layer, not a stand-in for it)."""
    server = broker.server
    route = server.routes[ApiKey.PRODUCE]
    produce = route.handler
    count = [0]

    async def cutting(version: int, body: dict[str, Any]) -> Any:
        response = await produce(version, body)
        count[0] += 1
        if count[0] % nth == 0:
            for conn in list(server.socket_server.connections):
                conn.sock.shutdown(socket.SHUT_RDWR)
        return response

    server.routes[ApiKey.PRODUCE] = Route(cutting, route.versions)
    return count


def test_a_producer_cut_off_mid_stream_writes_each_record_once_in_order(
    seglog_broker_factory, tmp_path, monkeypatch
) -> None:
    in_order = []  # the appends of a batch next in order, which take the log's one call
    record = ProducerStateManager.on_in_order_append

    def counted(state: ProducerStateManager, *args: Any) -> None:
        in_order.append(args[1])
        record(state, *args)

    monkeypatch.setattr(ProducerStateManager, "on_in_order_append", counted)
    broker = seglog_broker_factory(str(tmp_path / "data"), config={"num.partitions": 1})
    cuts = cut_connections_after_every(broker, 7)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            **PRODUCER,
            "enable.idempotence": True,
            "linger.ms": 1,
            "batch.num.messages": 50,
            "reconnect.backoff.ms": 10,
        }
    )
    count = 3000
    for i in range(count):
        producer.produce("events", b"%d" % i)
        if i % 100 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert cuts[0] >= 14  # the stream was cut at least twice
    assert len(in_order) > 10  # (the retries after a cut are the general path's, which finds them duplicates)
    broker.stop()
    with seglog.open(str(tmp_path / "data"), background=False) as logs:
        values = [r.value for r in logs.partition("events", 0).records(0)]
    assert values == [b"%d" % i for i in range(count)]  # no duplicate, no gap, in order


def produce(client: BlockingConnection, batch: bytes) -> tuple[int, int]:
    """(error code, base offset) of an acks=all produce of one batch to events-0."""
    body = ProduceRequestData(
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequestData.TopicProduceData(
                name="events", partition_data=[ProduceRequestData.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    part = client.request(ApiKey.PRODUCE, body).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def idempotent_batch(pid: int, epoch: int, sequence: int, n: int) -> bytes:
    return bytes(
        build_batch(
            [(None, b"s%d" % (sequence + i)) for i in range(n)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=sequence,
        )
    )


def test_sequence_state_survives_sigkill(tmp_path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data, "num.partitions=1") as broker:
        with connect(broker.bootstrap_servers) as client:
            init = client.request(
                ApiKey.INIT_PRODUCER_ID, InitProducerIdRequestData(transactional_id=None, transaction_timeout_ms=-1)
            )
            assert init.error_code == 0
            pid, epoch = init.producer_id, init.producer_epoch
            client.request(
                ApiKey.METADATA,
                MetadataRequestData(
                    topics=[MetadataRequestData.MetadataRequestTopic(name="events")], allow_auto_topic_creation=True
                ),
            )
            assert produce(client, idempotent_batch(pid, epoch, 0, 3)) == (0, 0)
            second = idempotent_batch(pid, epoch, 3, 2)
            assert produce(client, second) == (0, 3)
            assert produce(client, second) == (0, 3)  # a retry: acknowledged, not appended
        broker.kill()
    with BrokerProcess(data) as broker, connect(broker.bootstrap_servers) as client:
        assert produce(client, second) == (0, 3)  # the state came back from the log
        again = client.request(
            ApiKey.INIT_PRODUCER_ID, InitProducerIdRequestData(transactional_id=None, transaction_timeout_ms=-1)
        )
        assert again.producer_id > pid  # a new block of ids: none is handed out twice
        assert produce(client, idempotent_batch(pid, epoch, 9, 1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(client, idempotent_batch(pid, epoch, 5, 1)) == (0, 5)
        code, err = broker.terminate()
        assert code == 0, err
    with seglog.open(str(data), background=False) as logs:
        values = [r.value for r in logs.partition("events", 0).records(0)]
    assert values == [b"s0", b"s1", b"s2", b"s3", b"s4", b"s5"]


def test_write_txn_markers_ends_a_transaction_written_by_another_coordinator(seglog_broker_factory, tmp_path) -> None:
    broker = seglog_broker_factory(str(tmp_path / "data"), config={"num.partitions": 1})
    with connect(broker.bootstrap_servers) as client:
        init = client.request(
            ApiKey.INIT_PRODUCER_ID, InitProducerIdRequestData(transactional_id=None, transaction_timeout_ms=-1)
        )
        pid, epoch = init.producer_id, init.producer_epoch
        client.request(
            ApiKey.METADATA,
            MetadataRequestData(
                topics=[MetadataRequestData.MetadataRequestTopic(name="events")], allow_auto_topic_creation=True
            ),
        )
        batch = build_batch([(None, b"t")], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        assert produce(client, bytes(batch)) == (0, 0)
        assert latest(client, read_committed=True) == 0  # the transaction holds the last stable offset back
        marker = WriteTxnMarkersRequestData.WritableTxnMarker(
            producer_id=pid,
            producer_epoch=epoch,
            transaction_result=False,
            topics=[WriteTxnMarkersRequestData.WritableTxnMarkerTopic(name="events", partition_indexes=[0])],
            coordinator_epoch=3,
        )
        answer = client.request(ApiKey.WRITE_TXN_MARKERS, WriteTxnMarkersRequestData(markers=[marker]))
        assert answer.markers[0].topics[0].partitions == [
            WriteTxnMarkersResponseData.WritableTxnMarkerPartitionResult(partition_index=0, error_code=0)
        ]
        assert latest(client, read_committed=True) == latest(client, read_committed=False) == 2
    broker.stop()
    with seglog.open(str(tmp_path / "data"), background=False) as logs:
        plog = logs.partition("events", 0)
        aborted = plog.collect_aborted_transactions(0, plog.log_end_offset)
        assert [(t.producer_id, t.first_offset) for t in aborted] == [(pid, 0)]


def latest(client: BlockingConnection, *, read_committed: bool) -> int:
    partitions = [ListOffsetsRequestData.ListOffsetsPartition(partition_index=0, timestamp=-1, current_leader_epoch=-1)]
    body = ListOffsetsRequestData(
        replica_id=-1,
        isolation_level=int(read_committed),
        topics=[ListOffsetsRequestData.ListOffsetsTopic(name="events", partitions=partitions)],
    )
    return int(client.request(ApiKey.LIST_OFFSETS, body).topics[0].partitions[0].offset)
