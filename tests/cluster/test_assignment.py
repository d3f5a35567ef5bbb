"""Replica assignment: outputs worked out by hand from AdminUtils' algorithm, the rack spread, the errors."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.cluster.assignment import (
    BrokerMetadata,
    assign_replicas_to_brokers,
    new_partitions_assignment,
    rack_alternated_brokers,
)
from seglog.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


def racked(**racks: str) -> list[BrokerMetadata]:
    return [BrokerMetadata(int(name[1:]), rack) for name, rack in racks.items()]


@pytest.mark.parametrize(
    ("ids", "partitions", "rf", "start", "shift", "expected"),
    [
        # 5 brokers, RF 3, start 0 (the shift follows the fixed start): the second round shifts followers by one
        (
            (0, 1, 2, 3, 4),
            10,
            3,
            0,
            None,
            {
                0: (0, 1, 2),
                1: (1, 2, 3),
                2: (2, 3, 4),
                3: (3, 4, 0),
                4: (4, 0, 1),
                5: (0, 2, 3),
                6: (1, 3, 4),
                7: (2, 4, 0),
                8: (3, 0, 1),
                9: (4, 1, 2),
            },
        ),
        # ids that are not indexes, given unsorted: positions count in the sorted list
        ((3, 1, 2), 6, 2, 1, 0, {0: (2, 3), 1: (3, 1), 2: (1, 2), 3: (2, 1), 4: (3, 2), 5: (1, 3)}),
        # start 2, shift 3: (shift + j) % (n - 1) wraps; partition 4 begins the second round (shift 4)
        ((0, 1, 2, 3), 5, 3, 2, 3, {0: (2, 3, 0), 1: (3, 0, 1), 2: (0, 1, 2), 3: (1, 2, 3), 4: (2, 0, 1)}),
        # RF 1: leaders only, round-robin from the start index
        ((5, 7), 3, 1, 1, None, {0: (7,), 1: (5,), 2: (7,)}),
        # RF = brokers: every broker holds every partition
        ((0, 1, 2), 4, 3, 0, 0, {0: (0, 1, 2), 1: (1, 2, 0), 2: (2, 0, 1), 3: (0, 2, 1)}),
    ],
)
def test_rack_unaware_known_outputs(ids, partitions, rf, start, shift, expected) -> None:
    got = assign_replicas_to_brokers(brokers(*ids), partitions, rf, start_index=start, replica_shift=shift)
    assert got == expected


def test_random_start_is_one_of_the_fixed_ones() -> None:
    # unfixed start and shift are drawn from [0, n): the result is one of the n * n fixed assignments
    metadata = brokers(0, 1, 2, 3)
    possible = [
        assign_replicas_to_brokers(metadata, 8, 3, start_index=s, replica_shift=h) for s in range(4) for h in range(4)
    ]
    seen = []
    for seed in range(30):
        got = assign_replicas_to_brokers(metadata, 8, 3, rng=random.Random(seed))
        assert got in possible
        seen.append(possible.index(got))
    assert len(set(seen)) > 1  # and it is not always the same


def test_rack_alternated_list() -> None:
    # AdminUtils' example: 0 rack1, 1 rack3, 2 rack3, 3 rack2, 4 rack2, 5 rack1
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({0: "a", 1: "a", 2: "a", 3: "b"}) == [0, 3, 1, 2]


def test_rack_aware_known_outputs() -> None:
    metadata = racked(b0="rack1", b1="rack3", b2="rack3", b3="rack2", b4="rack2", b5="rack1")
    got = assign_replicas_to_brokers(metadata, 7, 3, start_index=0)
    # the first round walks the alternated list; partition 6 starts the next with followers shifted
    assert got == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


def test_rack_aware_skips_a_rack_that_has_a_replica() -> None:
    # three brokers in rack a, one in b: a follower in a's rack is skipped while b has none
    metadata = racked(b0="a", b1="a", b2="a", b3="b")
    got = assign_replicas_to_brokers(metadata, 4, 2, start_index=0)
    assert got == {0: (0, 3), 1: (3, 1), 2: (1, 3), 3: (2, 3)}


def test_rack_aware_more_replicas_than_racks() -> None:
    # once every rack has a replica, brokers are taken round-robin again (still no broker twice)
    metadata = racked(b0="a", b1="a", b2="b", b3="b")
    assert assign_replicas_to_brokers(metadata, 2, 3, start_index=0) == {0: (0, 2, 1), 1: (2, 1, 3)}


@settings(max_examples=150, deadline=None)
@given(
    racks=st.lists(st.sampled_from("abcde"), min_size=1, max_size=12),
    data=st.data(),
)
def test_rack_aware_spread(racks: list[str], data: st.DataObject) -> None:
    metadata = [BrokerMetadata(i * 3 + 1, rack) for i, rack in enumerate(racks)]
    n_racks = len(set(racks))
    rf = data.draw(st.integers(1, len(metadata)))
    partitions = data.draw(st.integers(1, 40))
    start = data.draw(st.integers(0, len(metadata) - 1))
    got = assign_replicas_to_brokers(metadata, partitions, rf, start_index=start)
    rack_of = {b.id: b.rack for b in metadata}
    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == rf and len(set(replicas)) == rf  # never a broker twice
        on_racks = Counter(rack_of[r] for r in replicas)
        if rf <= n_racks:
            assert max(on_racks.values()) == 1  # distinct racks
        else:
            assert len(on_racks) == n_racks  # every rack has one


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 9), data=st.data())
def test_rack_unaware_spread(n: int, data: st.DataObject) -> None:
    rf = data.draw(st.integers(1, n))
    rounds = data.draw(st.integers(1, 4))
    got = assign_replicas_to_brokers(brokers(*range(n)), n * rounds, rf, rng=random.Random(data.draw(st.integers())))
    leaders = Counter(r[0] for r in got.values())
    assert set(leaders.values()) == {rounds}  # leaders spread evenly over whole rounds
    assert all(len(set(r)) == rf for r in got.values())


def test_adding_partitions_starts_at_the_leader_of_partition_0() -> None:
    existing = {0: (1, 2), 1: (2, 0)}
    # partition 0 led by broker 1 (index 1): start 1 and shift 1, partition ids from 2
    assert new_partitions_assignment(existing, brokers(0, 1, 2), 4) == {2: (0, 2), 3: (1, 2)}
    # the same as assigning 4 partitions from start 1 and keeping the last two
    whole = assign_replicas_to_brokers(brokers(0, 1, 2), 4, 2, start_index=1)
    assert new_partitions_assignment(existing, brokers(0, 1, 2), 4) == {2: whole[2], 3: whole[3]}


def test_adding_partitions_when_the_leader_of_partition_0_is_gone() -> None:
    # broker 5 left: start at the first broker with a larger id, or 0 when there is none
    assert new_partitions_assignment({0: (5,)}, brokers(2, 7, 9), 2) == {1: (9,)}
    assert new_partitions_assignment({0: (10,)}, brokers(2, 7, 9), 2) == {1: (7,)}


def test_adding_partitions_errors() -> None:
    with pytest.raises(InvalidPartitionsError, match="can only be increased"):
        new_partitions_assignment({0: (1,), 1: (2,)}, brokers(1, 2), 2, topic="t")
    with pytest.raises(InvalidReplicaAssignmentError, match="partition 0 is missing"):
        new_partitions_assignment({1: (1,)}, brokers(1, 2), 3)


@pytest.mark.parametrize(
    ("metadata", "partitions", "rf", "error", "message"),
    [
        (brokers(0, 1, 2), 3, 4, InvalidReplicationFactorError, "larger than available brokers: 3"),
        (brokers(0, 1, 2), 3, 0, InvalidReplicationFactorError, "must be larger than 0"),
        (brokers(0, 1, 2), 3, -1, InvalidReplicationFactorError, "must be larger than 0"),
        (brokers(0, 1, 2), 0, 1, InvalidPartitionsError, "must be larger than 0"),
        (brokers(0, 1, 2), -5, 1, InvalidPartitionsError, "must be larger than 0"),
        ([], 1, 1, InvalidReplicationFactorError, "available brokers: 0"),
        (brokers(0, 1, 1), 1, 1, InvalidReplicaAssignmentError, "more than once"),
        (
            [BrokerMetadata(0, "a"), BrokerMetadata(1), BrokerMetadata(2, "b")],
            3,
            2,
            InvalidReplicaAssignmentError,
            "Not all brokers have rack information.*1",
        ),
    ],
)
def test_errors(metadata, partitions, rf, error, message) -> None:
    with pytest.raises(error, match=message) as info:
        assign_replicas_to_brokers(metadata, partitions, rf, start_index=0)
    assert info.value.error_code in (37, 38, 39)


def test_error_codes_are_kafkas() -> None:
    assert InvalidPartitionsError.error_code == 37
    assert InvalidReplicationFactorError.error_code == 38
    assert InvalidReplicaAssignmentError.error_code == 39


def test_negative_start_or_shift_is_refused() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="start index"):
        assign_replicas_to_brokers(brokers(0, 1), 1, 1, start_index=-1)
    with pytest.raises(InvalidReplicaAssignmentError, match="replica shift"):
        assign_replicas_to_brokers(brokers(0, 1), 1, 1, start_index=0, replica_shift=-2)
