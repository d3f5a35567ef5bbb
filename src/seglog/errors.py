"""The one family of errors seglog raises.

Every error carries the Kafka error code it maps to (so the broker can put it
on the wire unchanged) and, where it is known, the place it happened: the file,
the byte position in that file or buffer, and the offset.
"""

from __future__ import annotations

from typing import Any


class SeglogError(Exception):
    """Base of every seglog error. ``error_code`` is Kafka's protocol code."""

    error_code = -1  # UNKNOWN_SERVER_ERROR

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        position: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.position = position
        self.offset = offset
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = []
        if self.file is not None:
            where.append(f"file {self.file}")
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.message} ({', '.join(where)})" if where else self.message

    def at(self, **place: Any) -> SeglogError:
        """Fill in the place where a lower layer did not know it."""
        for name in ("file", "position", "offset"):
            if getattr(self, name) is None and place.get(name) is not None:
                setattr(self, name, place[name])
        self.args = (self._describe(),)
        return self


# --- record format -----------------------------------------------------------


class CorruptRecordError(SeglogError):
    """Bytes that are not a valid record batch: bad magic, CRC, size, varint."""

    error_code = 2  # CORRUPT_MESSAGE


class UnsupportedCompressionTypeError(CorruptRecordError):
    error_code = 76  # UNSUPPORTED_COMPRESSION_TYPE


class InvalidRecordError(SeglogError):
    """A well-formed batch the log refuses (no key on a compacted topic, ...)."""

    error_code = 87  # INVALID_RECORD


class InvalidTimestampError(SeglogError):
    error_code = 32  # INVALID_TIMESTAMP


class RecordTooLargeError(SeglogError):
    """A batch larger than ``max.message.bytes`` or a segment can hold."""

    error_code = 10  # MESSAGE_TOO_LARGE


# --- producers, groups and transactions -------------------------------------


class CorruptSnapshotError(CorruptRecordError):
    """A producer state ``.snapshot`` file that fails its version, schema or CRC check."""


class OutOfOrderSequenceError(SeglogError):
    """A producer's batch whose sequence does not follow its last one."""

    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(SeglogError):
    """A batch or marker from an epoch older than the producer's current one."""

    error_code = 47  # INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(SeglogError):
    """A producer inside a transaction wrote outside it (or the reverse)."""

    error_code = 48  # INVALID_TXN_STATE


class TransactionCoordinatorFencedError(SeglogError):
    """A transaction marker from a coordinator epoch older than the last one seen."""

    error_code = 52  # TRANSACTION_COORDINATOR_FENCED


class IllegalStateTransitionError(SeglogError):
    """A group or transaction asked to move between states Kafka does not connect
    (Kafka's IllegalStateException: the broker answers UNKNOWN_SERVER_ERROR)."""


# --- protocol ----------------------------------------------------------------


class InvalidRequestError(SeglogError):
    """A request that is not valid. On the wire: bytes that are not a valid request (or
    response) of the API and version they claim — cut short, a length or count past the frame,
    a size prefix beyond ``socket.request.max.bytes`` (``position`` is the byte position in the
    frame, after the size prefix). At the storage API: an argument outside what its Kafka type
    holds — a negative offset, an epoch that is no int16, an unknown origin, a partition count
    that is no int32."""

    error_code = 42  # INVALID_REQUEST


class UnsupportedVersionError(SeglogError):
    """An API key that is not declared, or a version outside its declared range. The header's
    fields are kept so the broker can answer (ApiVersions) or close the connection (the rest)."""

    error_code = 35  # UNSUPPORTED_VERSION

    def __init__(
        self, message: str, *, api_key: int, api_version: int, correlation_id: int | None = None, **place: Any
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        super().__init__(message, **place)


# --- storage -----------------------------------------------------------------


class OffsetOutOfRangeError(SeglogError):
    """An offset outside [log start offset, log end offset]."""

    error_code = 1  # OFFSET_OUT_OF_RANGE

    def __init__(self, message: str, *, log_start_offset: int, log_end_offset: int, **place: Any) -> None:
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        super().__init__(f"{message}; valid range is [{log_start_offset}, {log_end_offset}]", **place)


class UnexpectedAppendOffsetError(SeglogError):
    """A follower append whose offsets do not continue the log."""


class CorruptIndexError(SeglogError):
    """An index file that fails Kafka's sanity checks; it is rebuilt from its log."""


class KafkaStorageError(SeglogError):
    """An I/O error (a full disk, a failed fsync) on a log directory."""

    error_code = 56  # KAFKA_STORAGE_ERROR


class LogDirLockedError(KafkaStorageError):
    """Another process owns the log directory."""


class InvalidTopicError(SeglogError):
    error_code = 17  # INVALID_TOPIC_EXCEPTION


class TopicExistsError(SeglogError):
    error_code = 36  # TOPIC_ALREADY_EXISTS


class UnknownTopicOrPartitionError(SeglogError):
    error_code = 3  # UNKNOWN_TOPIC_OR_PARTITION


class InvalidPartitionsError(SeglogError):
    error_code = 37  # INVALID_PARTITIONS


class InvalidConfigurationError(SeglogError):
    error_code = 40  # INVALID_CONFIG


# --- cluster -----------------------------------------------------------------


class ZooKeeperError(SeglogError):
    """ZooKeeper could not be started, reached, or refused an operation; ``file`` names the znode."""


class InvalidZNodeError(SeglogError):
    """A znode whose data is not what Kafka writes there; ``file`` names it, ``position`` the bad byte."""


class ControllerMovedError(SeglogError):
    """A controller whose epoch is no longer the current one (another broker was elected)."""

    error_code = 11  # STALE_CONTROLLER_EPOCH


class InvalidReplicationFactorError(SeglogError):
    error_code = 38  # INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(SeglogError):
    error_code = 39  # INVALID_REPLICA_ASSIGNMENT


class IllegalStateChangeError(SeglogError):
    """A partition or replica moved between states the controller's state machines do not allow."""


class StaleBrokerEpochError(SeglogError):
    """A broker's request carries an epoch older than its current registration (KIP-380)."""

    error_code = 77  # STALE_BROKER_EPOCH


class NotControllerError(ControllerMovedError):
    """A request for the controller reached a broker that is not (or no longer) the controller."""

    error_code = 41  # NOT_CONTROLLER


class BrokerNotAvailableError(SeglogError):
    error_code = 8  # BROKER_NOT_AVAILABLE


class FencedLeaderEpochError(SeglogError):
    error_code = 74  # FENCED_LEADER_EPOCH


class InvalidUpdateVersionError(SeglogError):
    """An AlterPartition based on a partition epoch (state zkVersion) that is no longer the current one."""

    error_code = 95  # INVALID_UPDATE_VERSION


class IneligibleReplicaError(SeglogError):
    """A new ISR naming a broker that is not alive (KIP-841)."""

    error_code = 107  # INELIGIBLE_REPLICA


class NoReplicaOnlineError(SeglogError):
    """No assigned replica of a partition is alive to lead it."""

    error_code = 5  # LEADER_NOT_AVAILABLE


# --- broker --------------------------------------------------------------------


class TopicDeletionDisabledError(SeglogError):
    error_code = 73  # TOPIC_DELETION_DISABLED


class InvalidRequiredAcksError(SeglogError):
    error_code = 21  # INVALID_REQUIRED_ACKS


class NotEnoughReplicasError(SeglogError):
    """An acks=all produce to a partition whose ISR is smaller than min.insync.replicas: nothing is written."""

    error_code = 19  # NOT_ENOUGH_REPLICAS


class UnknownLeaderEpochError(SeglogError):
    """A client's leader epoch newer than the broker knows: the broker is behind."""

    error_code = 75  # UNKNOWN_LEADER_EPOCH


class OffsetNotAvailableError(SeglogError):
    """A new leader's high watermark has not yet reached the start of its epoch: its offsets are not known yet."""

    error_code = 78  # OFFSET_NOT_AVAILABLE


class UnknownTopicIdError(SeglogError):
    error_code = 100  # UNKNOWN_TOPIC_ID


class NotLeaderOrFollowerError(SeglogError):
    """A request for a leader (a produce, a fetch) reached a replica that follows, or a broker that holds none."""

    error_code = 6  # NOT_LEADER_OR_FOLLOWER


class CoordinatorNotAvailableError(SeglogError):
    """The coordinator's internal topic (``__consumer_offsets``, ``__transaction_state``) cannot serve yet."""

    error_code = 15  # COORDINATOR_NOT_AVAILABLE


class PreferredLeaderNotAvailableError(SeglogError):
    """A preferred-leader election found the preferred replica dead or out of the ISR."""

    error_code = 80  # PREFERRED_LEADER_NOT_AVAILABLE


class EligibleLeadersNotAvailableError(SeglogError):
    """An unclean election found no live replica to lead."""

    error_code = 83  # ELIGIBLE_LEADERS_NOT_AVAILABLE


class ElectionNotNeededError(SeglogError):
    """The partition's leader is already the one the election would choose."""

    error_code = 84  # ELECTION_NOT_NEEDED


class NoReassignmentInProgressError(SeglogError):
    """A reassignment was cancelled for a partition that is not being reassigned."""

    error_code = 85  # NO_REASSIGNMENT_IN_PROGRESS


class InvalidResponseError(SeglogError):
    """Bytes a peer sent back that are not a valid response to the request they answer: cut
    short, a length past the frame, a size beyond the limit, another correlation id."""


class LocalProtocolError(SeglogError):
    """This side used a connection against the protocol (a response out of order, bytes
    after the end of the stream): seglog's own fault, not the peer's."""
