"""The checks of an append (Kafka's LogValidator), and the Python referee of the C walk.

A leader's append is checked and given its offsets by one C call
(``_scan.check_append``, made by the partition log under its lock, as Kafka runs
LogValidator under the log's lock); ``validate_general`` makes the same checks in
Python, fault for fault and in the same order, for buffers holding legacy batches
and as the referee of the tests. What the checks are:

- framing, CRC, magic, sizes against ``max.message.bytes``, a partial batch at the end;
- a leader's (v2 only): no control batch from a client, the last offset delta against
  the record count, every record walked (offset deltas 0, 1, ...), keys on a
  compacted topic, CreateTime timestamps within ``message.timestamp.before/after.max.ms``;
- a follower's: offsets increasing from batch to batch, and each batch's records walked
  against its count and offset span (``check_follower_records``).

A leader's append of a legacy message set (Produce v0-2) is first converted to one v2 batch
(``to_v2``), as Kafka's LogValidator converts to the log's message format; the v2 checks
then apply to it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import LogConfig
from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from ..records import NO_TIMESTAMP, BatchIterator, Compression, LegacyBatch, RecordBatch, check_records
from ..records.batch import check_batch
from ..records.compression import decompress
from ..records.conversion import to_v2_batch
from ..records.layout import ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, HEADER_SIZE, MAGIC_OFFSET
from . import _scan
from .producer_entry import AppendOrigin

# an Enum class's attribute is a hooked call on Python 3.11 (~340 ns, a global ~25): every
# leader append asks for these
_CLIENT, _COORDINATOR = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# What validation learns of each batch of an append, in this order: position in the
# append's buffer, size, record count, last offset delta, max timestamp, leader epoch,
# base offset. Tuples, made by _scan.check_append (or the general path alike).
_Facts = tuple[int, int, int, int, int, int, int]


class LogValidator:
    """The append checks of one partition log: its dir (named in errors), its config
    (the log replaces it when the topic's config changes) and its clock."""

    def __init__(self, dir: str, config: LogConfig, clock: Callable[[], int]) -> None:
        self.dir = dir
        self.config = config
        self._clock = clock

    def leader_rules(self) -> tuple[tuple[int, int] | None, int | None]:
        """For a leader's append: the CreateTime bounds its timestamps must lie in, and
        the LogAppendTime it is stamped with (None: not that timestamp type). A producer's
        usual append applies the same rules in C (``_scan.append_batch``, the clock read there);
        tests/storage/test_append_one.py holds the two paths together."""
        c = self.config
        if c.message_timestamp_type == "CreateTime":
            # [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms], within
            # an int64 (the most a batch can hold)
            now = self._clock()
            low, high = now - c.message_timestamp_before_max_ms, now + c.message_timestamp_after_max_ms
            return (low if low > _INT64_MIN else _INT64_MIN, high if high < _INT64_MAX else _INT64_MAX), None
        return None, self._clock() if c.message_timestamp_type == "LogAppendTime" else None

    def check_origin(self, origin: AppendOrigin) -> None:
        """A leader's append is a producer's or a coordinator's (a replica's goes through
        ``append_as_follower``)."""
        if origin != _CLIENT and origin != _COORDINATOR:  # (equal: a caller may pass the string)
            raise InvalidRequestError(f"origin must be 'client' or 'coordinator', not {str(origin)!r}", file=self.dir)

    def validate(self, buffer: bytearray, leader: bool, origin: AppendOrigin) -> list[_Facts]:
        """Kafka's LogValidator checks; returns what the append needs of each batch.

        One C walk over the whole buffer (``_scan.check_append``) makes every check of
        the general path below, fault for fault and in the same order; a buffer holding
        a legacy batch takes the general path."""
        c = self.config
        bounds = self.leader_rules()[0] if leader else None
        facts = _scan.check_append(
            buffer, leader, origin != AppendOrigin.CLIENT, c.compact, c.max_message_bytes, bounds, decompress, self.dir
        )
        return facts if facts is not None else self.validate_general(buffer, leader, origin, bounds)

    def to_v2(self, buffer: bytearray, bounds: tuple[int, int] | None) -> bytearray:
        """A leader's legacy message set as one v2 batch: each message within
        ``max.message.bytes`` and its CRC checked, the codec the topic's ``compression.type``
        (the producer's when "producer"). The CreateTime ``bounds`` are checked here, for
        the records that have a timestamp: a magic 0 message's has none (-1), which Kafka's
        LogValidator lets pass."""
        max_bytes = self.config.max_message_bytes
        for at, end, _ in BatchIterator(buffer).headers():
            if end - at > max_bytes:
                raise RecordTooLargeError(
                    f"message of {end - at} bytes exceeds max.message.bytes {max_bytes}", file=self.dir, position=at
                )
        configured = self.config.compression_type
        codec: Compression | None = None  # "producer": the producer's codec is kept
        if configured != "producer":
            codec = Compression.NONE if configured == "uncompressed" else Compression.parse(configured)
        try:
            converted = to_v2_batch(buffer, codec)
        except (CorruptRecordError, InvalidRecordError) as e:
            raise e.at(file=self.dir) from None
        stamped = [t for r in RecordBatch(converted).records() if (t := r.timestamp) is not None and t != NO_TIMESTAMP]
        if bounds is not None and stamped:
            self._check_timestamps(min(stamped), max(stamped), 0, bounds)
        return converted

    def validate_general(
        self, buffer: bytearray, leader: bool, origin: AppendOrigin, bounds: tuple[int, int] | None
    ) -> list[_Facts]:
        """``validate`` for any buffer, legacy batches too: the referee of the C walk.

        Each v2 header is unpacked once (``BatchIterator.headers``) and the checks read
        its fields: a batch object's property reads cost more than the CRC of 16 KiB."""
        out: list[_Facts] = []
        scan = BatchIterator(buffer)
        view = scan.view
        prev_last = -1
        max_bytes = self.config.max_message_bytes
        for at, end, head in scan.headers():
            size = end - at
            if size > max_bytes:
                raise RecordTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes {max_bytes}", file=self.dir, position=at
                )
            if head is not None:
                check_batch(view, at, end, head, at)
                out.append(self._validate_v2(view, at, end, head, leader, origin, bounds))
            else:
                legacy = LegacyBatch(view[at:end], at)
                legacy.validate()
                if leader:
                    raise InvalidRecordError(
                        f"magic {legacy.magic} batches cannot be appended; use v2", file=self.dir, position=at
                    )
                base = legacy.base_offset
                out.append((at, size, legacy.record_count, legacy.last_offset - base, legacy.max_timestamp, -1, base))
            if not leader:
                base, delta = out[-1][6], out[-1][3]
                if base <= prev_last:
                    raise UnexpectedAppendOffsetError(
                        f"batch offsets {base}.. do not follow {prev_last}", file=self.dir, offset=base
                    )
                prev_last = base + delta
        if scan.remaining:
            raise CorruptRecordError(
                f"{scan.remaining} bytes of a partial batch at the end of the append",
                file=self.dir,
                position=scan.position,
            )
        if not out:
            raise InvalidRecordError("an append must hold at least one batch", file=self.dir)
        return out

    def _validate_v2(
        self,
        view: memoryview,
        at: int,
        end: int,
        head: tuple,
        leader: bool,
        origin: AppendOrigin,
        bounds: tuple[int, int] | None,
    ) -> _Facts:
        base_offset, _, epoch, _, _, attributes, delta, base_ts, max_ts, _, _, _, count = head
        if leader:
            control = attributes & CONTROL_FLAG_MASK
            if control and origin == AppendOrigin.CLIENT:
                raise self._invalid("clients may not write control batches", at)
            if delta != count - 1:
                raise self._invalid(f"last offset delta {delta} disagrees with the record count {count}", at)
            if attributes & COMPRESSION_CODEC_MASK:
                records = RecordBatch(view[at:end], at).records_section()
            else:
                records = view[at + HEADER_SIZE : end]
            min_delta, max_delta, bad_offset, null_key = check_records(records, count, at)
            if bad_offset >= 0:
                raise self._invalid(f"record {bad_offset} has an offset delta other than {bad_offset}", at)
            if null_key >= 0 and not control and self.config.compact:
                raise self._invalid("a compacted topic cannot accept a record without a key", at)
            if count and bounds is not None:
                self._check_timestamps(base_ts + min_delta, base_ts + max_delta, at, bounds)
                max_ts = base_ts + max_delta
        return (at, end - at, count, delta, max_ts, epoch, base_offset)

    def _invalid(self, message: str, position: int) -> InvalidRecordError:
        return InvalidRecordError(message, file=self.dir, position=position)

    def _check_timestamps(self, lowest: int, highest: int, position: int, bounds: tuple[int, int]) -> None:
        if lowest < bounds[0] or highest > bounds[1]:
            raise InvalidTimestampError(
                f"timestamps {lowest}..{highest} are outside [{bounds[0]}, {bounds[1]}] "
                f"(message.timestamp.before.max.ms / after.max.ms)",
                file=self.dir,
                position=position,
            )

    def check_follower_records(self, buffer: bytearray, batches: list[_Facts]) -> None:
        """The structural checks of a leader's append that ``validate`` leaves out for a
        follower: each v2 batch's records walked (decompressed within the bound), their
        count against their bytes and against the batch's offset span. Offsets are not
        checked record by record: compaction leaves gaps, and fewer records than the span."""
        view = memoryview(buffer)
        for at, size, count, delta, _, _, _ in batches:
            if buffer[at + MAGIC_OFFSET] != 2:
                continue  # a legacy batch: its CRC covers it, and validate checked it
            try:
                if count > delta + 1:
                    raise CorruptRecordError(
                        f"record count {count} exceeds the batch's offset span of {delta + 1}", position=at
                    )
                if buffer[at + ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK:  # (the low byte of the attributes)
                    records = RecordBatch(view[at : at + size], at).records_section()
                else:
                    records = view[at + HEADER_SIZE : at + size]
                check_records(records, count, at)
            except CorruptRecordError as e:
                raise e.at(file=self.dir) from None
