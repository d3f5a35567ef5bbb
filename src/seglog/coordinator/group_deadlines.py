"""The earliest timer of each group, kept in a heap (the role of Kafka's timing wheels
for the heartbeat, join and sync delayed operations).

The coordinator sets a group's deadline (the earliest of its timers) after every call
that touched the group, so asking for the next deadline, or for the groups due, costs
O(log n) a group that moved instead of a walk over every group. A moved or cleared
deadline leaves its old heap entry behind: an entry counts only while it still matches
the group's deadline (lazy invalidation), and the heap is rebuilt when stale entries
outnumber live ones, so a heartbeating group does not grow it without bound.
"""

from __future__ import annotations

import heapq

_MIN_REBUILD = 64  # below this many entries stale ones are left to drain


class GroupDeadlines:
    """Each group's earliest deadline (ms), at most one a group."""

    def __init__(self) -> None:
        self._due: dict[str, int] = {}  # group id -> its deadline
        self._heap: list[tuple[int, str]] = []  # (deadline, group id), some stale

    def __len__(self) -> int:
        return len(self._due)

    def set(self, group_id: str, deadline: int | None) -> None:
        """The group's earliest deadline is now ``deadline`` (None: no timer runs)."""
        if deadline is None:
            self._due.pop(group_id, None)
            return
        if self._due.get(group_id) == deadline:
            return
        self._due[group_id] = deadline
        heapq.heappush(self._heap, (deadline, group_id))
        if len(self._heap) > max(_MIN_REBUILD, 2 * len(self._due)):
            self._heap = [(d, g) for g, d in self._due.items()]
            heapq.heapify(self._heap)

    def earliest(self) -> int | None:
        """The earliest deadline of any group; None when no group has one."""
        heap = self._heap
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, now_ms: int) -> list[str]:
        """The groups whose deadline is at or before ``now_ms``, earliest first; they
        leave the heap (the caller sets their next deadline once it ran their timers)."""
        due: list[str] = []
        while (deadline := self.earliest()) is not None and deadline <= now_ms:
            _, group_id = heapq.heappop(self._heap)
            del self._due[group_id]
            due.append(group_id)
        return due
