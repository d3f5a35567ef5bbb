"""broker/heap.py: the survivors of a full collection frozen, and cycles of frozen objects freed
at every UNFREEZE_EVERY-th full collection (the real collector, in this process, restored after)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from seglog.broker import heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture
def freezer() -> Iterator[None]:
    before = list(gc.callbacks)
    heap.freeze_long_lived()
    heap.freeze_long_lived()  # once per process: a second call adds nothing
    try:
        assert len(gc.callbacks) == len(before) + 1
        yield
    finally:
        gc.callbacks[:] = before
        gc.unfreeze()


def test_what_a_full_collection_leaves_is_frozen(freezer):
    gc.collect()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    kept = [_Node() for _ in range(100)]
    gc.collect()
    assert gc.get_freeze_count() >= frozen + len(kept)  # the new survivors joined them


def test_a_cycle_of_frozen_objects_is_freed_within_unfreeze_every_full_collections(freezer):
    node = _Node()
    gone = weakref.ref(node)
    gc.collect()  # frozen
    del node
    gc.collect()
    for _ in range(heap.UNFREEZE_EVERY):
        if gone() is None:
            break
        gc.collect()
    assert gone() is None
