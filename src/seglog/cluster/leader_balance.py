"""The preferred-leader imbalance the controller checks every ``leader.imbalance.check.interval.seconds``.

Per broker b (Kafka's ``checkAndTriggerAutoLeaderRebalance``)::

    ratio(b) = partitions whose preferred replica is b but whose leader is not b
               -----------------------------------------------------------------
                       partitions whose preferred replica is b

The preferred replica is the first of the assignment. A partition with no
known leader state counts as balanced. Above ``leader.imbalance.per.broker.percentage``
(strictly), b's misplaced partitions get a preferred replica election, those
whose preferred replica can lead now (alive and in the ISR) and whose topic is
not being deleted.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ..common import TopicPartition
from ..errors import InvalidConfigurationError
from .leader_election import preferred_replica_partition_leader_election
from .znodes import LeaderAndIsr


def not_preferred_partitions(
    assignments: Mapping[TopicPartition, Sequence[int]], leaders: Mapping[TopicPartition, LeaderAndIsr]
) -> dict[int, tuple[list[TopicPartition], int]]:
    """Preferred broker -> (its partitions led by another broker, how many partitions prefer it)."""
    out: dict[int, tuple[list[TopicPartition], int]] = {}
    for tp, replicas in assignments.items():
        if not replicas:
            continue
        preferred = replicas[0]
        misplaced, total = out.get(preferred, ([], 0))
        state = leaders.get(tp)
        if state is not None and state.leader != preferred:
            misplaced.append(tp)
        out[preferred] = (misplaced, total + 1)
    return out


def leader_imbalance_ratios(
    assignments: Mapping[TopicPartition, Sequence[int]], leaders: Mapping[TopicPartition, LeaderAndIsr]
) -> dict[int, float]:
    """Preferred broker -> its leader imbalance ratio (0.0 to 1.0)."""
    return {
        b: len(misplaced) / total for b, (misplaced, total) in not_preferred_partitions(assignments, leaders).items()
    }


def partitions_to_rebalance(
    assignments: Mapping[TopicPartition, Sequence[int]],
    leaders: Mapping[TopicPartition, LeaderAndIsr],
    live_brokers: Collection[int],
    imbalance_percentage: int,
    topics_being_deleted: Collection[str] = (),
) -> set[TopicPartition]:
    """The partitions an automatic preferred replica election moves now."""
    if imbalance_percentage < 0:
        raise InvalidConfigurationError(
            f"invalid value {imbalance_percentage} for leader.imbalance.per.broker.percentage: below 0"
        )
    live = set(live_brokers)
    considered = {tp: r for tp, r in assignments.items() if tp.topic not in topics_being_deleted}
    chosen: set[TopicPartition] = set()
    for misplaced, total in not_preferred_partitions(considered, leaders).values():
        if len(misplaced) / total <= imbalance_percentage / 100:
            continue
        for tp in misplaced:
            replicas = considered[tp]
            alive = [r for r in replicas if r in live]
            if preferred_replica_partition_leader_election(replicas, leaders[tp].isr, alive) is not None:
                chosen.add(tp)
    return chosen
