"""Reading through the brokers (``kafka.bootstrap.servers``): Spark's Kafka source without a JVM.

The driver plans over ``BrokerLogs``: topics and partitions from Metadata, offsets from the
partition leaders' ListOffsets (earliest, latest: the high watermark or under read_committed the
last stable offset, and by timestamp), the same questions ``offsets.py`` asks of a log dir. Each
task (``FetchPartition``) fetches its offset range from the partition's leader
(``seglog.client.ClusterClient``, which finds a moved leader again) and hands the fetched bytes,
batch by batch, to the column builder the file reader uses (``arrow.ArrowAssembler``): no Python
object per record, and Arrow batches that span fetches.

A task never reads above the high watermark (or the last stable offset under read_committed)
that the leader reports with each fetch, whatever its planned end: a range planned on one
leader's offsets and read after a failover stops where the new leader's committed data does.
Records a fetch returns below the task's start (its first batch may begin earlier) are skipped
by the builder. Offsets removed between planning and reading (retention, DeleteRecords) are data
loss, which ``failOnDataLoss`` decides as for a log dir.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from ..client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ClusterClient,
    FetchedPartition,
)
from ..common import TopicPartition
from ..errors import (
    BrokerNotAvailableError,
    CorruptRecordError,
    InvalidResponseError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from ..records import NO_TIMESTAMP, AnyBatch, BatchIterator
from ..storage.isolation import committed_batches
from . import options as opt
from .arrow import ArrowAssembler
from .offsets import DataLossError

log = logging.getLogger(__name__)

_WAIT_MS = 100  # how long a fetch waits at the leader for data below the range's end


def connect(client: opt.ClientOptions) -> ClusterClient:
    """A client of the brokers of ``kafka.bootstrap.servers``; when none of them answers as a Kafka
    broker, an error that names the option (the one error of a mistyped or unreachable address)."""
    try:
        return ClusterClient(
            client.bootstrap_servers,
            client.request_timeout_ms / 1000,
            client_id=client.client_id,
            security=client.security(),
        )
    except BrokerNotAvailableError as e:
        raise BrokerNotAvailableError(f"option kafka.bootstrap.servers={client.bootstrap_servers}: {e}") from e
    except InvalidResponseError as e:  # something answers there, not in Kafka's protocol
        raise InvalidResponseError(
            f"option kafka.bootstrap.servers={client.bootstrap_servers}: not a Kafka broker ({e})"
        ) from e


def _isolation(isolation: str) -> int:
    return READ_COMMITTED if isolation == opt.READ_COMMITTED else READ_UNCOMMITTED


class BrokerLogs:
    """The driver's ``offsets.Logs`` through the brokers, for one planning question: one Metadata,
    and each topic's offsets asked of its leaders once, for all its partitions together."""

    def __init__(self, client: opt.ClientOptions, isolation: str) -> None:
        self.client = connect(client)
        self.isolation = _isolation(isolation)
        try:
            answer = self.client.metadata(None)
        except BaseException:
            self.client.close()
            raise
        known = {t.name: t.partitions for t in answer.topics if t.name is not None and not t.error_code}
        self._partitions = {name: sorted(p.partition_index for p in ps) for name, ps in known.items()}
        self.in_sync_replicas = {
            TopicPartition(name, p.partition_index): tuple(p.isr_nodes) for name, ps in known.items() for p in ps
        }
        self._offsets: dict[TopicPartition, tuple[int, int, int]] = {}

    def topics(self) -> list[str]:
        # Kafka's internal topics are listed as a log dir lists them: a pattern leaves them out
        return sorted(self._partitions)

    def partitions(self, topic: str) -> list[int]:
        if topic not in self._partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        return self._partitions[topic]

    def partition(self, topic: str, partition: int) -> BrokerPartition:
        known = self._partitions.get(topic)
        if known is None or partition not in known:
            detail = f"topic {topic!r} has partitions {known}" if known else f"unknown topic {topic!r}"
            raise UnknownTopicOrPartitionError(f"no partition {topic}-{partition}: {detail}")
        return BrokerPartition(self, TopicPartition(topic, partition))

    def offsets(self, tp: TopicPartition) -> tuple[int, int, int]:
        """(log start offset, high watermark, last stable offset) of ``tp``, asked with its topic's."""
        if tp not in self._offsets:
            tps = [TopicPartition(tp.topic, p) for p in self._partitions[tp.topic]]
            first = self.client.list_offsets(dict.fromkeys(tps, EARLIEST_TIMESTAMP))
            high = self.client.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP))
            stable = high
            if self.isolation == READ_COMMITTED:
                stable = self.client.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP), READ_COMMITTED)
            for t in tps:
                ends = (high[t].offset, stable[t].offset)
                if high[t].timestamp != NO_TIMESTAMP:
                    ends = self._fetched_ends(t, high[t].offset)
                self._offsets[t] = (first[t].offset, *ends)
        return self._offsets[tp]

    def _fetched_ends(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        """(high watermark, last stable offset) as a Fetch at ``offset`` answers them. Kafka answers
        ListOffsets' latest with no timestamp (the end of a log is no record); a broker that gives
        one there answers something else (Tansu 0.6: offset 1 whatever the log holds), and what a
        Fetch answer says of the log's end is the protocol's other word on it. Asked with the least
        bytes and wait (Tansu leaves a Fetch of max_wait_ms 0 unanswered): at the true end the
        answer holds no records."""
        fetched = self.client.fetch(
            tp, offset, isolation_level=self.isolation, max_bytes=1, partition_max_bytes=1, max_wait_ms=1
        )
        stable = fetched.last_stable_offset if self.isolation == READ_COMMITTED else fetched.high_watermark
        return fetched.high_watermark, stable

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> BrokerLogs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class BrokerPartition:
    """One partition's ``offsets.PartitionOffsets``, as its leader lists them."""

    logs: BrokerLogs
    tp: TopicPartition

    @property
    def name(self) -> str:
        return str(self.tp)

    @property
    def dir(self) -> str | None:
        return None

    @property
    def log_start_offset(self) -> int:
        return self.logs.offsets(self.tp)[0]

    @property
    def high_watermark(self) -> int:
        return self.logs.offsets(self.tp)[1]

    @property
    def log_end_offset(self) -> int:
        return self.high_watermark  # all a consumer sees of the log

    @property
    def last_stable_offset(self) -> int:
        return self.logs.offsets(self.tp)[2]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        found = self.logs.client.list_offsets({self.tp: timestamp}, self.logs.isolation)[self.tp]
        return None if found.offset < 0 else (found.offset, found.timestamp)


@dataclass
class FetchPartition(InputPartition):
    """One Spark task's share through the brokers: an offset range of one partition."""

    client: opt.ClientOptions
    topic: str
    partition: int
    start: int
    end: int
    fail_on_data_loss: bool
    include_headers: bool
    isolation: str
    min_timestamp_us: int | None = None  # inclusive bounds of pushed timestamp filters
    max_timestamp_us: int | None = None
    local_dirs: tuple[str, ...] = ()  # ``path``'s log dirs, whose replica files may hold the range
    high_watermark: int = 0  # the leader's, at planning
    in_sync_replicas: tuple[int, ...] = ()  # the partition's ISR (broker ids), at planning

    def __post_init__(self) -> None:
        self.value = (self.topic, self.partition, self.start, self.end)


def read_fetched(part: FetchPartition) -> Iterator[pa.RecordBatch]:
    """What a task does: fetch [start, end) from the partition's leader, as Arrow."""
    assembler = ArrowAssembler(part.topic, part.partition, part.include_headers, check_crcs=True)
    with connect(part.client) as client, _FetchedBatches(client, part) as batches:
        while True:
            # from where the batches go on: after a skip of removed offsets, records of the
            # first batch fetched may lie below the new start (DeleteRecords cuts inside batches)
            start = batches.next_offset
            try:
                yield from assembler.record_batches(batches, start, part.end)
            except CorruptRecordError as e:
                # bytes damaged on the leader's disk or on the way: refused, never served as rows
                raise CorruptRecordError(
                    f"a batch of {batches.tp} fetched from its leader is corrupt, refused: {e.message}",
                    offset=batches.batch_offset if e.offset is None else e.offset,
                ) from e
            if not batches.skipped:
                return


class _FetchedBatches:
    """The batches of a task's range, fetch after fetch; read_committed drops the aborted ones
    (and every control batch) as Kafka's consumer does, with each fetch's aborted transactions.

    The next fetch is sent as soon as a fetch's answer is in, from where its last whole batch
    ends, so that the leader reads and sends it while this task builds Arrow from the last one
    (Kafka's consumer fetches ahead the same way). Fetches run on one thread of their own, one
    at a time: the client is not shared between threads."""

    def __init__(self, client: ClusterClient, part: FetchPartition) -> None:
        self.client = client
        self.part = part
        self.tp = TopicPartition(part.topic, part.partition)
        self.next_offset = part.start
        self.isolation = _isolation(part.isolation)
        self.log_start_offset = -1  # as the last fetch told it
        self.skipped = False  # the last iteration ended at a skip of removed offsets
        self.batch_offset = part.start  # the base offset of the batch yielded last
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"fetch-{self.tp}")
        self._ahead: tuple[int, Future[FetchedPartition]] | None = None  # a fetch sent ahead, and its offset

    def __enter__(self) -> _FetchedBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __iter__(self) -> Iterator[AnyBatch]:
        """The batches up to the range's end, or up to a skip of removed offsets (``skipped``)."""
        part = self.part
        self.skipped = False
        deadline = time.monotonic() + part.client.request_timeout_ms / 1000
        while self.next_offset < part.end:
            fetched = self._fetch()
            if fetched is None:
                return
            records, limit, aborted = fetched
            stop = min(part.end, limit)
            batches: Iterator[AnyBatch] = self._upto(records, stop)
            if self.isolation == READ_COMMITTED:
                batches = committed_batches(batches, aborted)
            before = self.next_offset
            yield from batches
            if self.next_offset > before:
                deadline = time.monotonic() + part.client.request_timeout_ms / 1000
            elif time.monotonic() > deadline:
                self._lost_tail(limit)
                return

    def _upto(self, records: bytes | memoryview, stop: int) -> Iterator[AnyBatch]:
        """The whole batches of one fetch below ``stop``; ``next_offset`` follows them."""
        for batch in BatchIterator(records):
            if batch.base_offset >= stop:
                return
            self.next_offset = max(self.next_offset, batch.last_offset + 1)
            self.batch_offset = batch.base_offset
            yield batch

    def _fetch(self) -> tuple[bytes | memoryview, int, tuple[tuple[int, int], ...]] | None:
        """The next fetch's bytes, where they may be read up to, and their aborted transactions;
        None, with failOnDataLoss=false, when the rest of the range is gone or offsets were
        removed (``skipped``: the iteration ends there, to go on from the log start)."""
        try:
            fetched = self._take(self.next_offset)
        except OffsetOutOfRangeError as e:
            self.log_start_offset = e.log_start_offset
            if self.next_offset >= e.log_start_offset:
                self._lost_tail(e.log_end_offset)
            else:
                self.next_offset = self._skip_removed(e.log_start_offset, e.log_end_offset)
                self.skipped = True
            return None
        self.log_start_offset = fetched.log_start_offset
        limit = fetched.last_stable_offset if self.isolation == READ_COMMITTED else fetched.high_watermark
        self._fetch_ahead(fetched.records, min(self.part.end, limit))
        return fetched.records, limit, fetched.aborted_transactions

    def _take(self, offset: int) -> FetchedPartition:
        """The fetch at ``offset``: the one sent ahead when it was at that offset."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            if ahead[0] == offset:
                return ahead[1].result()
            ahead[1].exception()  # waited for, unused: the client serves one fetch at a time
        return self._pool.submit(self._fetch_at, offset).result()

    def _fetch_ahead(self, records: bytes | memoryview, stop: int) -> None:
        last = None
        for batch in BatchIterator(records):
            last = batch.last_offset
        if last is not None and last + 1 < stop:
            self._ahead = (last + 1, self._pool.submit(self._fetch_at, last + 1))

    def _fetch_at(self, offset: int) -> FetchedPartition:
        part = self.part
        self.client.renew_deadline()  # a moved leader is looked for again for request.timeout.ms each time
        return self.client.fetch(
            self.tp,
            offset,
            isolation_level=self.isolation,
            max_bytes=part.client.fetch_max_bytes,
            partition_max_bytes=part.client.max_partition_fetch_bytes,
            max_wait_ms=_WAIT_MS,
        )

    def _skip_removed(self, first: int, end: int) -> int:
        message = (
            f"offsets {self.next_offset}..{first - 1} of {self.tp} were removed before they were read "
            "(retention or DeleteRecords)"
        )
        if self.part.fail_on_data_loss:
            raise DataLossError(
                message + "; set failOnDataLoss=false to skip them", log_start_offset=first, log_end_offset=end
            )
        log.warning("%s; skipping to offset %d (failOnDataLoss=false)", message, first)
        return min(first, self.part.end)

    def _lost_tail(self, limit: int) -> None:
        """The leader has nothing more below the range's end within the request timeout."""
        end = self.part.end
        message = (
            f"offsets {self.next_offset}..{end - 1} of {self.tp} were planned to be read, but its leader "
            f"serves records only up to offset {limit}"
        )
        if self.part.fail_on_data_loss:
            raise DataLossError(
                message + " (the log was truncated); set failOnDataLoss=false to skip them",
                log_start_offset=self.log_start_offset,
                log_end_offset=limit,
            )
        log.warning("%s; skipping them (failOnDataLoss=false)", message)
