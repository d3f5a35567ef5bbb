"""``throttling``: a handler's time on the loop, its waits left out (``timed``, under a fake
clock that moves 10 ns at each reading: what a step costs is what the test says), and a
consumer's fetch cut to its quota before the handler runs."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from seglog.broker.request_context import RequestContext
from seglog.broker.throttling import Throttler, timed
from seglog.protocol import ApiKey, Request
from seglog.protocol.header import RequestHeader
from seglog.protocol.message_data import FetchRequestData, ProduceRequestData
from seglog.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaEntity,
)


def ticking() -> Any:
    return itertools.count(0, 10).__next__


async def two_waits(loop: asyncio.AbstractEventLoop) -> str:
    for _ in range(2):
        waited = loop.create_future()
        loop.call_later(0.05, waited.set_result, None)
        await waited
    return "done"


def test_only_the_steps_are_counted() -> None:
    async def main() -> tuple[Any, int]:
        return await timed(two_waits(asyncio.get_running_loop()), ticking())

    # three steps (before, between and after the two waits), each two readings of the clock
    assert asyncio.run(main()) == ("done", 30)


def test_an_error_and_a_cancellation_reach_the_handler() -> None:
    cleaned = []

    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad request")

    async def waiting() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append(True)

    async def main() -> None:
        with pytest.raises(ValueError, match="bad request"):
            await timed(failing(), ticking())
        task = asyncio.ensure_future(timed(waiting(), ticking()))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == [True]


def fetch(max_bytes: int, replica_id: int = -1, client_id: str = "c") -> Request:
    body = FetchRequestData(replica_id=replica_id, max_bytes=max_bytes)
    return Request(RequestHeader(ApiKey.FETCH, 12, 1, client_id), body, 0)


def test_a_consumers_fetch_asks_for_no_more_than_its_quota_lets_through() -> None:
    """Kafka's getMaxValueInQuotaWindow: the quota times the window's whole samples."""
    quotas = ClientQuotas(samples=11, window_s=1)
    quotas.apply(QuotaEntity(None, "c"), {CONSUMER_BYTE_RATE: 1000})
    throttler = Throttler(quotas)
    who = RequestContext("c", "/127.0.0.1")
    capped, follower, other = fetch(50 * 1024 * 1024), fetch(50 * 1024 * 1024, replica_id=2), fetch(500)
    for request in (capped, follower, other):
        assert throttler.before(request, who) is False  # no request quota: its time is not wanted
    assert capped.body.max_bytes == 10_000
    assert follower.body.max_bytes == 50 * 1024 * 1024  # a follower's fetch has no client quota
    assert other.body.max_bytes == 500  # already below
    quotas.apply(QuotaEntity(None, "c"), {REQUEST_PERCENTAGE: 10})
    assert throttler.before(fetch(1), who) is True


def produce(acks: int, size: int = 100) -> Request:
    """A Produce that came as ``size`` bytes (its records a few of them)."""
    data = ProduceRequestData.PartitionProduceData(index=0, records=b"x" * 10)
    topic = ProduceRequestData.TopicProduceData(name="t", partition_data=[data])
    body = ProduceRequestData(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[topic])
    return Request(RequestHeader(ApiKey.PRODUCE, 9, 1, "c"), body, size)


def test_an_acks_0_produce_is_held_to_its_byte_rate_not_to_the_request_quota() -> None:
    """Kafka's handleProduceRequest: "the request quota is not enforced if acks == 0" (its
    handler time is not recorded); the produce byte rate is, answer or not."""
    quotas = ClientQuotas(samples=11, window_s=1)
    quotas.apply(QuotaEntity(None, "c"), {REQUEST_PERCENTAGE: 10})
    throttler = Throttler(quotas, clock=lambda: 0)
    who = RequestContext("c", "/127.0.0.1")
    fire_and_forget, answered = produce(0), produce(1)
    assert throttler.before(fire_and_forget, who) is False  # its handler is not timed: nothing to count
    assert throttler.throttle(fire_and_forget, None, 0, who) == 0
    assert throttler.before(answered, who) is True
    # 10 s of handler time in the first sample: 1.1 s a second against 10 % of one
    assert throttler.throttle(answered, None, 10**10, who) > 0


@pytest.mark.parametrize("acks", [0, 1])
def test_a_produce_counts_its_requests_bytes_against_the_byte_rate(acks: int) -> None:
    """Kafka's ``request.sizeInBytes``, header and body, not its records' bytes alone (10
    here): 100 bytes in the first sample, measured over the 10 s window before it, are 10 B/s
    against 5, throttled (10 - 5) / 5 x 10 s; an acks=0 produce too, answer or not."""
    quotas = ClientQuotas(samples=11, window_s=1)
    quotas.apply(QuotaEntity(None, "c"), {PRODUCER_BYTE_RATE: 5})
    throttler = Throttler(quotas, clock=lambda: 0)
    assert throttler.throttle(produce(acks, size=100), None, 0, RequestContext("c", "/127.0.0.1")) == 10_000
