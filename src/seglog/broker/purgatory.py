"""Requests that wait for something to happen: Kafka's ``DelayedOperationPurgatory``.

A fetch with ``max_wait_ms`` and ``min_bytes`` that finds too little waits here, watched
under the keys of its partitions; an append to one of them calls ``check_and_complete``
for that key, and the operation completes when it has enough, or at its deadline. The
same purgatory will hold acks=all produces (completed as the ISR's fetches move the high
watermark) and replica fetches. There is no timer loop: each operation's deadline is one
``loop.call_later`` handle, cancelled when it completes first.

Everything here runs on the event loop's thread, so nothing is locked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class DelayedOperation(Generic[T]):
    """An operation that completes once ``try_complete`` says so, or at its deadline.

    Subclasses implement ``try_complete(event)`` (True when done: it then calls
    ``force_complete``) and ``on_complete(expired)``, the result awaited by the request."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.done = False
        self._future: asyncio.Future[T] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def try_complete(self, event: Any) -> bool:
        raise NotImplementedError

    def on_complete(self, expired: bool) -> T:
        raise NotImplementedError

    def force_complete(self, expired: bool = False) -> bool:
        if self.done:
            return False
        self.done = True
        if self._timer is not None:
            self._timer.cancel()
        if self._future is not None and not self._future.done():
            try:
                self._future.set_result(self.on_complete(expired))
            except Exception as e:  # the request answers with the error rather than hanging
                self._future.set_exception(e)
        return True

    def abandon(self, error: BaseException) -> None:
        """The requester is gone (its connection closed): end the wait now with ``error``,
        without computing a result for nobody."""
        if self.done:
            return
        self.done = True
        if self._timer is not None:
            self._timer.cancel()
        if self._future is not None and not self._future.done():
            self._future.set_exception(error)


class Purgatory:
    """Delayed operations watched by key (a topic partition, for now)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, list[DelayedOperation[Any]]] = {}

    def __len__(self) -> int:
        return len({id(op) for ops in self._watchers.values() for op in ops})

    async def wait(self, op: DelayedOperation[T], keys: Iterable[Hashable]) -> T:
        """Park ``op`` under ``keys`` until it completes or expires; return its result."""
        loop = asyncio.get_running_loop()
        op._future = loop.create_future()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, []).append(op)
        op._timer = loop.call_later(op.delay_ms / 1000, op.force_complete, True)
        try:
            return await op._future
        finally:
            op.done = True
            op._timer.cancel()
            for key in keys:
                self._unwatch(key, op)

    def check_and_complete(self, key: Hashable, event: Any = None) -> int:
        """Offer ``event`` (an append's size, ...) to the operations watching ``key``;
        returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        for op in list(ops):
            if not op.done and op.try_complete(event):
                completed += 1
        return completed

    def complete_all(self) -> None:
        """Shutdown: answer every waiting operation now."""
        for ops in list(self._watchers.values()):
            for op in list(ops):
                op.force_complete(expired=True)

    def _unwatch(self, key: Hashable, op: DelayedOperation[Any]) -> None:
        ops = self._watchers.get(key)
        if ops is None:
            return
        try:
            ops.remove(op)
        except ValueError:
            return
        if not ops:
            del self._watchers[key]
