"""What every layer says in Kafka's words (Kafka's ``org.apache.kafka.common``): a topic
partition, the topic id that names no topic, and the internal topics."""

from __future__ import annotations

import uuid
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# "no topic id": what a client sends when it names a topic by name, and gets for an unknown one
ZERO_UUID = uuid.UUID(int=0)

# the coordinators' topics (Kafka's ``Topic.GROUP_METADATA_TOPIC_NAME``, ``TRANSACTION_STATE_TOPIC_NAME``)
GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka 4's share groups' topic: a log dir Kafka 4 wrote may hold it
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
