"""What the sans-IO coordinators share about their outputs and the stores they ask for:
each call's outputs handed out once (``Outputs``), the stores asked for and not yet
completed, by store id (``PendingStores``), and an append's error as a coordinator answers
it (``append_error``, Kafka's mapping in ``GroupMetadataManager.storeOffsets`` and
``TransactionStateManager.appendTransactionToLog``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

from ..errors import ErrorCode, SeglogError

Out = TypeVar("Out")
P = TypeVar("P")

_E = ErrorCode
# the rows both coordinators answer alike: the log's trouble is the coordinator's (retry, or find the new one)
_APPEND_ERRORS: dict[int, ErrorCode] = {
    _E.UNKNOWN_TOPIC_OR_PARTITION: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _E.COORDINATOR_NOT_AVAILABLE,
    _E.REQUEST_TIMED_OUT: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_LEADER_OR_FOLLOWER: _E.NOT_COORDINATOR,
    _E.KAFKA_STORAGE_ERROR: _E.NOT_COORDINATOR,
}


def append_error(error_code: int, own: Mapping[int, ErrorCode]) -> int:
    """The answer for an append that ended with ``error_code``: the coordinator's ``own``
    rows first (a batch too large: the offsets' answer blames the commit, the transactions'
    the broker), then the shared ones; any other code as it is."""
    return own.get(error_code, _APPEND_ERRORS.get(error_code, error_code))


class Outputs(Generic[Out]):
    """The outputs of the call under way; every call ends with ``drain``."""

    def __init__(self) -> None:
        self._out: list[Out] = []

    def append(self, out: Out) -> None:
        self._out.append(out)

    def drain(self) -> list[Out]:
        out, self._out = self._out, []
        return out


class PendingStores(Generic[P]):
    """The stores asked for and not completed yet: what each one's completion needs, by
    the store id the broker completes it with."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._pending: dict[int, P] = {}
        self._next = 0

    def add(self, pending: P) -> int:
        """A new store: its id."""
        self._next += 1
        self._pending[self._next] = pending
        return self._next

    def pop(self, store_id: int) -> P:
        found = self._pending.pop(store_id, None)
        if found is None:
            raise SeglogError(f"no {self._what} store {store_id} is pending")
        return found
