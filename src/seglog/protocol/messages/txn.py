"""Idempotent and transactional producers: producer ids, transactions and their markers."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import BOOL, INT16, INT32, INT64, STRING, Api, Array, Field, Struct, array_of, by_topic

INIT_PRODUCER_ID = Api(
    ApiKey.INIT_PRODUCER_ID,
    "0-5",
    flexible="2+",
    request=Struct(
        Field("transactional_id", STRING, null="0+"),  # null: an idempotent producer
        Field("transaction_timeout_ms", INT32),
        Field("producer_id", INT64, "3+", default=-1),  # the current id and epoch, to bump (KIP-360)
        Field("producer_epoch", INT16, "3+", default=-1),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64, default=-1),
        Field("producer_epoch", INT16),
    ),
)


def _topics(name: str, versions: str) -> Field:
    return Field(
        name, array_of("AddPartitionsToTxnTopic", Field("name", STRING), Field("partitions", Array(INT32))), versions
    )


def _topic_results(name: str, versions: str) -> Field:
    return Field(
        name,
        array_of(
            "AddPartitionsToTxnTopicResult",
            Field("name", STRING),
            Field(
                "results_by_partition",
                array_of(
                    "AddPartitionsToTxnPartitionResult",
                    Field("partition_index", INT32),
                    Field("partition_error_code", INT16),
                ),
            ),
        ),
        versions,
    )


ADD_PARTITIONS_TO_TXN = Api(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    "0-5",
    flexible="3+",
    request=Struct(
        # v4+ batches transactions (brokers verifying for KIP-890); clients send v3 and below
        Field(
            "transactions",
            array_of(
                "AddPartitionsToTxnTransaction",
                Field("transactional_id", STRING),
                Field("producer_id", INT64),
                Field("producer_epoch", INT16),
                Field("verify_only", BOOL),
                _topics("topics", "0+"),
            ),
            "4+",
        ),
        Field("v3_and_below_transactional_id", STRING, "0-3"),
        Field("v3_and_below_producer_id", INT64, "0-3"),
        Field("v3_and_below_producer_epoch", INT16, "0-3"),
        _topics("v3_and_below_topics", "0-3"),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "4+"),
        Field(
            "results_by_transaction",
            array_of(
                "AddPartitionsToTxnResult", Field("transactional_id", STRING), _topic_results("topic_results", "0+")
            ),
            "4+",
        ),
        _topic_results("results_by_topic_v3_and_below", "0-3"),
    ),
)

ADD_OFFSETS_TO_TXN = Api(
    ApiKey.ADD_OFFSETS_TO_TXN,
    "0-4",
    flexible="3+",
    request=Struct(
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("group_id", STRING),
    ),
    response=Struct(Field("throttle_time_ms", INT32), Field("error_code", INT16)),
)

END_TXN = Api(
    ApiKey.END_TXN,
    "0-5",  # v5 (KIP-890) is marked unstable in the spec this was written from
    flexible="3+",
    request=Struct(
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("committed", BOOL),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64, "5+", default=-1),
        Field("producer_epoch", INT16, "5+", default=-1),
    ),
)

TXN_OFFSET_COMMIT = Api(
    ApiKey.TXN_OFFSET_COMMIT,
    "0-4",
    flexible="3+",
    request=Struct(
        Field("transactional_id", STRING),
        Field("group_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("generation_id", INT32, "3+", default=-1),
        Field("member_id", STRING, "3+"),
        Field("group_instance_id", STRING, "3+", null="3+", default=None),
        by_topic(
            "TxnOffsetCommitRequestTopic",
            "TxnOffsetCommitRequestPartition",
            Field("partition_index", INT32),
            Field("committed_offset", INT64),
            Field("committed_leader_epoch", INT32, "2+", default=-1),
            Field("committed_metadata", STRING, null="0+"),
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        by_topic(
            "TxnOffsetCommitResponseTopic",
            "TxnOffsetCommitResponsePartition",
            Field("partition_index", INT32),
            Field("error_code", INT16),
        ),
    ),
)

WRITE_TXN_MARKERS = Api(
    ApiKey.WRITE_TXN_MARKERS,
    "0-1",
    flexible="1+",
    request=Struct(
        Field(
            "markers",
            array_of(
                "WritableTxnMarker",
                Field("producer_id", INT64),
                Field("producer_epoch", INT16),
                Field("transaction_result", BOOL),  # true: commit
                Field(
                    "topics",
                    array_of("WritableTxnMarkerTopic", Field("name", STRING), Field("partition_indexes", Array(INT32))),
                ),
                Field("coordinator_epoch", INT32),
            ),
        ),
    ),
    response=Struct(
        Field(
            "markers",
            array_of(
                "WritableTxnMarkerResult",
                Field("producer_id", INT64),
                by_topic(
                    "WritableTxnMarkerTopicResult",
                    "WritableTxnMarkerPartitionResult",
                    Field("partition_index", INT32),
                    Field("error_code", INT16),
                ),
            ),
        ),
    ),
)

DESCRIBE_TRANSACTIONS = Api(
    ApiKey.DESCRIBE_TRANSACTIONS,
    "0",
    flexible="0+",
    request=Struct(Field("transactional_ids", Array(STRING))),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field(
            "transaction_states",
            array_of(
                "TransactionState",
                Field("error_code", INT16),
                Field("transactional_id", STRING),
                Field("transaction_state", STRING),
                Field("transaction_timeout_ms", INT32),
                Field("transaction_start_time_ms", INT64),
                Field("producer_id", INT64),
                Field("producer_epoch", INT16),
                Field("topics", array_of("TopicData", Field("topic", STRING), Field("partitions", Array(INT32)))),
            ),
        ),
    ),
)

LIST_TRANSACTIONS = Api(
    ApiKey.LIST_TRANSACTIONS,
    "0-1",
    flexible="0+",
    request=Struct(
        Field("state_filters", Array(STRING)),
        Field("producer_id_filters", Array(INT64)),
        Field("duration_filter", INT64, "1+", default=-1),  # KIP-994: only transactions running longer
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("unknown_state_filters", Array(STRING)),
        Field(
            "transaction_states",
            array_of(
                "TransactionState",
                Field("transactional_id", STRING),
                Field("producer_id", INT64),
                Field("transaction_state", STRING),
            ),
        ),
    ),
)
