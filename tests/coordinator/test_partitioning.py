"""Group and transactional ids land on Kafka's partitions: Java's String.hashCode, Utils.abs.

The expected hashes were printed by Java 17's String.hashCode."""

from __future__ import annotations

import pytest

from seglog.coordinator.partitioning import java_string_hash, partition_for
from seglog.errors import InvalidConfigurationError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),  # Java's textbook collision with "BB"
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),  # hashes to Integer.MIN_VALUE
        ("console-consumer-12345", 158455506),
        ("\U0001f600", 1772899),  # a surrogate pair: two UTF-16 units, 0xD83D 0xDE00
        ("é", 233),
    ],
)
def test_java_string_hash_matches_java(text, expected):
    assert java_string_hash(text) == expected


def test_partition_for_uses_kafkas_abs():
    # Math.abs(Integer.MIN_VALUE) stays negative; Kafka's Utils.abs makes it 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("console-consumer-12345", 50) == 158455506 % 50


def test_partition_for_refuses_no_partitions():
    with pytest.raises(InvalidConfigurationError, match="at least 1 partition"):
        partition_for("g", 0)


def test_an_id_is_hashed_once_then_looked_up():
    """Every group request asks for its group's partition: the Java hash (a Python loop
    over the id) runs once per id, and the partition once per id and partition count;
    later asks are answered from the caches, alike."""
    group_id = "test_an_id_is_hashed_once-group"
    hashed, placed = java_string_hash.cache_info(), partition_for.cache_info()
    first = partition_for(group_id, 50)
    assert [partition_for(group_id, 50) for _ in range(3)] == [first] * 3
    assert partition_for(group_id, 7) == java_string_hash(group_id) % 7  # another count: the hash's cache
    after_hashed, after_placed = java_string_hash.cache_info(), partition_for.cache_info()
    assert (after_placed.misses - placed.misses, after_placed.hits - placed.hits) == (2, 3)
    assert (after_hashed.misses - hashed.misses, after_hashed.hits - hashed.hits) == (1, 2)
