"""The answers the cluster client reads, as the typed messages a broker's
bytes decode to: each error told once, through seglog.errors."""

from __future__ import annotations

import pytest

from seglog.client import (
    RetriableError,
    Unanswered,
    check,
    check_coordinator,
    check_partition,
    topics_by_name,
)
from seglog.errors import (
    ApiError,
    ErrorCode,
    NotLeaderOrFollowerError,
    RecordTooLargeError,
    TopicExistsError,
)
from seglog.protocol.message_data import FetchResponseData, MetadataResponseData, ProduceResponseData


def test_check_names_what_failed_and_the_brokers_message():
    check(ErrorCode.NONE, "cannot create topic t")  # no error: nothing raised
    with pytest.raises(TopicExistsError, match="cannot create topic t: already there"):
        check(ErrorCode.TOPIC_ALREADY_EXISTS, "cannot create topic t", "already there")


def test_a_coordinator_that_moves_or_loads_is_retried_any_other_error_raised():
    with pytest.raises(RetriableError, match="cannot describe group g: COORDINATOR_LOAD_IN_PROGRESS"):
        check_coordinator(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "cannot describe group g")
    with pytest.raises(ApiError, match="cannot describe group g: GROUP_AUTHORIZATION_FAILED") as e:
        check_coordinator(ErrorCode.GROUP_AUTHORIZATION_FAILED, "cannot describe group g")
    assert not isinstance(e.value, RetriableError)


def test_a_partitions_answer_is_returned_or_its_error_raised():
    fetched = FetchResponseData.PartitionData(partition_index=0, high_watermark=7)
    assert check_partition(fetched, "cannot fetch t-0") is fetched
    refused = ProduceResponseData.PartitionProduceResponse(
        index=0, error_code=ErrorCode.MESSAGE_TOO_LARGE, error_message="batch of 2 MB"
    )
    with pytest.raises(RecordTooLargeError, match="cannot produce to t-0: batch of 2 MB"):
        check_partition(refused, "cannot produce to t-0")
    gone = Unanswered(ErrorCode.NOT_LEADER_OR_FOLLOWER, "no leader answered within 1 s")
    with pytest.raises(NotLeaderOrFollowerError, match="t-0: NOT_LEADER_OR_FOLLOWER: no leader answered within 1 s"):
        check_partition(gone, "cannot produce to t-0")


def test_topics_by_name_leaves_out_an_answer_to_a_topic_id():
    Topic = MetadataResponseData.MetadataResponseTopic
    answer = MetadataResponseData(topics=[Topic(name="a"), Topic(name=None, error_code=ErrorCode.UNKNOWN_TOPIC_ID)])
    assert list(topics_by_name(answer)) == ["a"]
