"""The table of Kafka's error codes (``seglog.errors.ErrorCode``) against Kafka 3.9's ``Errors.java``,
and the classes it gives each code."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import seglog
from seglog import errors
from seglog.errors import (
    ApiError,
    ErrorCode,
    OffsetOutOfRangeError,
    SeglogError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_class,
    error_for,
    error_name,
)

# Checked by hand against Errors.java of Kafka 3.9 (clients/src/main/java/org/apache/kafka/common/protocol)
KAFKA_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR",
    0: "NONE",
    2: "CORRUPT_MESSAGE",
    6: "NOT_LEADER_OR_FOLLOWER",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    17: "INVALID_TOPIC_EXCEPTION",
    42: "INVALID_REQUEST",
    49: "INVALID_PRODUCER_ID_MAPPING",
    50: "INVALID_TRANSACTION_TIMEOUT",
    55: "OPERATION_NOT_ATTEMPTED",
    64: "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
    68: "NON_EMPTY_GROUP",
    90: "PRODUCER_FENCED",
    99: "POSITION_OUT_OF_RANGE",
    105: "TRANSACTIONAL_ID_NOT_FOUND",
    106: "FETCH_SESSION_TOPIC_ID_ERROR",
    114: "MISMATCHED_ENDPOINT_TYPE",
    115: "UNSUPPORTED_ENDPOINT_TYPE",
    124: "FENCED_STATE_EPOCH",
    127: "VOTER_NOT_FOUND",
}

# whether the exception class of clients/.../common/errors extends RetriableException (3.9)
RETRIABLE = {
    ErrorCode.CORRUPT_MESSAGE,  # CorruptRecordException extends RetriableException
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # through InvalidMetadataException
    ErrorCode.NOT_LEADER_OR_FOLLOWER,  # through NotLeaderForPartitionException, InvalidMetadataException
    ErrorCode.REQUEST_TIMED_OUT,  # TimeoutException
    ErrorCode.NETWORK_EXCEPTION,  # through InvalidMetadataException
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.KAFKA_STORAGE_ERROR,  # through InvalidMetadataException
    ErrorCode.ELECTION_NOT_NEEDED,  # through InvalidMetadataException
    ErrorCode.UNSTABLE_OFFSET_COMMIT,
    ErrorCode.INCONSISTENT_TOPIC_ID,  # through InvalidMetadataException
    ErrorCode.SHARE_SESSION_NOT_FOUND,
}
NOT_RETRIABLE = {
    ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.NONE,
    ErrorCode.OFFSET_OUT_OF_RANGE,  # InvalidOffsetException extends ApiException
    ErrorCode.BROKER_NOT_AVAILABLE,
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.UNKNOWN_PRODUCER_ID,  # through OutOfOrderSequenceException
    ErrorCode.INVALID_RECORD,  # org.apache.kafka.common.InvalidRecordException extends ApiException
    ErrorCode.PRODUCER_FENCED,
    ErrorCode.STALE_MEMBER_EPOCH,
    ErrorCode.TRANSACTION_ABORTABLE,
}


def test_every_code_of_kafka_3_9_once() -> None:
    codes = [int(c) for c in ErrorCode]
    assert codes == list(range(-1, 128))  # no gap, no alias: each code once, in order
    assert len(ErrorCode.__members__) == len(codes)


def test_names_are_kafkas() -> None:
    assert {code: ErrorCode(code).name for code in KAFKA_NAMES} == KAFKA_NAMES


def test_retriable_as_kafkas_exceptions() -> None:
    assert {c for c in RETRIABLE | NOT_RETRIABLE if c.retriable} == RETRIABLE
    assert sum(c.retriable for c in ErrorCode) == 31


def test_protocol_reexports_the_same_table() -> None:
    from seglog.protocol import ErrorCode as protocols

    assert protocols is ErrorCode


def _subclasses(cls: type) -> list[type]:
    return [s for c in cls.__subclasses__() for s in (c, *_subclasses(c))]


def test_every_error_class_states_a_code_of_the_table() -> None:
    for module in pkgutil.walk_packages(seglog.__path__, "seglog."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    classes = [SeglogError, *_subclasses(SeglogError)]
    assert len(classes) > 50
    for cls in classes:
        if cls is not ApiError:  # its code is its instance's
            assert type(cls.error_code) is ErrorCode, cls


def test_each_code_raised_as_its_class() -> None:
    own = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, SeglogError)]
    first: dict[ErrorCode, type[SeglogError]] = {}
    for cls in own[1:]:  # in the order the module defines them, after SeglogError (no peer's class)
        if "error_code" in vars(cls) and cls.__init__ is SeglogError.__init__:
            first.setdefault(cls.error_code, cls)
    assert error_class(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) is UnknownTopicOrPartitionError
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        cls = error_class(code)
        assert cls is first.get(code, ApiError)
        e = error_for(code, "why")
        assert type(e) is cls and e.error_code is code and str(e) == "why"


def test_classes_that_need_more_than_a_message_are_not_built_from_an_answer() -> None:
    for cls in (OffsetOutOfRangeError, UnsupportedVersionError):
        e = error_for(cls.error_code)
        assert type(e) is ApiError and e.error_code is cls.error_code


def test_an_answer_without_a_message_is_named() -> None:
    e = error_for(3, what="topic t")
    assert type(e) is UnknownTopicOrPartitionError and str(e) == "topic t: UNKNOWN_TOPIC_OR_PARTITION"
    e = error_for(7, None, "cannot delete records")
    assert type(e) is ApiError and e.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert str(e) == "cannot delete records: REQUEST_TIMED_OUT"
    assert str(error_for(7, "Request timed out after 30 s")) == "Request timed out after 30 s"


def test_a_code_kafka_does_not_define_is_an_unknown_server_error() -> None:
    e = error_for(4242)
    assert type(e) is ApiError and e.error_code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert "4242" in str(e) and error_name(4242).startswith("UNKNOWN_SERVER_ERROR")
    assert error_class(4242) is ApiError


def test_none_is_no_error() -> None:
    with pytest.raises(ValueError, match="NONE"):
        error_for(ErrorCode.NONE)
