"""The client quota manager's arithmetic (security/quotas.py) under a fake clock: Kafka's
sampled Rate, its throttle-time formula and its precedence of quota entities."""

from __future__ import annotations

import pytest

from seglog.security.quotas import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    ClientQuotas,
    QuotaEntity,
    Rate,
    TokenBucket,
    quota_values,
    throttle_time_ms,
)


def test_a_first_burst_is_measured_over_the_whole_window() -> None:
    # 11 samples of 1 s: a first value counts as spread over the 10 whole windows before it
    rate = Rate(11, 1000)
    rate.record(1000, 0)
    assert rate.window_size(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    # 5.5 s on: 5 whole windows elapsed, 5 more counted as empty ones before -> 10.5 s
    assert rate.measure(5_500) == pytest.approx(1000 / 10.5)


def test_throttle_time_is_kafkas_formula() -> None:
    # X = (O - T) / T * W: 100 B/s observed against 50 over 10 s -> 10 s
    rate = Rate(11, 1000)
    rate.record(1000, 0)
    assert throttle_time_ms(rate, 50.0, 0) == 10_000
    assert throttle_time_ms(rate, 100.0, 0) == 0
    assert throttle_time_ms(rate, 50.0, 0, cap_ms=1000) == 1000


def test_old_samples_are_forgotten() -> None:
    rate = Rate(3, 1000)
    rate.record(600, 0)
    rate.record(600, 1000)
    assert rate.measure(1000) == pytest.approx(600.0)
    # three windows after the last value, the samples are reset: nothing is measured
    assert rate.measure(4000) == 0.0
    rate.record(200, 4000)
    assert rate.measure(4000) == pytest.approx(100.0)


@pytest.mark.parametrize("quota", [1000.0, 25_000.0, 1_000_000.0])
def test_a_client_that_waits_its_throttle_time_keeps_to_its_quota(quota: float) -> None:
    """A producer sending 16 KiB requests as fast as it is let, waiting out every throttle,
    moves within 10 % of its quota over a minute (after the first window)."""
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 11, 1)
    manager.update(QuotaEntity(None, "p1"), quota)
    now = sent = 0
    start = 20_000
    while now < start + 60_000:
        if now >= start:
            sent += 16_384
        now += manager.record("ANONYMOUS", "p1", 16_384, now) + 1
    assert sent / ((now - start) / 1000) == pytest.approx(quota, rel=0.10)


def test_precedence_of_entities() -> None:
    quotas = ClientQuotas()
    entities = [
        QuotaEntity(None, DEFAULT),
        QuotaEntity(None, "c1"),
        QuotaEntity(DEFAULT, None),
        QuotaEntity(DEFAULT, DEFAULT),
        QuotaEntity(DEFAULT, "c1"),
        QuotaEntity("alice", None),
        QuotaEntity("alice", DEFAULT),
        QuotaEntity("alice", "c1"),
    ]
    # each more specific entity, set in turn, takes over from those before it
    for rank, entity in enumerate(entities, start=1):
        quotas.apply(entity, {PRODUCER_BYTE_RATE: rank})
        assert quotas.produce.quota("alice", "c1") == rank, entity
    # and, removed from the most specific down, each gives way to the next
    for rank, entity in reversed(list(enumerate(entities, start=1))):
        assert quotas.produce.quota("alice", "c1") == rank
        quotas.apply(entity, {})
    assert quotas.produce.quota("alice", "c1") is None
    assert not quotas.produce.enabled


def test_quotas_are_per_key() -> None:
    quotas = ClientQuotas()
    quotas.apply(QuotaEntity("alice", None), {CONSUMER_BYTE_RATE: 10})
    quotas.apply(QuotaEntity(None, "c1"), {PRODUCER_BYTE_RATE: 20, REQUEST_PERCENTAGE: 50.5})
    assert quotas.fetch.quota("alice", "c1") == 10
    assert quotas.produce.quota("alice", "c1") == 20  # alice's entity sets no produce quota
    assert quotas.request.quota("bob", "c1") == 50.5
    assert quotas.fetch.quota("bob", "c1") is None


def test_a_users_quota_is_shared_by_its_client_ids() -> None:
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 11, 1)
    manager.update(QuotaEntity("alice", None), 100.0)
    assert manager.record("alice", "a", 900, 0) == 0  # 90 B/s
    assert manager.record("alice", "b", 200, 0) > 0  # 110 B/s together
    assert manager.record("bob", "a", 10**9, 0) == 0  # bob has no quota


def test_a_client_ids_quota_has_a_sensor_per_client_id() -> None:
    manager = ClientQuotaManager(CONSUMER_BYTE_RATE, 11, 1)
    manager.update(QuotaEntity(None, DEFAULT), 100.0)
    assert manager.record("ANONYMOUS", "a", 900, 0) == 0
    assert manager.record("ANONYMOUS", "b", 900, 0) == 0  # its own sensor
    assert manager.record("ANONYMOUS", "a", 200, 0) > 0


def test_unrecord_takes_a_value_back() -> None:
    manager = ClientQuotaManager(CONSUMER_BYTE_RATE, 11, 1)
    manager.update(QuotaEntity(None, "c"), 100.0)
    assert manager.record("u", "c", 2000, 0) > 0
    manager.unrecord("u", "c", 2000, 0)
    assert manager.record("u", "c", 500, 0) == 0


def test_request_time_throttles_are_capped_at_one_window() -> None:
    quotas = ClientQuotas(samples=11, window_s=2)
    quotas.apply(QuotaEntity(None, "c"), {REQUEST_PERCENTAGE: 1.0})
    assert quotas.request.record("u", "c", 1000.0, 0) == 2000


def test_a_changed_quota_applies_to_the_usage_so_far() -> None:
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 11, 1)
    manager.update(QuotaEntity(None, "c"), 1000.0)
    assert manager.record("u", "c", 5000, 0) == 0
    manager.update(QuotaEntity(None, "c"), 100.0)
    assert manager.record("u", "c", 1, 0) == 40_010  # (500.1 - 100) / 100 * 10 s


def test_idle_sensors_expire() -> None:
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 11, 1)
    manager.update(QuotaEntity(None, DEFAULT), 100.0)
    manager.record("u", "old", 1, 0)
    manager.record("u", "new", 1, 3_600_000)
    assert manager.record("u", "old", 1, 3_600_000) == 0
    assert len(manager._sensors) == 2


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (QuotaEntity("alice", None), "users/alice"),
        (QuotaEntity(None, "c1"), "clients/c1"),
        (QuotaEntity("alice", "c1"), "users/alice/clients/c1"),
        (QuotaEntity(DEFAULT, DEFAULT), "users/<default>/clients/<default>"),
        (QuotaEntity("CN=a b,O=x*y~", "id/1"), "users/CN%3Da%20b%2CO%3Dx%2Ay%7E/clients/id%2F1"),
        (QuotaEntity(None, None, "10.0.0.1"), "ips/10.0.0.1"),
        (QuotaEntity(None, None, "::1"), "ips/%3A%3A1"),
        (QuotaEntity(None, None, DEFAULT), "ips/<default>"),
    ],
)
def test_entity_paths_are_kafkas(entity: QuotaEntity, path: str) -> None:
    assert entity.path == path
    assert QuotaEntity.from_path(path) == entity


@pytest.mark.parametrize("path", ["topics/t", "users", "users/a/clients", "clients/a/users/b", ""])
def test_other_paths_are_not_entities(path: str) -> None:
    with pytest.raises(ValueError, match="quota entity"):
        QuotaEntity.from_path(path)


def test_quota_values_keep_only_quota_keys() -> None:
    stored = {"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=...", "request_percentage": "x"}
    assert quota_values(stored) == {PRODUCER_BYTE_RATE: 1024.0}


def test_the_running_total_is_the_samples_sum() -> None:
    """The shortcut past the samples (a total within the quota over the shortest window) sees
    what the samples hold, through recycled and purged samples and values taken back."""
    rate = Rate(3, 1000)
    for now, value in [(0, 500), (400, -200), (1200, 700), (2500, 100), (3100, 50), (9000, 10), (9500, -10)]:
        rate.record(value, now)
        total, _ = rate.sum_and_window(now)
        assert rate.total == pytest.approx(total)


def test_the_token_bucket_starts_full_lets_a_mutation_below_zero_and_refills() -> None:
    """KIP-599's bucket: a burst of quota x (samples - 1) windows, taken by partitions."""
    bucket = TokenBucket(burst_s=10.0)
    assert bucket.tokens(2.0, 1_000) == 20.0  # full at first
    bucket.record(25.0, 2.0, 1_000)  # more than it holds: let through, 5 below zero
    assert bucket.throttle_time_ms(2.0, 1_000) == 2_500  # refilled at 2 a second
    assert bucket.throttle_time_ms(2.0, 2_000) == 1_500
    assert bucket.throttle_time_ms(2.0, 3_500) == 0
    assert bucket.tokens(2.0, 100_000) == 20.0  # never past the burst
