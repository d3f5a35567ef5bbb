"""A broker process's garbage collector, told that what a full collection leaves lives long.

A broker of 10,000 partitions holds some 400,000 objects (logs, segments, indexes, metadata) that
live as long as it does, and CPython's full (generation 2) collection walks every one: measured
at 300 ms to 1 s on the shared 2-core machine, a stall of every request in flight. Requests that
build an entry per partition (Metadata or DescribeLogDirs of every partition: the console's pages)
promote enough objects to set one off every 10-15 such requests. ``gc.freeze`` moves what
survives a full collection to the permanent generation, which collections skip: the next full
one walks only what was made since (5 ms there). DescribeLogDirs of 10,000 partitions took the
broker 86-99 ms of CPU before, 45-49 ms after, and the full collections of 30 such requests
(Metadata, DescribeLogDirs, DescribeConfigs) 1,000 ms before and 10 ms after.

Cycles of frozen objects that become garbage (a deleted topic's) are reclaimed only once they
are unfrozen: every ``UNFREEZE_EVERY``-th full collection walks everything again, so they are
freed later, never leaked. Installed by ``seglog broker`` for its process (an embedding program
keeps its own collector's settings)."""

from __future__ import annotations

import gc
from typing import Any

UNFREEZE_EVERY = 10  # full collections: one in this many walks every object, frozen ones too


class _Freezer:
    """A ``gc.callbacks`` entry: unfreeze before every UNFREEZE_EVERY-th full collection, freeze
    what is left after each."""

    def __init__(self) -> None:
        self.full_collections = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self.full_collections += 1
            if self.full_collections % UNFREEZE_EVERY == 0:
                gc.unfreeze()  # (into the oldest generation, which this collection walks)
        else:
            gc.freeze()


def freeze_long_lived() -> None:
    """From now on, the survivors of each full collection are frozen (see the top); once per
    process, a second call changes nothing."""
    if not any(isinstance(c, _Freezer) for c in gc.callbacks):
        gc.callbacks.append(_Freezer())
