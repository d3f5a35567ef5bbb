"""``seglog dump-log --deep-iteration`` on decompression bombs: whole batches against streamed records.

Three segments of 252 gzip batches built with seglog's own batch builder, each
batch inflating to 4 MiB of zeros from a few KiB (issue 25's file):

- one record of 4 MiB per batch (about 1 MB on disk);
- 1,024 records of 4 KiB per batch (about 2.5 MB);
- the same, each batch claiming one record (the damage of a bomb: the dump must
  stop at the count, not inflate the rest).

Each is dumped by the command as it is now (records streamed out of a batch as
it inflates, ``stream_records``) and as it was (every batch's records decoded
whole, ``RecordBatch.records()``, put back in the same run), each run in a
fresh process, output to /dev/null: wall time, CPU time (user + system: the
figure the ratio takes, as the wall time of a shared machine is noisy) and peak
RSS (ru_maxrss). Beside them, the raw read of the file (its bytes read in a
fresh process): the floor of time and memory. Ratios are before / after. Run: ``.venv/bin/python bench/dump_log.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from seglog.records import Compression, build_batch, crc32c

BATCHES = 252
MIB = 1 << 20

# one run in a fresh process: what it does, then its wall time and peak RSS as JSON
_RUN = r"""
import contextlib, json, os, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
started = time.perf_counter()
cpu_before = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])  # the interpreter's start is not the run's
if mode == "read":
    with open(path, "rb") as f:
        f.read()
    code = 0
else:
    from seglog.cli import main
    from seglog.tools import dump_log
    if mode == "whole":  # the dump as it was: each batch's records decoded at once
        dump_log.stream_records = lambda batch: batch.records()
    with open(os.devnull, "w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["dump-log", "--deep-iteration", "--files", path])
seconds = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu = usage.ru_utime + usage.ru_stime - cpu_before
print(json.dumps({"seconds": seconds, "cpu": cpu, "maxrss": usage.ru_maxrss * 1024, "code": code}))
"""


def _segment(path: Path, records: int, value_size: int, claimed: int | None = None) -> Path:
    data = bytearray()
    for i in range(BATCHES):
        rows = [(None, bytes(value_size))] * records
        batch = build_batch(rows, base_offset=i * records, compression=Compression.GZIP)
        if claimed is not None:  # the header's record count, CRC resealed: only the records disagree
            batch[57:61] = claimed.to_bytes(4, "big")
            batch[17:21] = crc32c(memoryview(batch)[21:]).to_bytes(4, "big")
        data += batch
    path.write_bytes(data)
    return path


def _run(mode: str, path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _RUN, mode, str(path)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    print(f"dump-log --deep-iteration over {BATCHES} gzip batches, each 4 MiB of zeros inflated; one process a run\n")
    header = f"{'file':40} {'run':22} {'wall s':>8} {'CPU s':>8} {'peak RSS':>12} {'above read':>11}"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        shapes = [
            ("1 record of 4 MiB a batch", 1, 4 * MIB, None),
            ("1,024 records of 4 KiB a batch", 1024, 4096, None),
            ("the same, claiming 1 record", 1024, 4096, 1),
        ]
        for name, records, value_size, claimed in shapes:
            path = _segment(Path(tmp) / "00000000000000000000.log", records, value_size, claimed)
            read, whole, streamed = (_run(mode, path) for mode in ("read", "whole", "streamed"))
            assert whole["code"] == streamed["code"] == (0 if claimed is None else 1)
            label = f"{name} ({path.stat().st_size / 1e6:.1f} MB)"
            for run, figures in (("raw read", read), ("before: whole batches", whole), ("after: streamed", streamed)):
                rss, above = figures["maxrss"] / MIB, (figures["maxrss"] - read["maxrss"]) / MIB
                wall, cpu = figures["seconds"], figures["cpu"]
                print(f"{label:40} {run:22} {wall:8.3f} {cpu:8.3f} {rss:8.1f} MiB {above:7.1f} MiB")
                label = ""
            time_ratio = whole["cpu"] / streamed["cpu"]
            memory_ratio = (whole["maxrss"] - read["maxrss"]) / max(streamed["maxrss"] - read["maxrss"], 1)
            print(f"{'':40} {'before / after':22} {'':8} {time_ratio:7.1f}x {'':12} {memory_ratio:10.1f}x\n")


if __name__ == "__main__":
    main()
