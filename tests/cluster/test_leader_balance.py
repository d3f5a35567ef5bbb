"""The leader imbalance ratio per broker and the partitions an automatic rebalance elects."""

from __future__ import annotations

import pytest

from seglog.cluster.leader_balance import leader_imbalance_ratios, partitions_to_rebalance
from seglog.cluster.znodes import LeaderAndIsr
from seglog.common import TopicPartition
from seglog.errors import InvalidConfigurationError


def tp(p: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, p)


def led(leader: int, isr: tuple[int, ...] = (1, 2, 3)) -> LeaderAndIsr:
    return LeaderAndIsr(leader, 0, isr)


# 10 partitions preferring broker 1, 5 preferring broker 2; broker 1 leads 8 of its own, broker 2 all of its own
ASSIGNMENTS = {tp(p): (1, 2, 3) for p in range(10)} | {tp(p): (2, 3, 1) for p in range(10, 15)}


def test_ratio_is_misplaced_over_partitions_preferring_the_broker() -> None:
    leaders = {tp(p): led(1) for p in range(8)} | {tp(8): led(2), tp(9): led(3)}
    leaders |= {tp(p): led(2) for p in range(10, 15)}
    assert leader_imbalance_ratios(ASSIGNMENTS, leaders) == {1: 0.2, 2: 0.0}
    # not the seed article's partitions / imbalanced (which would be 5.0 for broker 1)


def test_partitions_without_leader_state_count_as_balanced() -> None:
    leaders = {tp(0): led(2)}
    assert leader_imbalance_ratios(ASSIGNMENTS, leaders) == {1: 0.1, 2: 0.0}


def test_rebalance_only_above_the_threshold() -> None:
    one_off = {tp(p): led(1) for p in range(9)} | {tp(9): led(2)} | {tp(p): led(2) for p in range(10, 15)}
    # 1 of 10 = 10 %: not above 10
    assert partitions_to_rebalance(ASSIGNMENTS, one_off, {1, 2, 3}, 10) == set()
    assert partitions_to_rebalance(ASSIGNMENTS, one_off, {1, 2, 3}, 9) == {tp(9)}
    two_off = one_off | {tp(8): led(3)}
    assert partitions_to_rebalance(ASSIGNMENTS, two_off, {1, 2, 3}, 10) == {tp(8), tp(9)}


def test_rebalance_skips_partitions_whose_preferred_replica_cannot_lead() -> None:
    leaders = {tp(p): led(2) for p in range(15)}
    leaders[tp(3)] = led(2, isr=(2, 3))  # broker 1 is out of this ISR
    chosen = partitions_to_rebalance(ASSIGNMENTS, leaders, {1, 2, 3}, 10)
    assert chosen == {tp(p) for p in range(10)} - {tp(3)}
    assert partitions_to_rebalance(ASSIGNMENTS, leaders, {2, 3}, 10) == set()  # broker 1 is down


def test_rebalance_leaves_topics_being_deleted_alone() -> None:
    assignments = {tp(0, "a"): (1, 2), tp(0, "b"): (1, 2)}
    leaders = {tp(0, "a"): led(2), tp(0, "b"): led(2)}
    assert partitions_to_rebalance(assignments, leaders, {1, 2}, 10, topics_being_deleted={"a"}) == {tp(0, "b")}


def test_broker_0_is_a_broker_like_the_others() -> None:
    assignments = {tp(0): (0, 1), tp(1): (0, 1)}
    leaders = {tp(0): led(1, (0, 1)), tp(1): led(0, (0, 1))}
    assert partitions_to_rebalance(assignments, leaders, {0, 1}, 10) == {tp(0)}


def test_negative_percentage_is_refused() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"leader.imbalance.per.broker.percentage"):
        partitions_to_rebalance({}, {}, set(), -1)
