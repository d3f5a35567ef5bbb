"""The ``seglog`` data source: Spark's Kafka source, reading log dirs directly or through brokers.

    spark.read.format("seglog").option("path", LOG_DIR).option("subscribe", "events").load()
    spark.read.format("seglog").option("kafka.bootstrap.servers", "host:9092").option("subscribe", "events").load()

Planning happens on the driver over a read-only view of the dirs, or over the brokers'
Metadata and ListOffsets (``consumer.py``); each Spark task opens only its partition's
directory, read-only, or fetches its range from the partition's leader, and turns the batches
of its offset range into Arrow record batches (``arrow.py``). Given both, the brokers plan and
a task beside a replica's dir in ``path`` reads that replica's files, below the high watermark
planned (``_replica_share``). Options and their meaning follow Spark's Kafka source
(``options.py``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ..common import TopicPartition
from ..config import LogConfig
from ..errors import UnknownTopicOrPartitionError
from ..storage import PartitionLog, retry_while_vanishing
from ..storage.isolation import committed_batches
from ..storage.manager import META_PROPERTIES, read_meta_properties
from . import options as opt
from .arrow import ArrowAssembler, spark_schema_ddl
from .consumer import BrokerLogs, BrokerPartition, FetchPartition, read_fetched
from .offsets import (
    DataLossError,
    Logs,
    OffsetRange,
    Offsets,
    PartitionOffsets,
    PartitionsGoneError,
    check_data_loss,
    from_json,
    read_logs,
    readable_end,
    resolve,
    split,
    to_json,
    topic_partitions,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class SeglogPartition(InputPartition):
    """One Spark task's share: an offset range of one partition directory."""

    topic: str
    partition: int
    dir: str
    start: int
    end: int
    log_start_offset: int
    fail_on_data_loss: bool
    include_headers: bool
    config: LogConfig  # the topic's: its index sizes decide whether the index files are whole
    # read_committed: the aborted transactions of the range, as (producer id, first offset)
    aborted: tuple[tuple[int, int], ...] | None = None
    min_timestamp_us: int | None = None  # inclusive bounds of pushed timestamp filters
    max_timestamp_us: int | None = None

    def __post_init__(self) -> None:
        self.value = (self.topic, self.partition, self.start, self.end)


_REOPENS = 10  # how many times a task looks again at a log whose segments go while it reads


def read_partition(part: SeglogPartition) -> Iterator[pa.RecordBatch]:
    """What a task does: open the partition read-only and stream its range as Arrow.

    The writer's retention or cleaner may delete segments while the task reads: their
    files are opened on first use, so a segment listed at the open can be gone when the
    read reaches it. The task then opens the log again and goes on from the next offset
    it has not yielded; what went is data loss, which failOnDataLoss decides.
    """
    start, end = part.start, part.end
    assembler = ArrowAssembler(part.topic, part.partition, part.include_headers)
    for attempt in retry_while_vanishing(_REOPENS + 1):
        pl = PartitionLog(
            part.dir, part.topic, part.partition, part.config, read_only=True, log_start_offset=part.log_start_offset
        )
        try:
            with attempt:  # a vanished file only: another error is raised
                start = check_data_loss(pl, start, part.fail_on_data_loss)
                if pl.log_end_offset < end:
                    # the log lost its tail (truncated, or its segments deleted) since planning
                    end = _lost_tail(pl, end, part.fail_on_data_loss)
                    start = min(start, end)  # cut below the task's start: nothing of its range is left
                batches = pl.batches(start, end)
                if part.aborted is not None:
                    batches = committed_batches(batches, part.aborted)
                for batch in assembler.record_batches(batches, start, end):
                    if batch.num_rows:
                        start = batch.column("offset")[-1].as_py() + 1
                    yield _filter_timestamps(batch, part.min_timestamp_us, part.max_timestamp_us)
                return
            gone = attempt.error.file if attempt.error is not None else None
            log.info("%s: %s went while it was read; reading on from offset %d", pl.name, gone, start)
        finally:
            pl.close()


def read_task(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """A task's rows: from its log dir, from a replica's files beside it, or fetched from its
    partition's leader."""
    if isinstance(partition, SeglogPartition):
        return read_partition(partition)
    if isinstance(partition, FetchPartition):
        local = _replica_share(partition) if partition.local_dirs else None
        if local is not None:
            return read_partition(local)
        low, high = partition.min_timestamp_us, partition.max_timestamp_us
        return (_filter_timestamps(batch, low, high) for batch in read_fetched(partition))
    return iter(())  # Spark asks for one partition even when the plan has none


def _replica_share(part: FetchPartition) -> SeglogPartition | None:
    """The task's range as a read of the partition's files in the dirs of ``path`` (a replica's,
    leader or follower), when they hold all of it; None to fetch it from the leader.

    The range ends at or below the high watermark (or the last stable offset) its leader reported
    at planning, and the files of a replica in the ISR at planning match the leader's below that
    high watermark: records above it, which a failover may truncate away, lie past the range and
    are never read. A replica out of the ISR is not read: it may still hold records of an earlier
    leader's that the current one does not have, not yet truncated. The files must
    reach that high watermark, not just the range's end: then they hold every transaction marker
    a read_committed range needs (a transaction that began below the last stable offset ended
    below the high watermark), and a follower that is still behind (or was cut off before a
    failover) is not read at all. Files that lack the start (retention, DeleteRecords on the
    replica) are not read either: the leader says what is lost."""

    def share(logs: Logs) -> SeglogPartition | None:
        try:
            pl = logs.partition(part.topic, part.partition)
        except UnknownTopicOrPartitionError:
            return None
        assert isinstance(pl, PartitionLog)  # the dirs' view
        replica = _broker_id(os.path.dirname(pl.dir))
        if replica not in part.in_sync_replicas:
            log.info("%s: the files in %s are broker %s's, not in the ISR %s: fetching", pl.name, pl.dir, replica,
                     list(part.in_sync_replicas))  # fmt: skip
            return None
        if pl.log_start_offset > part.start or pl.log_end_offset < max(part.end, part.high_watermark):
            log.info(
                "%s: the files in %s hold offsets %d..%d, not %d..%d below the high watermark %d: fetching",
                pl.name, pl.dir, pl.log_start_offset, pl.log_end_offset - 1, part.start, part.end - 1,
                part.high_watermark,
            )  # fmt: skip
            return None
        aborted = None
        if part.isolation == opt.READ_COMMITTED:
            txns = pl.collect_aborted_transactions(part.start, part.end)
            aborted = tuple((t.producer_id, t.first_offset) for t in txns)
        return SeglogPartition(
            part.topic,
            part.partition,
            pl.dir,
            part.start,
            part.end,
            pl.log_start_offset,
            part.fail_on_data_loss,
            part.include_headers,
            pl.config,
            aborted,
            part.min_timestamp_us,
            part.max_timestamp_us,
        )

    here = [d for d in part.local_dirs if os.path.isdir(d)]  # a task on another machine has none
    return read_logs(here, share) if here else None


def _lost_tail(pl: PartitionLog, end: int, fail: bool) -> int:
    message = (
        f"offsets {pl.log_end_offset}..{end - 1} of {pl.name} were in the log when the query was planned "
        "and are gone now (the log was truncated)"
    )
    if fail:
        raise DataLossError(
            message + "; set failOnDataLoss=false to skip them",
            log_start_offset=pl.log_start_offset,
            log_end_offset=pl.log_end_offset,
            file=pl.dir,
        )
    log.warning("%s; skipping them (failOnDataLoss=false)", message)
    return pl.log_end_offset


def _broker_id(log_dir: str) -> int | None:
    """The broker a log dir belongs to, as its meta.properties names it (None: none does)."""
    props = read_meta_properties(os.path.join(log_dir, META_PROPERTIES))
    found = props.get("broker.id", props.get("node.id"))
    return None if found is None else int(found)


def _filter_timestamps(batch: pa.RecordBatch, low: int | None, high: int | None) -> pa.RecordBatch:
    if low is None and high is None:
        return batch
    column = batch.column("timestamp").cast(pa.int64())
    mask = None
    if low is not None:
        mask = pc.greater_equal(column, low)
    if high is not None:
        upper = pc.less_equal(column, high)
        mask = upper if mask is None else pc.and_(mask, upper)
    return batch.filter(mask)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _micros(value: Any) -> int:
    # PySpark hands a timestamp filter's value over as an aware datetime (UTC); a naive one
    # would need the session's time zone, which the source does not know: not accepted
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    raise TypeError(f"not an aware timestamp: {value!r}")


def _whole(value: Any) -> int:
    # Spark rewrites `offset < 5.5` to `offset < 6`; anything but an int (a float, a bool, a
    # Decimal) is not accepted rather than rounded into a wrong bound
    if type(value) is int:
        return value
    raise TypeError(f"not an integer: {value!r}")


# --- the data source -------------------------------------------------------------------------


class SeglogDataSource(DataSource):
    """``format("seglog")``: read and write seglog (and Kafka) log dirs."""

    @classmethod
    def name(cls) -> str:
        return "seglog"

    def schema(self) -> str:
        # Spark asks for the schema at load(): the options are checked there, as Spark's
        # Kafka source does, and not first when a streaming query starts
        opt.validate_source(self.options)
        return spark_schema_ddl(opt.parse_bool(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        # Spark refuses a reader that implements pushFilters when Python filter pushdown
        # (spark.sql.python.filterPushdown.enabled) is off, and does not tell the source
        # which it is: the worker that calls us does. Only the pushdown worker gets the
        # reader that takes filters.
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.endswith("data_source_pushdown_filters"):
            return SeglogFilteringReader(dict(self.options))
        return SeglogBatchReader(dict(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SeglogStreamReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from .sink import batch_writer

        opt.reject_save_mode(overwrite)
        return batch_writer(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from .sink import stream_writer

        return stream_writer(dict(self.options), schema)


@dataclass
class _Common:
    """What batch and stream readers share: the parsed options."""

    dirs: list[str]  # the log dirs of ``path``: read, or with brokers read where they hold a task's range
    client: opt.ClientOptions | None  # the brokers of ``kafka.bootstrap.servers``
    subscription: opt.Subscription
    include_headers: bool
    fail_on_data_loss: bool
    min_partitions: int | None
    isolation: str

    @classmethod
    def parse(cls, options: dict[str, str]) -> _Common:
        client = opt.client_options(options)
        return cls(
            dirs=opt.log_dirs(options) if client is None or opt.has_path(options) else [],
            client=client,
            subscription=opt.subscription(options),
            include_headers=opt.parse_bool(options, "includeHeaders", False),
            fail_on_data_loss=opt.parse_bool(options, "failOnDataLoss", True),
            min_partitions=opt.parse_int(options, "minPartitions", None, minimum=1),
            isolation=opt.isolation_level(options),
        )

    def latest(self, pl: PartitionOffsets) -> int:
        """Where the partition's readable records end: the high watermark, or the LSO."""
        return readable_end(pl, self.isolation)

    def ask(self, question: Callable[[Logs], T]) -> T:
        """``question`` asked of the log dirs, or of the brokers."""
        if self.client is not None:
            with BrokerLogs(self.client, self.isolation) as brokers:
                return question(brokers)
        return read_logs(self.dirs, question)

    def plan(self, logs: Logs, ranges: Sequence[OffsetRange], filters: _Filters | None = None) -> list[InputPartition]:
        """One task per range, ranges split evenly up to minPartitions tasks."""
        live = [r for r in ranges if r.end > r.start]
        wanted = self.min_partitions or 0
        total = sum(r.size for r in live) or 1
        out: list[InputPartition] = []
        for r in live:
            pieces = max(1, round(wanted * r.size / total)) if wanted > len(live) else 1
            pl = logs.partition(r.topic, r.partition)
            for start, end in split(r.start, r.end, pieces):
                if self.client is not None:
                    out.append(self._fetch_task(pl, r, start, end, filters))
                    continue
                assert isinstance(pl, PartitionLog)  # the dirs' view
                aborted = None
                if self.isolation == opt.READ_COMMITTED:
                    # the .txnindex of the range's segments, and the markers the log's producer
                    # state replayed since its owner's last snapshot (collect_aborted_transactions)
                    txns = pl.collect_aborted_transactions(start, end)
                    aborted = tuple((t.producer_id, t.first_offset) for t in txns)
                out.append(
                    SeglogPartition(
                        r.topic,
                        r.partition,
                        pl.dir,
                        start,
                        end,
                        pl.log_start_offset,
                        self.fail_on_data_loss,
                        self.include_headers,
                        pl.config,
                        aborted,
                        None if filters is None else filters.min_timestamp_us,
                        None if filters is None else filters.max_timestamp_us,
                    )
                )
        return out

    def _fetch_task(
        self, pl: PartitionOffsets, r: OffsetRange, start: int, end: int, filters: _Filters | None
    ) -> FetchPartition:
        assert self.client is not None
        return FetchPartition(
            self.client,
            r.topic,
            r.partition,
            start,
            end,
            self.fail_on_data_loss,
            self.include_headers,
            self.isolation,
            None if filters is None else filters.min_timestamp_us,
            None if filters is None else filters.max_timestamp_us,
            tuple(self.dirs),
            pl.high_watermark,
            pl.logs.in_sync_replicas.get(pl.tp, ()) if isinstance(pl, BrokerPartition) else (),
        )


@dataclass
class _Filters:
    """Pushed filters on partition, offset and timestamp, applied exactly."""

    partitions: set[int] | None = None
    min_offset: int = 0
    max_offset: int = (1 << 63) - 1  # inclusive
    min_timestamp_us: int | None = None
    max_timestamp_us: int | None = None
    accepted: list[Filter] = field(default_factory=list)

    def accept(self, f: Filter) -> bool:
        column = f.attribute if hasattr(f, "attribute") else ()
        if column == ("partition",):
            return self._partition(f)
        if column == ("offset",):
            return self._bound(f, "offset", _whole)
        if column == ("timestamp",):
            return self._bound(f, "timestamp", _micros)
        return False

    def _partition(self, f: Filter) -> bool:
        if isinstance(f, EqualTo) and type(f.value) is int:
            values = {f.value}
        elif isinstance(f, In) and all(type(v) is int for v in f.value):
            values = set(f.value)
        else:
            return False  # a range on partition is left to Spark
        self.partitions = values if self.partitions is None else self.partitions & values
        return True

    def _bound(self, f: Filter, column: str, convert: Any) -> bool:
        kinds = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
        if not isinstance(f, kinds):
            return False
        try:
            value = convert(f.value)
        except (TypeError, ValueError):
            return False
        low = value + 1 if isinstance(f, GreaterThan) else value
        high = value - 1 if isinstance(f, LessThan) else value
        if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
            high = None
        if isinstance(f, (LessThan, LessThanOrEqual)):
            low = None
        if column == "offset":
            self.min_offset = max(self.min_offset, low) if low is not None else self.min_offset
            self.max_offset = min(self.max_offset, high) if high is not None else self.max_offset
        else:
            if low is not None:
                self.min_timestamp_us = low if self.min_timestamp_us is None else max(self.min_timestamp_us, low)
            if high is not None:
                self.max_timestamp_us = high if self.max_timestamp_us is None else min(self.max_timestamp_us, high)
        return True

    def keep(self, tp: TopicPartition) -> bool:
        return self.partitions is None or tp[1] in self.partitions

    def narrow(self, pl: PartitionOffsets, start: int, end: int) -> tuple[int, int]:
        start, end = max(start, self.min_offset), min(end, self.max_offset + 1)
        if self.min_timestamp_us is not None:
            # every record before this offset is older than the bound: skip them
            found = pl.offset_for_timestamp(-(-self.min_timestamp_us // 1000))
            start = max(start, found[0]) if found is not None else end
        return start, max(start, end)


class SeglogBatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        opt.reject_streaming_only(options)
        self.common = _Common.parse(options)
        self.starting = opt.starting_spec(options, streaming=False)
        self.ending = opt.ending_spec(options)
        self.strategy = opt.by_timestamp_strategy(options)
        self.filters = _Filters()
        self._plan()  # fail at load() on bad options or unknown topics, as Spark's Kafka source does

    def _plan(self) -> list[InputPartition]:
        return self.common.ask(self._plan_over)

    def _plan_over(self, logs: Logs) -> list[InputPartition]:
        tps = [tp for tp in topic_partitions(logs, self.common.subscription) if self.filters.keep(tp)]
        latest = self.common.latest
        starts = resolve(logs, self.starting, tps, starting=True, strategy=self.strategy, latest=latest)
        ends = resolve(logs, self.ending, tps, starting=False, latest=latest)
        ranges = []
        for tp in tps:
            pl = logs.partition(*tp)
            _check_end(pl, ends[tp], latest(pl), self.common.isolation)
            start = check_data_loss(pl, starts[tp], self.common.fail_on_data_loss)
            if start > ends[tp]:
                raise opt.OptionError(
                    f"starting offset {start} of {tp[0]}-{tp[1]} is after its ending offset {ends[tp]}"
                )
            start, end = self.filters.narrow(pl, start, ends[tp])
            ranges.append(OffsetRange(tp[0], tp[1], start, end))
        return self.common.plan(logs, ranges, self.filters)

    def partitions(self) -> Sequence[InputPartition]:
        return self._plan()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_task(partition)


class SeglogFilteringReader(SeglogBatchReader):
    """The batch reader with filter pushdown on partition, offset and timestamp: partitions
    and offset bounds prune ranges, a timestamp lower bound skips what the time index
    shows is older, and timestamp bounds are applied to every row, since Spark does not
    check a filter a source accepted."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if self.filters.accept(f):
                self.filters.accepted.append(f)
            else:
                yield f


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the partitions' growing logs, with Spark's read limits."""

    def __init__(self, options: dict[str, str]) -> None:
        opt.reject_batch_only(options)
        self.common = _Common.parse(options)
        self.starting = opt.starting_spec(options, streaming=True)
        self.strategy = opt.by_timestamp_strategy(options)
        self.max_offsets = opt.parse_int(options, "maxOffsetsPerTrigger", None, minimum=1)
        self.min_offsets = opt.parse_int(options, "minOffsetsPerTrigger", None, minimum=1)
        self.max_trigger_delay_ms = opt.parse_duration_ms(options, "maxTriggerDelay", 15 * 60_000)
        self._available_now: Offsets | None = None
        # as Spark's Kafka source: the first trigger never waits for minOffsetsPerTrigger
        self._last_trigger: float | None = None
        self.clock: Callable[[], float] = time.monotonic  # seconds; maxTriggerDelay counts on it

    # offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        def initial(logs: Logs) -> Offsets:
            tps = topic_partitions(logs, self.common.subscription)
            return resolve(logs, self.starting, tps, starting=True, strategy=self.strategy, latest=self.common.latest)

        return to_json(self.common.ask(initial))

    def _latest(self, logs: Logs) -> Offsets:
        subscribed = topic_partitions(logs, self.common.subscription)
        return {tp: self.common.latest(logs.partition(*tp)) for tp in subscribed}

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self.common.ask(self._latest)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.min_offsets is not None:
            return ReadMinRows(self.min_offsets)
        if self.max_offsets is not None:
            return ReadMaxRows(self.max_offsets)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        def offsets(logs: Logs) -> tuple[Offsets, Offsets]:
            begin = self._drop_deleted(logs, from_json(start))
            latest = self._available_now if self._available_now is not None else self._latest(logs)
            latest = {tp: offset for tp, offset in latest.items() if _exists(logs, tp)}
            for tp in latest:
                # a partition that appeared since the start is read from its beginning
                begin.setdefault(tp, logs.partition(*tp).log_start_offset)
            if not self.common.fail_on_data_loss:
                # offsets removed before they were read are skipped, not counted against the
                # read limits: a rate-limited query would otherwise walk through the gap
                for tp in latest:
                    begin[tp] = max(begin[tp], logs.partition(*tp).log_start_offset)
            return begin, latest

        begin, latest = self.common.ask(offsets)
        end = {tp: max(latest.get(tp, offset), offset) for tp, offset in begin.items()}
        if isinstance(limit, ReadAllAvailable):
            return to_json(end)
        backlog = sum(end[tp] - begin[tp] for tp in end)
        # availableNow reads what there is and stops when a trigger finds nothing new, so
        # waiting for more there would end the query with the backlog unread
        if self.min_offsets is not None and backlog < self.min_offsets and self._available_now is None:
            waited_ms = None if self._last_trigger is None else (self.clock() - self._last_trigger) * 1000
            if waited_ms is not None and waited_ms < self.max_trigger_delay_ms:
                return to_json(begin)
        if self.max_offsets is not None and backlog > self.max_offsets:
            end = _rate_limit(begin, end, self.max_offsets)
        self._last_trigger = self.clock()
        return to_json(end)

    def _drop_deleted(self, logs: Logs, offsets: Offsets) -> Offsets:
        """Partitions of the last offsets whose topic was deleted since are data loss, as in
        Spark's Kafka source: an error with failOnDataLoss, else a warning, and they go."""
        gone = sorted(tp for tp in offsets if not _exists(logs, tp))
        if gone:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            message = f"partitions {names} are gone (their topic was deleted); some data may have been missed"
            if self.common.fail_on_data_loss:
                raise PartitionsGoneError(message + "; set failOnDataLoss=false to go on without them")
            log.warning("%s; going on without them (failOnDataLoss=false)", message)
        return {tp: offset for tp, offset in offsets.items() if tp not in gone}

    def reportLatestOffset(self) -> dict | None:
        return to_json(self.common.ask(self._latest))

    # planning and reading -------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = from_json(start), from_json(end)

        def plan(logs: Logs) -> list[InputPartition]:
            ranges = []
            for tp, stop in sorted(self._drop_deleted(logs, finish).items()):
                pl = logs.partition(*tp)
                first = begin.get(tp, pl.log_start_offset)
                ranges.append(OffsetRange(tp[0], tp[1], first, stop))
            return self.common.plan(logs, ranges)

        return self.common.ask(plan)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_task(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: the source keeps no state per micro-batch."""


def _exists(logs: Logs, tp: TopicPartition) -> bool:
    try:
        logs.partition(*tp)
    except UnknownTopicOrPartitionError:
        return False
    return True


def _check_end(pl: PartitionOffsets, end: int, readable: int, isolation: str) -> None:
    """An ending offset past what can be read names offsets that were never written (or,
    with read_committed, not yet committed): a mistake in the query, said as such."""
    if end <= readable:
        return
    gap = f"offsets {readable}..{end - 1}"
    if isolation == opt.READ_COMMITTED:
        why = f"its last stable offset is {readable}: {gap} are not committed yet, or were never written"
    else:
        why = f"its log ends at offset {readable} (its high watermark): {gap} have not been written"
    raise opt.OptionError(f"endingOffsets asks for {pl.name} up to offset {end}, but {why}")


def _rate_limit(begin: Offsets, end: Offsets, limit: int) -> Offsets:
    """Spread ``limit`` offsets over the partitions in proportion to their backlogs,
    as Spark's Kafka source does."""
    backlog = {tp: end[tp] - begin[tp] for tp in end}
    total = sum(backlog.values())
    out = {}
    for tp, size in backlog.items():
        share = int(limit * size / total) if total else 0
        out[tp] = begin[tp] + min(size, share)
    spare = limit - sum(out[tp] - begin[tp] for tp in out)
    for tp in sorted(out, key=lambda t: end[t] - out[t], reverse=True):
        if spare <= 0:
            break
        more = min(spare, end[tp] - out[tp])
        out[tp] += more
        spare -= more
    return out
