"""The exactly-once streaming sink through the brokers: ``.option("exactlyOnce", "true")`` on

    df.writeStream.format("seglog").option("kafka.bootstrap.servers", ...).option("checkpointLocation", ...)

Each micro-batch's records become visible to read_committed consumers once, whatever dies when:
the two phases of docs/architecture.md's "Exactly-once Spark sink", whose client side is
``client.transactions.BatchTransactions``. Each task writes inside a transaction of its own
transactional id (``P-<Spark partition>``) that it leaves open and hands to the driver in its
commit message; the driver decides the batch (its id and the tasks' producers committed to group
``P`` in one transaction) and then commits every task's transaction. ``P`` is the
``kafka.transactional.id`` option, else derived from the checkpoint location, so it is the same
after a restart. The transactions' timeout is ``kafka.transaction.timeout.ms``, 15 minutes unless
given (Kafka's broker allows no longer by default): a batch's commit must follow its first write
within it.

The writer object is pickled to the executors, so it holds options, never a client: each call opens
its own. A batch (non-streaming) write with the option is refused: it has no batch id to decide,
and Spark's batch writes are at-least-once as Kafka's connector's are.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..client import Producer
from ..client.producer import ProducerIdAndEpoch
from ..client.transactions import BatchTransactions, PreparedTxnState
from ..errors import SeglogError
from . import options as opt
from .broker_sink import BrokerSink, ProducedWrite

TRANSACTION_TIMEOUT_MS = 900_000  # Kafka's broker's transaction.max.timeout.ms: the longest it allows
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property Spark gives a micro-batch's tasks


def exactly_once(options: dict[str, str]) -> bool:
    return opt.parse_bool(options, "exactlyOnce", False)


def refuse_in_batch_writes(options: dict[str, str]) -> None:
    if exactly_once(options):
        raise opt.OptionError(
            "option exactlyOnce: only a streaming write (writeStream) is exactly-once; a batch write is "
            "at-least-once, as Spark's Kafka sink: leave the option out"
        )


@dataclass
class TransactionalWrite(ProducedWrite):
    """``records``: those written in the task's transaction (none when the batch was decided already)."""

    partition: int  # the task's Spark partition
    prepared: PreparedTxnState | None  # its open transaction, for the driver to end


class ExactlyOnceStreamWriter(BrokerSink, DataSourceStreamArrowWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        self.prefix = _prefix(options)
        self.transaction_timeout_ms = _timeout(options)
        with self._transactions() as batches:
            # before any task: fences a driver of an earlier run and aborts a decision it left open,
            # which would hold the tasks' reads of the decision (stable) until its timeout
            batches.start()

    @contextlib.contextmanager
    def _transactions(self) -> Iterator[BatchTransactions]:
        with self.connect(answer_margin=1.0) as client:
            yield BatchTransactions(client, self.prefix, self.transaction_timeout_ms)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TransactionalWrite:
        context = TaskContext.get()
        batch_id = None if context is None else context.getLocalProperty(BATCH_ID_PROPERTY)
        if context is None or batch_id is None:
            raise SeglogError("option exactlyOnce: a task without Spark's micro-batch id (not a streaming query?)")
        partition = context.partitionId()
        with self._transactions() as batches:
            txn = batches.open_task(int(batch_id), partition)
            if txn is None:  # a run before a restart decided this batch: its records are written
                return TransactionalWrite(sum(b.num_rows for b in iterator), 0, partition, None)
            try:
                producer_id = ProducerIdAndEpoch(txn.producer_id, txn.producer_epoch)
                with Producer(
                    batches.client,
                    self.config,
                    producer_id_and_epoch=producer_id,
                    transactional_id=txn.transactional_id,
                    before_first_write=txn.add_partitions,
                ) as producer:
                    written = self.produce(iterator, producer)
            except BaseException:
                with contextlib.suppress(SeglogError):  # else the next attempt's InitProducerId aborts it
                    txn.abort_transaction()
                raise
            prepared = txn.prepared if txn.transaction_started else None
            return TransactionalWrite(written.rows, written.records, partition, prepared)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """The batch decided and its tasks' transactions committed (``BatchTransactions.commit``)."""
        with self._transactions() as batches:
            batches.start()  # this call's own client: the driver's id initialised again (no decision is open)
            batches.commit(batchId, _prepared(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """The transactions the batch's tasks handed back, aborted."""
        with self._transactions() as batches:
            batches.abort(_prepared(messages).values())


def _prepared(messages: list[WriterCommitMessage | None]) -> dict[int, PreparedTxnState]:
    return {m.partition: m.prepared for m in messages if isinstance(m, TransactionalWrite) and m.prepared}


def _option(options: dict[str, str], name: str) -> str | None:
    return next((v for k, v in options.items() if k.lower() == name.lower()), None)


def _prefix(options: dict[str, str]) -> str:
    """The query's transactional id prefix: the same across restarts, unique among queries."""
    given = _option(options, "kafka.transactional.id")
    if given:
        return given
    checkpoint = _option(options, "checkpointLocation")
    if not checkpoint:
        raise opt.OptionError(
            "option exactlyOnce needs the query's checkpointLocation (or kafka.transactional.id) to name "
            "its transactions the same after a restart"
        )
    return "seglog-spark-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:24]


def _timeout(options: dict[str, str]) -> int:
    given = _option(options, "kafka.transaction.timeout.ms")
    if given is None:
        return TRANSACTION_TIMEOUT_MS
    try:
        value = int(given)
    except ValueError:
        value = 0
    if value <= 0:
        raise opt.OptionError(f"option kafka.transaction.timeout.ms must be a positive integer, not {given!r}")
    return value
