"""Writing DataFrames to topics through the brokers, as Spark's Kafka sink writes them:

    df.write.format("seglog").option("kafka.bootstrap.servers", "host:9092").option("topic", "events").save()
    df.writeStream.format("seglog").option("kafka.bootstrap.servers", ...).option("checkpointLocation", ...)

The columns and the ``topic`` and ``useTimestampColumn`` options are the log-dir sink's (``sink.py``):
Spark's Kafka sink's. Each task encodes its Arrow batches into record batches in C (``sink.Encoder``,
Kafka's default partitioner over the topic's partition count) and sends them with its own idempotent
producer (``client.Producer``): acks=all unless ``kafka.acks`` says otherwise, and the other
``kafka.*`` producer options (``linger.ms``, ``compression.type``, ``max.request.size``,
``request.timeout.ms``, ``delivery.timeout.ms``, ``retries``, ``enable.idempotence``, ``client.id``,
``max.block.ms``) passed to it. Batches are filled to ``kafka.batch.size``, or 512 KiB when it is
not given (one batch of a partition goes in a Produce request: small batches make many round
trips), never past ``kafka.max.request.size``.

At-least-once, as Spark's Kafka sink: a task's records are in the topic as soon as the leaders
acknowledge them, so a task run again (a retried or speculative attempt, a micro-batch run again
after a restart from its checkpoint) writes its rows again. Within a task nothing is written twice:
a request retried after a leader moved or died carries the same producer id, epoch and sequence,
and the leader keeps one copy. The driver has nothing to commit, and an aborted write leaves what
its tasks wrote, as Spark's does.

Before any task runs, the driver checks what it can: the bootstrap servers answer, and the topic
of the ``topic`` option exists or is created by the broker (Metadata that allows it, as a producer
asks). A topic named only in the ``topic`` column is looked up by the tasks the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..client import ClusterClient, Producer, ProducerConfig
from ..client.producer import partition_count
from ..common import TopicPartition
from ..errors import BrokerNotAvailableError, InvalidConfigurationError
from . import options as opt
from .sink import Encoder, check_columns

_BATCH_BYTES = 512 * 1024  # without kafka.batch.size: half of a topic's default max.message.bytes


@dataclass
class ProducedWrite(WriterCommitMessage):
    rows: int  # the rows the task was given
    records: int  # the records the leaders acknowledged


class BrokerSink:
    """Driver-side checks and the tasks' writing, shared by the batch and the streaming writers
    (the exactly-once one, ``eos_sink.py``, too)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.topic, self.use_timestamps = check_columns(options, schema)
        client = opt.client_options(options)
        assert client is not None  # the data source sends a write here only with kafka.bootstrap.servers
        self.bootstrap = client.bootstrap_servers
        self.client = client  # picklable: each task makes its connections (TLS, SASL) where it runs
        encoding = opt.producer_options(options, to_brokers=True)
        self.compression = encoding.compression
        self.config = _producer_config(options)
        asked = encoding.batch_size
        self.batch_bytes = max(1, min(_BATCH_BYTES if asked is None else asked, self.config.max_request_size))
        self._check_cluster()

    def _check_cluster(self) -> None:
        """Fail before any task runs when the brokers cannot be reached or the topic option's topic
        is not there (and the broker does not create it)."""
        try:
            with self.connect() as client:
                if self.topic is not None:
                    partition_count(client, self.topic, self.config.max_block_ms)
        except BrokerNotAvailableError as e:
            raise BrokerNotAvailableError(
                f"option kafka.bootstrap.servers: no broker of {self.bootstrap!r} answers ({e.message})"
            ) from None

    def connect(self, answer_margin: float = 0.0) -> ClusterClient:
        """A client of the brokers, with the options' security (kafka.security.protocol, ...)."""
        timeout = self.config.request_timeout_ms / 1000
        return ClusterClient(
            self.bootstrap, timeout, answer_margin, client_id=self.config.client_id, security=self.client.security()
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedWrite:
        with self.connect() as client, Producer(client, self.config) as producer:
            return self.produce(iterator, producer)

    def produce(self, iterator: Iterator[pa.RecordBatch], producer: Producer) -> ProducedWrite:
        """A task's rows encoded and sent with ``producer``, flushed."""
        rows = 0
        encoder = Encoder(
            self.topic,
            lambda topic: list(range(producer.partition_count(topic))),
            lambda topic: self.batch_bytes,
            self.compression,
            use_timestamps=self.use_timestamps,
            max_record_bytes=self.config.max_request_size,
        )
        for batch in iterator:
            rows += batch.num_rows
            for topic, partition, batches in encoder.encode(batch):
                producer.send_batches(TopicPartition(topic, partition), batches)
        delivered = producer.flush()
        return ProducedWrite(rows, sum(d.record_count for d in delivered))


def _producer_config(options: dict[str, str]) -> ProducerConfig:
    """The producer's config from the ``kafka.*`` options (Kafka's names after the prefix)."""
    given: dict[str, Any] = {k[len("kafka.") :]: v for k, v in options.items() if k.lower().startswith("kafka.")}
    given.setdefault("client.id", "seglog-spark-producer")
    try:
        return ProducerConfig.from_kafka(given)
    except InvalidConfigurationError as e:
        raise opt.OptionError(f"option kafka.{e.message}") from None


class BrokerWriter(BrokerSink, DataSourceArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: the tasks' records are in the topics already."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: what the tasks wrote stays, as with Spark's Kafka sink."""


class BrokerStreamWriter(BrokerSink, DataSourceStreamArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: the micro-batch's records are in the topics already."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: what the tasks wrote stays (at-least-once)."""
