"""The one family of errors seglog raises, and the table of Kafka's error codes they map to.

``ErrorCode`` holds every error code of Kafka 3.9 once: its name, its number on the wire, and
whether Kafka's exception for it is retriable. Each error class states its code through that table
(``error_code = ErrorCode.OFFSET_OUT_OF_RANGE``), and the table gives each code back its class:
``error_for(code, message)`` builds the exception a peer's answer of that code stands for. The
table lives here, at the bottom of the layers, because ``seglog.protocol`` imports this module
(and re-exports ``ErrorCode``), not the other way round.

Every error carries the Kafka error code it maps to (so the broker can put it
on the wire unchanged) and, where it is known, the place it happened: the file,
the byte position in that file or buffer, and the offset.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

_RETRIABLE = True  # a row's second field: Kafka's exception for the code extends RetriableException


class ErrorCode(IntEnum):
    """Kafka's error codes, the int16 a response carries per request, topic or partition: every code
    of ``Errors.java`` in Kafka 3.9 (-1 to 127), named as Kafka names them. A row is ``NAME = code``,
    or ``NAME = code, _RETRIABLE`` when Kafka's exception for the code extends ``RetriableException``
    (directly, or through ``InvalidMetadataException``): a client may send the request again, after
    fresh metadata for the metadata ones, and expect another answer."""

    retriable: bool

    def __new__(cls, code: int, retriable: bool = False) -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        return member

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2, _RETRIABLE
    UNKNOWN_TOPIC_OR_PARTITION = 3, _RETRIABLE
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5, _RETRIABLE
    NOT_LEADER_OR_FOLLOWER = 6, _RETRIABLE
    REQUEST_TIMED_OUT = 7, _RETRIABLE
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9, _RETRIABLE
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13, _RETRIABLE
    COORDINATOR_LOAD_IN_PROGRESS = 14, _RETRIABLE
    COORDINATOR_NOT_AVAILABLE = 15, _RETRIABLE
    NOT_COORDINATOR = 16, _RETRIABLE
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19, _RETRIABLE
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, _RETRIABLE
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41, _RETRIABLE
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51, _RETRIABLE
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56, _RETRIABLE
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70, _RETRIABLE
    INVALID_FETCH_SESSION_EPOCH = 71, _RETRIABLE
    LISTENER_NOT_FOUND = 72, _RETRIABLE
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74, _RETRIABLE
    UNKNOWN_LEADER_EPOCH = 75, _RETRIABLE
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78, _RETRIABLE
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80, _RETRIABLE
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, _RETRIABLE
    ELECTION_NOT_NEEDED = 84, _RETRIABLE
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88, _RETRIABLE
    THROTTLING_QUOTA_EXCEEDED = 89, _RETRIABLE
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100, _RETRIABLE
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103, _RETRIABLE
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106, _RETRIABLE
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122, _RETRIABLE
    INVALID_SHARE_SESSION_EPOCH = 123, _RETRIABLE
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


def error_name(code: int) -> str:
    """Kafka's name for ``code``; a code Kafka 3.9 does not define (a later Kafka's) is named as such."""
    known = _known(code)
    return known.name if known is not None else f"UNKNOWN_SERVER_ERROR (error code {code}, unknown to Kafka 3.9)"


def _known(code: int) -> ErrorCode | None:
    try:
        return ErrorCode(code)
    except ValueError:
        return None


# The class a peer's answer of each code is raised as (``error_for``), filled as the classes below are
# defined: per code, the first class of this module that states it and is built from a message alone.
_CLASSES: dict[ErrorCode, type[SeglogError]] = {}


class SeglogError(Exception):
    """Base of every seglog error. ``error_code`` is Kafka's protocol code: UNKNOWN_SERVER_ERROR for an
    error Kafka has no code of its own for (as Kafka answers an exception that is no ApiException)."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("error_code")
        # A peer's answer carries a code and a message, nothing else: a class that needs more (the
        # range of OffsetOutOfRangeError, the header of UnsupportedVersionError) is not built from one.
        if cls.__module__ == __name__ and code is not None and cls.__init__ is SeglogError.__init__:
            _CLASSES.setdefault(code, cls)

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

    error_code = ErrorCode.CORRUPT_MESSAGE


class UnsupportedCompressionTypeError(CorruptRecordError):
    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class InvalidRecordError(SeglogError):
    """A well-formed batch the log refuses (no key on a compacted topic, ...)."""

    error_code = ErrorCode.INVALID_RECORD


class InvalidTimestampError(SeglogError):
    error_code = ErrorCode.INVALID_TIMESTAMP


class RecordTooLargeError(SeglogError):
    """A batch larger than ``max.message.bytes`` or a segment can hold."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


# --- producers, groups and transactions -------------------------------------


class CorruptSnapshotError(CorruptRecordError):
    """A producer state ``.snapshot`` file that fails its version, schema or CRC check."""


class OutOfOrderSequenceError(SeglogError):
    """A producer's batch whose sequence does not follow its last one."""

    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(SeglogError):
    """A batch or marker from an epoch older than the producer's current one."""

    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(SeglogError):
    """A producer inside a transaction wrote outside it (or the reverse)."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(SeglogError):
    """A transaction marker from a coordinator epoch older than the last one seen."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class IllegalStateTransitionError(SeglogError):
    """A group or transaction asked to move between states Kafka does not connect
    (Kafka's IllegalStateException: the broker answers UNKNOWN_SERVER_ERROR)."""


# --- protocol ----------------------------------------------------------------


class InvalidRequestError(SeglogError):
    """A request that is not valid. On the wire: bytes that are not a valid request of the API and
    version they claim — cut short, a length or count past the frame, a size prefix beyond
    ``socket.request.max.bytes`` (``position`` is the byte position in the frame, after the size
    prefix). At the storage API: an argument outside what its Kafka type holds — a negative offset,
    an epoch that is no int16, an unknown origin, a partition count that is no int32."""

    error_code = ErrorCode.INVALID_REQUEST


class InvalidResponseError(SeglogError):
    """Bytes a peer sent back that are not a valid response to the request they answer: a size
    prefix out of range, another request's correlation id, a body cut short or malformed
    (``position`` as for InvalidRequestError). The peer is at fault, not the request: Kafka has no
    wire code for it (its client drops the connection, as on a network failure), and a broker that
    meets it while serving a request answers UNKNOWN_SERVER_ERROR, as Kafka does for its
    ``SchemaException``."""


class LocalProtocolError(SeglogError):
    """This side used a connection against the protocol (a response out of order, bytes after
    the end of the stream): seglog's own fault, not the peer's."""


class UnsupportedVersionError(SeglogError):
    """An API key that is not declared, or a version outside its declared range. The header's
    fields are kept so the broker can answer (ApiVersions) or close the connection (the rest)."""

    error_code = ErrorCode.UNSUPPORTED_VERSION

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

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE

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

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class LogDirLockedError(KafkaStorageError):
    """Another process owns the log directory."""


class InvalidTopicError(SeglogError):
    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class TopicExistsError(SeglogError):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class UnknownTopicOrPartitionError(SeglogError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidPartitionsError(SeglogError):
    error_code = ErrorCode.INVALID_PARTITIONS


class InvalidConfigurationError(SeglogError):
    error_code = ErrorCode.INVALID_CONFIG


# --- cluster -----------------------------------------------------------------


class ZooKeeperError(SeglogError):
    """ZooKeeper could not be started, reached, or refused an operation; ``file`` names the znode."""


class InvalidZNodeError(SeglogError):
    """A znode whose data is not what Kafka writes there; ``file`` names it, ``position`` the bad byte."""


class ControllerMovedError(SeglogError):
    """A controller whose epoch is no longer the current one (another broker was elected)."""

    error_code = ErrorCode.STALE_CONTROLLER_EPOCH


class InvalidReplicationFactorError(SeglogError):
    error_code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(SeglogError):
    error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class IllegalStateChangeError(SeglogError):
    """A partition or replica moved between states the controller's state machines do not allow."""


class StaleBrokerEpochError(SeglogError):
    """A broker's request carries an epoch older than its current registration (KIP-380)."""

    error_code = ErrorCode.STALE_BROKER_EPOCH


class NotControllerError(ControllerMovedError):
    """A request for the controller reached a broker that is not (or no longer) the controller."""

    error_code = ErrorCode.NOT_CONTROLLER


class BrokerNotAvailableError(SeglogError):
    error_code = ErrorCode.BROKER_NOT_AVAILABLE


class FencedLeaderEpochError(SeglogError):
    error_code = ErrorCode.FENCED_LEADER_EPOCH


class InvalidUpdateVersionError(SeglogError):
    """An AlterPartition based on a partition epoch (state zkVersion) that is no longer the current one."""

    error_code = ErrorCode.INVALID_UPDATE_VERSION


class IneligibleReplicaError(SeglogError):
    """A new ISR naming a broker that is not alive (KIP-841)."""

    error_code = ErrorCode.INELIGIBLE_REPLICA


class NoReplicaOnlineError(SeglogError):
    """No assigned replica of a partition is alive to lead it."""

    error_code = ErrorCode.LEADER_NOT_AVAILABLE


# --- broker --------------------------------------------------------------------


class TopicDeletionDisabledError(SeglogError):
    error_code = ErrorCode.TOPIC_DELETION_DISABLED


class InvalidRequiredAcksError(SeglogError):
    error_code = ErrorCode.INVALID_REQUIRED_ACKS


class NotEnoughReplicasError(SeglogError):
    """An acks=all produce to a partition whose ISR is smaller than min.insync.replicas: nothing is written."""

    error_code = ErrorCode.NOT_ENOUGH_REPLICAS


class UnknownLeaderEpochError(SeglogError):
    """A client's leader epoch newer than the broker knows: the broker is behind."""

    error_code = ErrorCode.UNKNOWN_LEADER_EPOCH


class OffsetNotAvailableError(SeglogError):
    """A new leader's high watermark has not yet reached the start of its epoch: its offsets are not known yet."""

    error_code = ErrorCode.OFFSET_NOT_AVAILABLE


class UnknownTopicIdError(SeglogError):
    error_code = ErrorCode.UNKNOWN_TOPIC_ID


class NotLeaderOrFollowerError(SeglogError):
    """A request for a leader (a produce, a fetch) reached a replica that follows, or a broker that holds none."""

    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class CoordinatorNotAvailableError(SeglogError):
    """The coordinator's internal topic (``__consumer_offsets``, ``__transaction_state``) cannot serve yet."""

    error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class PreferredLeaderNotAvailableError(SeglogError):
    """A preferred-leader election found the preferred replica dead or out of the ISR."""

    error_code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


class EligibleLeadersNotAvailableError(SeglogError):
    """An unclean election found no live replica to lead."""

    error_code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


class ElectionNotNeededError(SeglogError):
    """The partition's leader is already the one the election would choose."""

    error_code = ErrorCode.ELECTION_NOT_NEEDED


class NoReassignmentInProgressError(SeglogError):
    """A reassignment was cancelled for a partition that is not being reassigned."""

    error_code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


# --- security ---------------------------------------------------------------------


class SaslAuthenticationError(SeglogError):
    """A SASL exchange that failed: its message is what the client is told (Kafka's
    ``SaslAuthenticationException``), and names no secret."""

    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnsupportedSaslMechanismError(SeglogError):
    error_code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(SeglogError):
    error_code = ErrorCode.ILLEGAL_SASL_STATE


# --- any other code ---------------------------------------------------------------


class ApiError(SeglogError):
    """An error of a Kafka code that has no class of its own here (REQUEST_TIMED_OUT,
    POLICY_VIOLATION, ...), raised or answered by a peer: the code is the instance's (``error_for``
    names it in the message when the peer gave none). Kafka's ApiError, as an exception."""

    def __init__(self, code: ErrorCode, message: str, **place: Any) -> None:
        self.error_code = code
        super().__init__(message, **place)


def error_class(code: int) -> type[SeglogError]:
    """The class a peer's answer of ``code`` is raised as: the first class above that states the code
    and is built from a message alone, else ApiError."""
    known = _known(code)
    return _CLASSES.get(known, ApiError) if known is not None else ApiError


def error_for(code: int, message: str | None = None, what: str | None = None) -> SeglogError:
    """The exception a peer's answer of ``code`` stands for, of ``error_class(code)``; a ApiError
    carries the code (UNKNOWN_SERVER_ERROR for one Kafka 3.9 does not define, as Kafka's clients read
    it). Its message is ``message`` (the peer's), or the code's name without one, after ``what: ``
    (what was asked) when given. NONE is no error: it has no exception."""
    if code == ErrorCode.NONE:
        raise ValueError("error code NONE (0) is no error")
    text = message or error_name(code)
    if what is not None:
        text = f"{what}: {text}"
    cls = error_class(code)
    if cls is not ApiError:
        return cls(text)
    known = _known(code)
    return ApiError(known if known is not None else ErrorCode.UNKNOWN_SERVER_ERROR, text)
