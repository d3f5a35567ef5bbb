"""The process test_txn_state.py kills: it appends transactions of three producers,
interleaved with plain records, to a log of small segments until SIGKILL comes.

Run as ``python txn_crash_child.py DIR SEED``; prints "ready" once the log is open. A
dir it was killed in before is recovered and appended to again.
"""

from __future__ import annotations

import random
import sys


def main() -> None:
    from txn_walk import Writer  # (beside this file: the script's directory is on the path)

    import seglog

    path, seed = sys.argv[1], int(sys.argv[2])
    manager = seglog.open(path, background=False)
    if "t" not in manager.topics():
        manager.create_topic("t", 1, {"segment.bytes": 2048, "index.interval.bytes": 200})
    # producer ids of this run: the earlier runs' are left where the kill left them
    writer = Writer(manager.partition("t", 0), [1000 * (seed + 1) + i for i in range(3)])
    rng = random.Random(seed)
    print("ready", flush=True)
    while True:
        writer.step(rng)


if __name__ == "__main__":
    main()
