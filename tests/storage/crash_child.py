"""The process test_crash.py kills: it appends to a log dir until SIGKILL comes.

Run as ``python crash_child.py DIR ACK_FILE MODE SEED``. Every record's key,
value and timestamp are functions of its offset (``expected``), so the parent
can check each record it reads back. Some appends are files made segments
(``append_segment_file``), so kills land in those too. After each flush (every append when MODE
is ``flush1``, whose topic has flush.messages=1; every few appends otherwise)
the child writes the last flushed offset to ACK_FILE and fsyncs it: every
offset acknowledged there must survive the kill.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys

TOPIC = "crash"
BASE_TS = 1_700_000_000_000
# small segments and indexes: rolls, index-full rolls and trims happen often
_SMALL = {"segment.bytes": 128 * 1024, "segment.index.bytes": 400, "index.interval.bytes": 1024}
CONFIGS = {"default": _SMALL, "flush1": {**_SMALL, "flush.messages": 1}}


def expected(offset: int) -> tuple[bytes, bytes, int]:
    """(key, value, timestamp) of the record at ``offset``; timestamps wander a little."""
    digest = hashlib.blake2b(b"%d" % offset, digest_size=16).digest()
    return b"%d" % offset, digest * (offset % 23), BASE_TS + offset * 2 - (offset % 5) * 3


def main() -> None:
    import seglog
    from seglog.records import Compression, Record, build_batch

    path, ack_path, mode, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = random.Random(seed)
    manager = seglog.open(path, background=False)
    log = manager.partition(TOPIC, 0)
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("ready", flush=True)
    codecs = list(Compression)
    while True:
        start = log.log_end_offset
        n = rng.choice((1, 1, 3, 10, 40)) if rng.random() > 0.03 else 400  # sometimes a large write
        batch = [Record(*expected(o)) for o in range(start, start + n)]
        if n <= 40 and rng.random() < 0.1:  # a file of batches made a segment (the Spark sink's commit)
            staged = os.path.join(path, ".staged")
            with open(staged, "wb") as f:
                f.write(build_batch(batch, compression=rng.choice(codecs)))
            info = log.append_segment_file(staged)
            first, last = info.first_offset, info.last_offset
        else:
            first, last = log.append(batch, compression=rng.choice(codecs))
        assert first == start, (first, start)
        if mode == "flush1":
            flushed = last  # flush.messages=1: fsynced before append returned
        elif rng.random() < 0.1:
            log.flush()
            flushed = last
        else:
            flushed = -1
        if flushed >= 0:
            os.write(ack, b"%d\n" % flushed)
            os.fsync(ack)
        r = rng.random()
        if r < 0.02:
            manager.checkpoint()  # kills land in checkpoint writes too
        elif r < 0.03:
            log.roll()


if __name__ == "__main__":
    main()
