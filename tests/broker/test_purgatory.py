"""The purgatory: operations complete when an event brings enough, or at their deadline."""

from __future__ import annotations

import asyncio
from typing import Any

from seglog.broker.purgatory import DelayedOperation, Purgatory


class Counting(DelayedOperation[tuple[bool, int]]):
    def __init__(self, delay_ms: int, need: int) -> None:
        super().__init__(delay_ms)
        self.need = need
        self.have = 0

    def try_complete(self, event: Any) -> bool:
        self.have += event
        return self.have >= self.need and self.force_complete()

    def on_complete(self, expired: bool) -> tuple[bool, int]:
        return expired, self.have


def test_completes_on_events_of_its_keys_only() -> None:
    async def scenario() -> tuple[bool, int]:
        purgatory = Purgatory("test")
        op = Counting(60_000, need=10)
        waiting = asyncio.ensure_future(purgatory.wait(op, ["a", "b"]))
        await asyncio.sleep(0)
        assert purgatory.check_and_complete("c", 100) == 0  # not watched
        assert purgatory.check_and_complete("a", 4) == 0
        assert purgatory.check_and_complete("b", 6) == 1
        result = await waiting
        assert len(purgatory) == 0  # unwatched from every key
        return result

    assert asyncio.run(scenario()) == (False, 10)


def test_expires_at_its_deadline() -> None:
    async def scenario() -> tuple[bool, int]:
        purgatory = Purgatory("test")
        return await purgatory.wait(Counting(10, need=10), ["a"])

    assert asyncio.run(scenario()) == (True, 0)


def test_complete_all_answers_every_waiter() -> None:
    async def scenario() -> list[tuple[bool, int]]:
        purgatory = Purgatory("test")
        waiting = [asyncio.ensure_future(purgatory.wait(Counting(60_000, need=1), [k])) for k in "xyz"]
        await asyncio.sleep(0)
        purgatory.complete_all()
        return list(await asyncio.gather(*waiting))

    assert asyncio.run(scenario()) == [(True, 0)] * 3
