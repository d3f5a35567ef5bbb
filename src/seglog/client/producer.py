"""Kafka's idempotent producer, on ``ClusterClient``: records in, record batches to the partitions'
leaders, each written once however often it is sent.

The producer asks a broker for a producer id and epoch (InitProducerId, no transactional id) and
stamps every batch with them and with its partition's next sequence number
(``RecordBatch.set_producer_state``) when the batch is first sent. The leader appends a batch only
when its sequence follows the last one it has of the producer; a batch it already holds is answered
with its offset again, or DUPLICATE_SEQUENCE_NUMBER once it is too old to be remembered: a success.
So a batch is sent again, unchanged, after anything that leaves its fate unknown: a leader that
moved or died, a connection lost before the answer, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), a request
timed out (Kafka's ``Sender.canRetry``), until ``retries`` or ``delivery.timeout.ms`` run out.

One batch of a partition is in flight at a time (Kafka's max.in.flight.requests.per.connection=1),
so a retried batch is always the partition's next sequence. Then OUT_OF_ORDER_SEQUENCE_NUMBER
(the leader lost acknowledged batches: an unclean election) and UNKNOWN_PRODUCER_ID (the leader
has no state of the producer: the log's head was deleted) mean what Kafka's
``TransactionManager.canRetry`` makes of them for an idempotent producer: bump the epoch (a new
InitProducerId, which restarts every partition's sequences at 0) and send the batch again,
restamped. A bump waits until no batch is in doubt, so that no batch whose first send may have
been written is sent again under a new epoch. A batch larger than the topic takes is split in two
and sent again (Kafka's ``splitAndReenqueue``). A batch that fails for good (a leader's refusal,
``retries`` used up, the delivery timeout) is an error the next ``flush`` raises, naming its
partition; the sequences of its partition are no longer known, so the epoch is bumped before the
next send (Kafka's ``handleFailedBatch``).

The seam for a transactional producer (``client/transactions.py``): the producer id and epoch come
from outside (``producer_id_and_epoch``, with ``transactional_id``: batches are stamped
transactional and Produce carries the id; the epoch is then never bumped here, since Kafka makes
those errors abortable), and ``before_first_write`` is called with the partitions about to be
written for the first time since ``reset_written_partitions`` (AddPartitionsToTxn's place);
``set_producer_id_and_epoch`` takes a new epoch from outside.

Keyed records go where Kafka's default partitioner puts them, keyless ones to a sticky partition
that moves on when its batch is closed (KIP-480). A topic the cluster does not know is asked for
with Metadata that lets the broker create it (``auto.create.topics.enable`` decides) until
``max.block.ms``. Sending is synchronous: ``send`` sends what ``linger.ms`` and ``batch.size``
made ready, ``flush`` sends the rest and returns what was delivered.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from ..common import TopicPartition
from ..errors import (
    ApiError,
    BrokerNotAvailableError,
    ErrorCode,
    InvalidConfigurationError,
    RecordTooLargeError,
    SeglogError,
    UnknownTopicOrPartitionError,
    error_for,
    error_name,
)
from ..partitioner import StickyPartitioner
from ..protocol import ApiKey
from ..protocol.message_data import (
    InitProducerIdRequestData,
    InitProducerIdResponseData,
    MetadataRequestData,
    MetadataResponseData,
    ProduceRequestData,
    ProduceResponseData,
)
from ..records import HEADER_SIZE, NO_PRODUCER_ID, Compression, RecordBatch, build_batch
from .cluster import RETRY_BACKOFF_S, ClusterClient, Unanswered, topics_by_name
from .connection import BlockingConnection

log = logging.getLogger(__name__)

_E = ErrorCode
INT32_MAX = 2**31 - 1
# a v2 record's framing beyond its key, value and headers, at most (Kafka's
# DefaultRecord.MAX_RECORD_OVERHEAD): length, attributes, timestamp and offset deltas, lengths
RECORD_OVERHEAD = 21
# the answers after which a batch may or may not have been written: sent again as it is
_IN_DOUBT = frozenset({_E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, _E.REQUEST_TIMED_OUT})
# an idempotent producer's answers that its epoch bump resolves (TransactionManager.canRetry)
_NEEDS_BUMP = frozenset({_E.OUT_OF_ORDER_SEQUENCE_NUMBER, _E.UNKNOWN_PRODUCER_ID})


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    epoch: int


class Delivered(NamedTuple):
    """A batch the leader acknowledged: its first offset (-1 when the leader answered
    DUPLICATE_SEQUENCE_NUMBER, or for acks=0, where no offset is known) and its count of records."""

    tp: TopicPartition
    base_offset: int
    record_count: int


# --- config ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerConfig:
    """The producer's settings, with Kafka's defaults (ProducerConfig); ``from_kafka`` reads them
    under Kafka's names."""

    acks: int = -1
    linger_ms: int = 5
    batch_size: int = 16384
    compression: Compression = Compression.NONE
    max_request_size: int = 1024 * 1024
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    max_block_ms: int = 60_000
    retries: int = INT32_MAX
    enable_idempotence: bool = True
    client_id: str = "seglog-producer"

    @classmethod
    def from_kafka(cls, config: Mapping[str, Any]) -> ProducerConfig:
        """The settings of a Kafka producer config (``acks``, ``linger.ms``, ``batch.size``,
        ``compression.type``, ``max.request.size``, ``request.timeout.ms``, ``delivery.timeout.ms``,
        ``max.block.ms``, ``retries``, ``enable.idempotence``, ``client.id``); other names are not
        the producer's business and are left alone. As Kafka: an explicit ``enable.idempotence=true``
        with acks other than all, or with ``retries=0``, is refused; left unset, it is turned off
        by them."""
        given = {k.strip().lower(): v for k, v in config.items()}
        acks_text = str(given.get("acks", "all")).strip().lower()
        if acks_text not in ("all", "-1", "0", "1"):
            raise InvalidConfigurationError(f"acks must be all, -1, 0 or 1, not {acks_text!r}")
        acks = -1 if acks_text == "all" else int(acks_text)
        codec = str(given.get("compression.type", "none"))
        try:
            compression = Compression.parse(codec)
        except SeglogError:
            raise InvalidConfigurationError(
                f"compression.type must be none, gzip, snappy, lz4 or zstd, not {codec!r}"
            ) from None
        retries = _int(given, "retries", INT32_MAX, 0)
        explicit = given.get("enable.idempotence")
        idempotent = _bool("enable.idempotence", explicit) if explicit is not None else True
        if explicit is not None and idempotent and (acks != -1 or retries == 0):
            raise InvalidConfigurationError(
                f"enable.idempotence=true needs acks=all and retries > 0 (acks is {acks_text}, retries {retries})"
            )
        made = cls(
            acks=acks,
            linger_ms=_int(given, "linger.ms", cls.linger_ms, 0),
            batch_size=_int(given, "batch.size", cls.batch_size, 0),
            compression=compression,
            max_request_size=_int(given, "max.request.size", cls.max_request_size, 1),
            request_timeout_ms=_int(given, "request.timeout.ms", cls.request_timeout_ms, 1),
            delivery_timeout_ms=_int(given, "delivery.timeout.ms", cls.delivery_timeout_ms, 1),
            max_block_ms=_int(given, "max.block.ms", cls.max_block_ms, 0),
            retries=retries,
            enable_idempotence=idempotent and acks == -1 and retries > 0,
            client_id=str(given.get("client.id", cls.client_id)),
        )
        if made.delivery_timeout_ms < made.linger_ms + made.request_timeout_ms:
            raise InvalidConfigurationError(
                f"delivery.timeout.ms ({made.delivery_timeout_ms}) must be at least linger.ms +"
                f" request.timeout.ms ({made.linger_ms + made.request_timeout_ms})"
            )
        return made


def _int(given: Mapping[str, Any], name: str, default: int, minimum: int) -> int:
    value = given.get(name)
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InvalidConfigurationError(f"{name} must be an integer, not {value!r}") from None
    if number < minimum:
        raise InvalidConfigurationError(f"{name} must be at least {minimum}, not {number}")
    return number


def _retriable(code: int) -> bool:
    """Kafka's exception for the code extends RetriableException (a code it does not know: no)."""
    try:
        return ErrorCode(code).retriable
    except ValueError:
        return False


def _bool(name: str, value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigurationError(f"{name} must be true or false, not {value!r}")
    return text == "true"


# --- topics ----------------------------------------------------------------------------------------


def partition_count(client: ClusterClient, topic: str, max_block_ms: int) -> int:
    """The topic's count of partitions, from Metadata that lets the broker create a topic it does not
    have (as Kafka's producer asks), asked again until it has them or ``max_block_ms`` passed; then
    UnknownTopicOrPartitionError says so."""
    give_up = time.monotonic() + max_block_ms / 1000
    while True:
        found = topics_by_name(_metadata(client, topic)).get(topic)
        if found is not None and not found.error_code and found.partitions:
            return len(found.partitions)
        code = found.error_code if found is not None else _E.UNKNOWN_TOPIC_OR_PARTITION
        if code not in (_E.UNKNOWN_TOPIC_OR_PARTITION, _E.LEADER_NOT_AVAILABLE, _E.NONE):
            raise error_for(code, None, f"cannot produce to topic {topic!r}")
        if time.monotonic() + RETRY_BACKOFF_S > give_up:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} not present in metadata after {max_block_ms} ms:"
                " it does not exist, and the broker did not create it (auto.create.topics.enable)"
            )
        time.sleep(RETRY_BACKOFF_S)


def _metadata(client: ClusterClient, topic: str) -> MetadataResponseData:
    request = MetadataRequestData(
        topics=[MetadataRequestData.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    client.renew_deadline()
    try:
        answer: MetadataResponseData = client.request(ApiKey.METADATA, request)
    except BrokerNotAvailableError:  # the bootstrap broker went away: ClusterClient finds another
        client.metadata([])
        answer = client.request(ApiKey.METADATA, request)
    return answer


# --- batches ---------------------------------------------------------------------------------------


@dataclass
class _Batch:
    """A built batch on its way to its partition's leader."""

    tp: TopicPartition
    buffer: bytearray
    record_count: int
    created: float  # monotonic time it was made (its first record's, for a batch filled by ``send``)
    expires: float  # when delivery.timeout.ms has passed since then
    attempts: int = 0
    stamped: ProducerIdAndEpoch | None = None  # the producer state it carries (None: not yet)
    in_doubt: bool = False  # sent, and its last answer leaves open whether it was written
    last_error: str = ""


@dataclass
class _Open:
    """The records of a partition's batch still being filled (``send``)."""

    records: list[tuple[Any, ...]] = field(default_factory=list)
    size: int = 0
    created: float = 0.0


class Producer:
    """An idempotent producer (or, with ``enable.idempotence=false``, a plain one) on one cluster,
    used by one thread at a time."""

    def __init__(
        self,
        bootstrap: str | ClusterClient,
        config: ProducerConfig | Mapping[str, Any] | None = None,
        *,
        producer_id_and_epoch: ProducerIdAndEpoch | None = None,
        transactional_id: str | None = None,
        before_first_write: Callable[[list[TopicPartition]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``bootstrap``: the servers (``host:port,...``), or a ClusterClient to share (its
        deadline is set for each send). ``producer_id_and_epoch``, ``transactional_id`` and
        ``before_first_write``: a transactional producer's, see the module's doc."""
        self.config = config if isinstance(config, ProducerConfig) else ProducerConfig.from_kafka(config or {})
        request_s = self.config.request_timeout_ms / 1000
        if isinstance(bootstrap, ClusterClient):
            self.client, self._owns_client = bootstrap, False
        else:
            # a Produce is answered within its timeout_ms (request.timeout.ms): the socket waits a second more
            self.client = ClusterClient(bootstrap, request_s, 1.0, client_id=self.config.client_id)
            self._owns_client = True
        self._clock = clock
        self.transactional_id = transactional_id
        self._before_first_write = before_first_write
        self._bumps_own_epoch = producer_id_and_epoch is None and self.config.enable_idempotence
        self._state: ProducerIdAndEpoch | None = producer_id_and_epoch
        self._bump_pending = False
        self._sequences: dict[TopicPartition, int] = {}
        self._written: set[TopicPartition] = set()
        self._partition_counts: dict[str, int] = {}
        self._sticky: dict[str, StickyPartitioner] = {}
        self._open: dict[TopicPartition, _Open] = {}
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        self._queued_bytes = 0
        self._delivered: list[Delivered] = []
        self._failures: list[SeglogError] = []
        try:
            if self._bumps_own_epoch:
                self._state = self._init_producer_id(None)
        except BaseException:
            self.close()
            raise

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch | None:
        """The id and epoch batches are stamped with (None when idempotence is off)."""
        return self._state

    # --- the transactional seam ---------------------------------------------------------------------

    def set_producer_id_and_epoch(self, producer: ProducerIdAndEpoch) -> None:
        """A new id or epoch from outside (a transactional producer's InitProducerId after an
        abort): every partition's sequences start again at 0, queued batches are stamped anew."""
        self._state = producer
        self._sequences.clear()

    def reset_written_partitions(self) -> None:
        """The next write to each partition calls ``before_first_write`` again (a new transaction)."""
        self._written.clear()

    # --- topics ---------------------------------------------------------------------------------------

    def partition_count(self, topic: str) -> int:
        """The topic's count of partitions (``partition_count``), kept once known."""
        if topic not in self._partition_counts:
            self._partition_counts[topic] = partition_count(self.client, topic, self.config.max_block_ms)
        return self._partition_counts[topic]

    def _checked(self, topic: str, partition: int) -> TopicPartition:
        count = self.partition_count(topic)
        if not 0 <= partition < count:
            raise UnknownTopicOrPartitionError(
                f"partition {partition} of topic {topic!r} does not exist: it has partitions 0 to {count - 1}"
            )
        return TopicPartition(topic, partition)

    # --- sending --------------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> None:
        """Add one record to its partition's batch (the default partitioner's when ``partition`` is
        None), and send what is ready. A record larger than max.request.size is refused here."""
        size = RECORD_OVERHEAD + len(key or b"") + len(value or b"")
        size += sum(len(k.encode()) + len(v or b"") + 2 * 5 for k, v in headers)
        if size + HEADER_SIZE > self.config.max_request_size:
            raise RecordTooLargeError(
                f"a record to topic {topic!r} is {size + HEADER_SIZE} bytes when serialized, larger than"
                f" max.request.size ({self.config.max_request_size})"
            )
        if partition is None:
            sticky = self._sticky.get(topic)
            if sticky is None:
                sticky = self._sticky[topic] = StickyPartitioner(self.partition_count(topic))
            partition = sticky.partition(key)
        tp = self._checked(topic, partition)
        now = self._clock()
        opened = self._open.get(tp)
        if opened is not None and opened.records and opened.size + size > self.config.batch_size:
            self._close(tp)
            opened = None
        if opened is None:
            opened = self._open[tp] = _Open(created=now)
        opened.records.append((key, value, timestamp_ms, list(headers)))
        opened.size += size
        self._send_ready(now)

    def send_batches(self, tp: TopicPartition, batches: Iterable[bytearray]) -> None:
        """Queue v2 batches built by ``records`` (``build_batch``, ``build_batches_from_columns``),
        without producer state: it is stamped as each is sent. Then send what is ready."""
        tp = self._checked(tp.topic, tp.partition)
        if tp in self._open:  # records sent before these go before them
            self._close(tp)
        now = self._clock()
        for buffer in batches:
            if len(buffer) > self.config.max_request_size:
                raise RecordTooLargeError(
                    f"a batch to {tp} is {len(buffer)} bytes, larger than max.request.size"
                    f" ({self.config.max_request_size})"
                )
            self._queue(tp, buffer, RecordBatch(buffer).record_count, now)
        self._send_ready(now)

    def flush(self) -> list[Delivered]:
        """Send everything and wait for it: the batches delivered since the last flush, in the
        order they were acknowledged. The first failure is raised instead, naming its partition
        (the other batches were sent all the same)."""
        for tp in list(self._open):
            self._close(tp)
        while self._queued_bytes or any(self._queues.values()):
            self._round()
        delivered, self._delivered = self._delivered, []
        if self._failures:
            first, more = self._failures[0], len(self._failures) - 1
            self._failures = []
            if more:
                first.add_note(f"{more} more batch(es) failed too")
            raise first
        return delivered

    def _close(self, tp: TopicPartition) -> None:
        opened = self._open.pop(tp)
        batch = build_batch(opened.records, compression=self.config.compression)
        self._queue(tp, batch, len(opened.records), opened.created)
        sticky = self._sticky.get(tp.topic)
        if sticky is not None and sticky.partition(None) == tp.partition:
            sticky.batch_done()

    def _queue(self, tp: TopicPartition, buffer: bytearray, count: int, created: float) -> None:
        expires = created + self.config.delivery_timeout_ms / 1000
        self._queues.setdefault(tp, deque()).append(_Batch(tp, buffer, count, created, expires))
        self._queued_bytes += len(buffer)

    def _send_ready(self, now: float) -> None:
        """Close the batches whose linger passed; send while a request's worth is queued or a
        queued batch's linger passed."""
        linger = self.config.linger_ms / 1000
        for tp in [tp for tp, o in self._open.items() if now - o.created >= linger]:
            self._close(tp)
        while self._queued_bytes >= self.config.max_request_size or any(
            q and now - q[0].created >= linger for q in self._queues.values()
        ):
            self._round()
            now = self._clock()

    # --- one request per leader -------------------------------------------------------------------------

    def _round(self) -> None:
        """Send each partition's first queued batch (up to max.request.size in all) to its leader
        once, retries of moved leaders included, and settle each by its answer."""
        if self._bump_pending and self._bumps_own_epoch and not any(q and q[0].in_doubt for q in self._queues.values()):
            self._bump_epoch()
        heads = self._heads()
        new = [tp for tp in heads if tp not in self._written]
        if new and self._before_first_write is not None:
            self._before_first_write(new)
        self._written.update(new)
        for batch in heads.values():
            self._stamp(batch)
        self.client.deadline = min(b.expires for b in heads.values())
        answers = self.client.to_leaders(list(heads), partial(self._produce, heads))
        retry = False
        for tp, answer in answers.items():
            retry |= self._settle(heads[tp], answer)
        if retry:
            time.sleep(RETRY_BACKOFF_S)

    def _heads(self) -> dict[TopicPartition, _Batch]:
        heads: dict[TopicPartition, _Batch] = {}
        size = 0
        for tp, queue in self._queues.items():
            if queue and (not heads or size + len(queue[0].buffer) <= self.config.max_request_size):
                heads[tp] = queue[0]
                size += len(queue[0].buffer)
        return heads

    def _stamp(self, batch: _Batch) -> None:
        """The producer's id, epoch and the partition's next sequence into a batch not stamped with
        the current ones (a new batch, or one refused before an epoch bump)."""
        if self._state is None or batch.stamped == self._state:
            return
        sequence = self._sequences.get(batch.tp, 0)
        RecordBatch(batch.buffer).set_producer_state(
            self._state.producer_id,
            self._state.epoch,
            sequence,
            transactional=self.transactional_id is not None,
        )
        batch.stamped = self._state
        # Kafka's sequences wrap at the int32 maximum (DefaultRecordBatch.incrementSequence)
        self._sequences[batch.tp] = (sequence + batch.record_count) % (INT32_MAX + 1)

    def _produce(
        self, heads: dict[TopicPartition, _Batch], leader: BlockingConnection, tps: list[TopicPartition]
    ) -> dict[TopicPartition, ProduceResponseData.PartitionProduceResponse]:
        by_topic: dict[str, list[ProduceRequestData.PartitionProduceData]] = {}
        for tp in tps:
            data = ProduceRequestData.PartitionProduceData(index=tp.partition, records=heads[tp].buffer)
            by_topic.setdefault(tp.topic, []).append(data)
        request = ProduceRequestData(
            transactional_id=self.transactional_id,
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=[ProduceRequestData.TopicProduceData(name=t, partition_data=d) for t, d in by_topic.items()],
        )
        if self.config.acks == 0:  # no answer comes: each partition's is "no error", at no known offset
            leader.send_only(ApiKey.PRODUCE, request)
            return {tp: ProduceResponseData.PartitionProduceResponse(index=tp.partition, base_offset=-1) for tp in tps}
        answer: ProduceResponseData = leader.request(ApiKey.PRODUCE, request)
        return {TopicPartition(t.name, r.index): r for t in answer.responses for r in t.partition_responses}

    def _settle(self, batch: _Batch, answer: ProduceResponseData.PartitionProduceResponse | Unanswered) -> bool:
        """Complete, keep or fail a batch by its leader's answer; True when it is to be sent again."""
        batch.attempts += 1
        code = answer.error_code
        if code in (_E.NONE, _E.DUPLICATE_SEQUENCE_NUMBER):
            offset = answer.base_offset if isinstance(answer, ProduceResponseData.PartitionProduceResponse) else -1
            self._done(batch, offset if code == _E.NONE else -1)
            return False
        if code == _E.MESSAGE_TOO_LARGE and batch.record_count > 1:
            self._split(batch)
            return False
        why = answer.why if isinstance(answer, Unanswered) else (answer.error_message or error_name(code))
        batch.last_error = f"{error_name(code)}: {why}" if why != error_name(code) else why
        if self._clock() >= batch.expires:
            self._fail(batch, ApiError(_E.REQUEST_TIMED_OUT, self._expired(batch)))
            return False
        if batch.attempts > self.config.retries:
            self._fail(batch, error_for(code, why, f"cannot produce to {batch.tp} after {batch.attempts} attempts"))
            return False
        if code in _NEEDS_BUMP and self._bumps_own_epoch:
            log_start = getattr(answer, "log_start_offset", -1)
            # without the log start offset the leader was moving as it answered: sent again as it is
            if code == _E.OUT_OF_ORDER_SEQUENCE_NUMBER or log_start != -1:
                self._bump_pending = True
            batch.in_doubt = False
            return True
        if isinstance(answer, Unanswered) or code in _IN_DOUBT or _retriable(code):
            batch.in_doubt = isinstance(answer, Unanswered) or code in _IN_DOUBT or batch.in_doubt
            log.info("sending a batch to %s again (attempt %d): %s", batch.tp, batch.attempts + 1, batch.last_error)
            return True
        self._fail(batch, error_for(code, answer.error_message, f"cannot produce to {batch.tp}"))
        return False

    def _split(self, batch: _Batch) -> None:
        """A batch larger than the topic takes (MESSAGE_TOO_LARGE) goes again as two halves, each
        split again until it fits or holds one record (Kafka's ``splitAndReenqueue``). It was not
        written: its partition's next sequence is its own again."""
        view = RecordBatch(batch.buffer)
        records, compression = view.records(), view.compression
        if batch.stamped == self._state and self._state is not None:
            self._sequences[batch.tp] = view.base_sequence
        half = len(records) // 2
        halves = [
            _Batch(batch.tp, build_batch(part, compression=compression), len(part), batch.created, batch.expires)
            for part in (records[:half], records[half:])
        ]
        queue = self._queues[batch.tp]
        queue.popleft()
        queue.extendleft(reversed(halves))
        self._queued_bytes += sum(len(h.buffer) for h in halves) - len(batch.buffer)

    def _expired(self, batch: _Batch) -> str:
        return (
            f"cannot produce to {batch.tp}: {batch.record_count} record(s) expired, delivery.timeout.ms"
            f" ({self.config.delivery_timeout_ms} ms) passed since the batch was made; last error: {batch.last_error}"
        )

    def _done(self, batch: _Batch, base_offset: int) -> None:
        self._dequeue(batch)
        self._delivered.append(Delivered(batch.tp, base_offset, batch.record_count))

    def _fail(self, batch: _Batch, error: SeglogError) -> None:
        """A batch given up: the error for ``flush``; its partition's sequences are unknown from here,
        so an idempotent producer bumps its epoch before it sends again."""
        self._dequeue(batch)
        self._failures.append(error)
        if batch.stamped is not None:
            self._bump_pending = True

    def _dequeue(self, batch: _Batch) -> None:
        queue = self._queues[batch.tp]
        assert queue[0] is batch
        queue.popleft()
        self._queued_bytes -= len(batch.buffer)

    # --- producer id and epoch ---------------------------------------------------------------------------

    def _bump_epoch(self) -> None:
        """A new epoch (or id) for this producer: every partition's sequences start again at 0."""
        self._state = self._init_producer_id(self._state)
        self._sequences.clear()
        self._bump_pending = False
        log.info("producer epoch bumped to %s", self._state)

    def _init_producer_id(self, current: ProducerIdAndEpoch | None) -> ProducerIdAndEpoch:
        """InitProducerId without a transactional id, to any live broker (KIP-360: with the current id
        and epoch, for a bump), retried while the broker cannot serve it yet."""
        request = InitProducerIdRequestData(
            transactional_id=None,
            transaction_timeout_ms=INT32_MAX,
            producer_id=current.producer_id if current is not None else NO_PRODUCER_ID,
            producer_epoch=current.epoch if current is not None else -1,
        )
        self.client.renew_deadline()
        while True:
            try:
                answer: InitProducerIdResponseData = self.client.request(ApiKey.INIT_PRODUCER_ID, request)
            except BrokerNotAvailableError as e:
                if time.monotonic() + RETRY_BACKOFF_S > self.client.deadline:
                    raise
                log.info("InitProducerId: %s; asking another broker", e)
                self.client.metadata([])  # connects to a broker that answers, or raises after the timeout
                continue
            code = answer.error_code
            if not code:
                return ProducerIdAndEpoch(answer.producer_id, answer.producer_epoch)
            if not _retriable(code) or time.monotonic() + RETRY_BACKOFF_S > self.client.deadline:
                raise error_for(code, None, "cannot get a producer id (InitProducerId)")
            time.sleep(RETRY_BACKOFF_S)

    # --- closing -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections (a shared ClusterClient stays open); what is not flushed is dropped."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
