"""The process test_txn_state.py kills: it appends transactions of three producers,
interleaved with plain records, to a log of small segments until SIGKILL comes.

Run as ``python txn_crash_child.py DIR SEED``; prints "ready" once the log is open. A
dir it was killed in before is recovered and appended to again.
"""

from __future__ import annotations

import random
import sys


def main() -> None:
    import seglog
    from seglog.records import Record, build_batch
    from seglog.records.control import end_transaction_marker

    path, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    manager = seglog.open(path, background=False)
    if "t" not in manager.topics():
        manager.create_topic("t", 1, {"segment.bytes": 2048, "index.interval.bytes": 200})
    log = manager.partition("t", 0)
    # a producer id a run: the earlier runs' producers are left where the kill left them
    pids = [1000 * (seed + 1) + i for i in range(3)]
    sequence = dict.fromkeys(pids, 0)
    open_txns: set[int] = set()
    print("ready", flush=True)
    while True:
        pid = rng.choice(pids)
        ts = 1_700_000_000_000
        if pid in open_txns and rng.random() < 0.3:
            commit = rng.random() < 0.5
            marker = build_batch(
                [end_transaction_marker(commit, 1, ts)],
                producer_id=pid,
                producer_epoch=0,
                transactional=True,
                control=True,
            )
            log.append_batches(marker, origin="coordinator")
            open_txns.discard(pid)
        elif rng.random() < 0.85:
            n = rng.randint(1, 3)
            log.append(
                [Record(b"k", b"v" * 20, ts)] * n,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=sequence[pid],
                transactional=True,
            )
            sequence[pid] += n
            open_txns.add(pid)
        else:
            log.append([Record(None, b"plain", ts)])


if __name__ == "__main__":
    main()
