"""``throttling.timed``: a handler's time on the loop, its waits left out (a fake clock that
moves 10 ns at each reading: what a step costs is what the test says)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from seglog.broker.throttling import timed


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
