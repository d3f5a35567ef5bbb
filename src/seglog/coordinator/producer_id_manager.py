"""Producer ids, handed out in blocks that survive a restart (Kafka's ProducerIdManager).

Kafka's brokers claim blocks of 1,000 ids (``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``),
in ZooKeeper mode by a compare-and-set of the znode ``/latest_producer_id_block``. A
single seglog broker keeps that znode's JSON in a file instead, written atomically (temp
file, fsync, rename, fsync of the dir) *before* any id of the new block is handed out::

    {"version":1,"broker":0,"block_start":"1000","block_end":"1999"}

On restart the ids left in the last block are skipped and the next block claimed, as a
Kafka broker does, so no id is ever handed out twice. The file lives at the root of the
first log dir, where Kafka ignores files.

In a cluster the brokers share ZooKeeper's znode instead (``ProducerIdBlocks`` with the
cluster's claim, Kafka's ``ZkProducerIdManager``): local files would let two brokers hand
out the same ids.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from ..errors import KafkaStorageError
from ..storage.fileio import write_atomically

BLOCK_SIZE = 1000
LATEST_PRODUCER_ID_BLOCK = "latest_producer_id_block"
_LONG_MAX = (1 << 63) - 1


class ProducerIdBlocks:
    """Producer ids for InitProducerId, from blocks that ``claim_block`` claims: (first id, last id)."""

    def __init__(self, claim_block: Callable[[], tuple[int, int]]) -> None:
        self._claim = claim_block
        self._next = 0
        self._end = -1  # the current block's last id; none claimed yet

    @property
    def block_used_up(self) -> bool:
        return self._next > self._end

    def use_block(self, first: int, last: int) -> None:
        """Hand out ids from a block the caller claimed (off the event loop), unless one came meanwhile:
        then this block's ids are never handed out (skipped, as a restart skips a block's rest)."""
        if self.block_used_up:
            self._next, self._end = first, last

    def generate_producer_id(self) -> int:
        """The next unused producer id; a new block is claimed when needed."""
        if self.block_used_up:
            self._next, self._end = self._claim()
        producer_id = self._next
        self._next += 1
        return producer_id


class ProducerIdManager(ProducerIdBlocks):
    """A single broker's producer ids, from blocks recorded in ``path``."""

    def __init__(self, path: str, broker_id: int = 0) -> None:
        super().__init__(self._claim_block)
        self.path = path
        self.broker_id = broker_id
        self._last_end = self._read_last_block_end()

    def _read_last_block_end(self) -> int:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return -1
        except OSError as e:
            raise KafkaStorageError(f"cannot read the producer id block: {e.strerror}", file=self.path) from None
        try:
            block = json.loads(raw)
            start, end = int(block["block_start"]), int(block["block_end"])
            if block["version"] != 1 or not 0 <= start <= end < _LONG_MAX:
                raise ValueError(f"block {start}-{end} of version {block['version']}")
        except (ValueError, KeyError, TypeError) as e:
            raise KafkaStorageError(f"the producer id block is not Kafka's JSON: {e}", file=self.path) from None
        return end

    def _claim_block(self) -> tuple[int, int]:
        start = self._last_end + 1
        end = start + BLOCK_SIZE - 1
        if end >= _LONG_MAX:
            raise KafkaStorageError("producer ids are exhausted", file=self.path)
        block = {"version": 1, "broker": self.broker_id, "block_start": str(start), "block_end": str(end)}
        write_atomically(self.path, json.dumps(block, separators=(",", ":")).encode())
        self._last_end = end
        return start, end


def producer_id_block_path(log_dir: str) -> str:
    return os.path.join(log_dir, LATEST_PRODUCER_ID_BLOCK)
