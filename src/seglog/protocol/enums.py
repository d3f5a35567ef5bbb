"""The enumerations that request and response fields carry as bare integers, with Kafka's names:
the broker answers with them, the tools ask with them."""

from __future__ import annotations

from enum import IntEnum


class ConfigResourceType(IntEnum):
    """A DescribeConfigs / AlterConfigs resource's type (Kafka's ``ConfigResource.Type``; seglog
    describes and alters the first two)."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(IntEnum):
    """Where a described config's value comes from (Kafka's ``DescribeConfigsResponse.ConfigSource``),
    named as the admin client's ``ConfigEntry.ConfigSource``, whose names kafka-configs.sh prints."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7  # KIP-714
    GROUP_CONFIG = 8  # KIP-848


def config_source_name(source: int) -> str:
    """A described config's source by Kafka's name; a newer broker's unknown one by its number."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


class AlterConfigOpType(IntEnum):
    """An IncrementalAlterConfigs operation (Kafka's ``AlterConfigOp.OpType``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class CoordinatorType(IntEnum):
    """FindCoordinator's key type (Kafka's ``FindCoordinatorRequest.CoordinatorType``)."""

    GROUP = 0
    TRANSACTION = 1
