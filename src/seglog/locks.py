"""The reentrant lock of the produce path: a partition log's (``PartitionLog._lock``)
and a broker partition's (``Partition.lock``), each taken once per produce.

``RLock`` (``_locks.c``, beside this module) keeps ``threading.RLock``'s semantics
(reentrant, owned by a thread, ``acquire(blocking)`` answering whether it was
taken, ``with``), but its ``acquire`` and ``release`` parse no arguments, where
``threading.RLock``'s go through the argument parser on every call: that was
3-4 points of the append's share of its own work (``bench/storage.py append``).
``acquire`` takes ``blocking`` only, positionally (no ``timeout``).
"""

from __future__ import annotations

from ._locks import RLock

__all__ = ["RLock"]
