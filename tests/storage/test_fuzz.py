"""Damaged log dirs: real segment files and dirs mutated at random, then opened and read.

Each case copies a real log dir (shut down cleanly, or left by a crash), damages it
(truncated or bit-flipped segment files, overwritten batch lengths, corrupt or missing
index and checkpoint files, stray ``.swap``/``.cleaned``/``.deleted`` files, the
clean-shutdown marker taken away or added), opens it and reads every record. What
must hold, whatever the damage:

- only seglog errors, at the open or the read;
- no data past the first invalid byte: every record read is the record written at
  that offset, read in order from the log start without a gap;
- no valid record before it lost: every record from the log start up to the first
  damaged batch is read.

Cases are seeded: a failure names its seed and the damage done, to be replayed with
``case(seed)``. The damage to a batch's base offset (outside the CRC, in Kafka's
format as in seglog's) cannot be told from a valid batch: there only the first rule is
checked.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from seglog.errors import SeglogError
from seglog.records import BatchIterator, Compression, Record, build_batch, build_message_set

from .conftest import MS, crash, new_log, open_logs

CASES = 240  # seeds, split into the groups below (about 15 s in all)
GROUPS = 8
TOPIC = "t"
ROOT_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint")
_CONFIG = {"segment.bytes": 3000, "index.interval.bytes": 150, "segment.index.bytes": 4096}


@dataclass
class Template:
    """A real log dir and what was written to it: (key, value, timestamp) by offset."""

    path: Path
    records: list[tuple[bytes, bytes, int]]
    batches: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # file: (position, size, base)


def _write(path: Path, clean: bool) -> Template:
    rng = random.Random(7)
    manager, log = new_log(path, TOPIC, dict(_CONFIG))
    written: list[tuple[bytes, bytes, int]] = []
    for i in range(60):
        n = rng.randint(1, 6)
        recs = [
            Record(b"k%d" % (len(written) + j), rng.randbytes(rng.randint(0, 90)), MS + len(written) + j)
            for j in range(n)
        ]
        codec = rng.choice([Compression.NONE, Compression.NONE, Compression.GZIP, Compression.LZ4])
        if i < 10:  # the first segment as a broker before 0.11 wrote it: magic 1 message sets
            log.append_as_follower(build_message_set(recs, magic=1, base_offset=len(written), compression=codec))
        else:
            log.append_batches(build_batch(recs, compression=codec))
        written += [(r.key, r.value, r.timestamp) for r in recs]
        if i == 45:
            log.flush()  # a recovery point in the middle: recovery starts there after a crash
    assert len(log.segments) >= 5
    if clean:
        manager.close()
    else:
        crash(manager)
    template = Template(path, written)
    part = path / f"{TOPIC}-0"
    for name in sorted(os.listdir(part)):
        if name.endswith(".log"):
            template.batches[name] = [
                (b.position, b.size_in_bytes, b.base_offset) for b in BatchIterator((part / name).read_bytes())
            ]
    return template


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[bool, Template]:
    return {clean: _write(tmp_path_factory.mktemp(f"template-{clean}"), clean) for clean in (True, False)}


class Damage:
    """The damage done to one copy, and the first offset whose batch it made invalid."""

    def __init__(self, template: Template, root: Path, rng: random.Random) -> None:
        self.template, self.root, self.rng = template, root, rng
        self.part = root / f"{TOPIC}-0"
        self.first_invalid = len(template.records)
        self.checked = True  # False: a base offset changed, which no check can see
        self.gap_allowed = False  # True: whole batches cut off a segment, which leaves no invalid byte
        self.done: list[str] = []

    def _invalid_from(self, log_name: str, position: int) -> None:
        """Bytes from ``position`` of a segment file are damaged: its batch is invalid."""
        for start, size, base in self.template.batches[log_name]:
            if position < start + size:
                self.first_invalid = min(self.first_invalid, base)
                return

    def _segment(self) -> tuple[str, Path]:
        name = self.rng.choice(sorted(self.template.batches))
        return name, self.part / name

    def truncate_log(self) -> None:
        name, path = self._segment()
        size = path.stat().st_size
        cut = self.rng.randrange(size) if size else 0
        os.truncate(path, cut)
        self._invalid_from(name, cut)
        self.gap_allowed |= any(cut == start for start, _, _ in self.template.batches[name])
        self.done.append(f"{name} truncated to {cut}")

    def flip_log_bit(self) -> None:
        name, path = self._segment()
        data = bytearray(path.read_bytes())
        if not data:
            return
        at, bit = self.rng.randrange(len(data)), self.rng.randrange(8)
        data[at] ^= 1 << bit
        path.write_bytes(data)
        self._invalid_from(name, at)
        start = next(s for s, size, _ in self.template.batches[name] if at < s + size)
        if at - start < 8:
            self.checked = False  # the base offset: outside the CRC
        self.done.append(f"{name} bit {bit} of byte {at} flipped")

    def overwrite_length(self) -> None:
        name, path = self._segment()
        start, _, base = self.rng.choice(self.template.batches[name])
        length = self.rng.choice([0, 1, 48, 49, -1, -(1 << 31), (1 << 31) - 1, self.rng.randrange(1 << 31)])
        with open(path, "r+b") as f:
            f.seek(start + 8)
            f.write(struct.pack(">i", length))
        self._invalid_from(name, start)
        self.done.append(f"{name} batch at {start} (offset {base}) given length {length}")

    def damage_index(self) -> None:
        name, _ = self._segment()
        path = self.part / name.replace(".log", self.rng.choice([".index", ".timeindex"]))
        garbage = self.rng.randbytes(self.rng.choice([7, 8, 12, 24, 96, 4096]))
        self._damage_file(path, ["delete", "truncate", "flip", "garbage", "zero", "grow"], 8, garbage)

    def damage_checkpoint(self) -> None:
        """Checkpoints are text: damage that keeps them ASCII (a non-UTF-8 byte is its own
        case, see test_checkpoint)."""
        names = [self.root / n for n in ROOT_CHECKPOINTS] + [self.part / "leader-epoch-checkpoint"]
        garbage = bytes(self.rng.choice(b"0123456789 \nt-x") for _ in range(self.rng.randrange(40)))
        self._damage_file(self.rng.choice(names), ["delete", "truncate", "flip", "garbage"], 7, garbage)

    def _damage_file(self, path: Path, kinds: list[str], bits: int, garbage: bytes) -> None:
        """One of ``kinds`` of damage to the file at ``path``; flips touch the low ``bits``."""
        data = bytearray(path.read_bytes()) if path.exists() else bytearray()
        how = self.rng.choice(kinds)
        if how == "delete":
            path.unlink(missing_ok=True)
        elif how == "truncate":
            path.write_bytes(data[: self.rng.randrange(len(data) + 1)])
        elif how == "flip" and data:
            data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(bits)
            path.write_bytes(data)
        elif how == "garbage":
            path.write_bytes(garbage)
        elif how == "zero":
            path.write_bytes(bytes(len(data)))
        elif how == "grow":
            path.write_bytes(data + self.rng.randbytes(self.rng.choice([8, 12, 24])))
        self.done.append(f"{path.name}: {how}")

    def stray_file(self) -> None:
        name, path = self._segment()
        base = name[:-4]
        suffix = self.rng.choice([".log.deleted", ".log.cleaned", ".log.swap", ".index.swap", ".index.deleted"])
        how = self.rng.choice(["copy", "garbage", "empty"])
        stray = self.part / (base + suffix)
        if how == "copy":
            shutil.copyfile(path, stray)
        else:
            stray.write_bytes(self.rng.randbytes(self.rng.randrange(300)) if how == "garbage" else b"")
        self.done.append(f"{stray.name}: {how}")

    def toggle_clean_marker(self) -> None:
        marker = self.root / ".kafka_cleanshutdown"
        if marker.exists():
            marker.unlink()
        else:
            marker.write_bytes(b"")
        self.done.append("clean-shutdown marker toggled")

    def apply(self) -> None:
        kinds = [
            self.truncate_log,
            self.flip_log_bit,
            self.overwrite_length,
            self.damage_index,
            self.damage_index,
            self.damage_checkpoint,
            self.stray_file,
            self.toggle_clean_marker,
        ]
        for _ in range(self.rng.randint(1, 3)):
            self.rng.choice(kinds)()


def case(template: Template, work: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = work / f"case-{seed}"
    shutil.copytree(template.path, root)
    damage = Damage(template, root, rng)
    damage.apply()
    where = f"seed {seed}: {'; '.join(damage.done)}"
    read: list[tuple[int, bytes, bytes, int]] = []
    start: int | None = None
    try:
        manager = open_logs(root)
    except SeglogError:
        return  # an open refused with a seglog error: allowed, and nothing to check
    except Exception as e:
        raise AssertionError(f"{where}: {type(e).__name__} at the open: {e}") from e
    try:
        log = manager.partition(TOPIC, 0)
        start = log.log_start_offset
        try:
            for r in log.records():
                read.append((r.offset, r.key, r.value, r.timestamp))
        except SeglogError:
            pass  # the damage, met: what was read before it is checked below
        # and lookups by time (timestamps grow with offsets here) find the records written
        for offset in sorted(rng.sample(range(len(template.records)), 3)):
            if start <= offset < min(damage.first_invalid, log.high_watermark) and damage.checked:
                found = log.offset_for_timestamp(template.records[offset][2])
                assert found is not None and found[0] == offset, f"{where}: offset_for_timestamp {found}"
            else:
                with contextlib.suppress(SeglogError):
                    log.offset_for_timestamp(template.records[offset][2])
        # reads from anywhere below the damage see the records written there
        for offset in sorted(rng.sample(range(len(template.records)), 5)):
            end = min(offset + 3, damage.first_invalid, log.high_watermark)
            if start <= offset < end and damage.checked:
                got = [(r.offset, r.key, r.value, r.timestamp) for r in log.records(offset, end)]
                assert got == _expected(template, offset, end), where
    except SeglogError as e:
        raise AssertionError(f"{where}: {type(e).__name__} reading below the damage: {e}") from e
    except AssertionError:
        raise
    except Exception as e:
        raise AssertionError(f"{where}: {type(e).__name__}: {e}") from e
    finally:
        crash(manager)  # released without the checkpoints and fsyncs of a close: not what is tested
    if not damage.checked:
        return
    assert [r[1:] for r in read] == [template.records[r[0]] for r in read], f"{where}: wrong data read"
    offsets = [r[0] for r in read]
    assert offsets == sorted(set(offsets)), f"{where}: offsets out of order"
    prefix = max(0, min(damage.first_invalid, len(template.records)) - start)
    assert offsets[:prefix] == list(range(start, start + prefix)), f"{where}: valid records lost"
    if not damage.gap_allowed:
        assert offsets == list(range(start, start + len(read))), f"{where}: records read past the damage"


def _expected(template: Template, start: int, end: int) -> list[tuple[int, bytes, bytes, int]]:
    return [(o, *template.records[o]) for o in range(start, min(end, len(template.records)))]


@pytest.mark.parametrize("group", range(GROUPS))
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crashed"])
def test_damaged_log_dirs_fail_cleanly_and_lose_nothing_valid(templates, tmp_path, clean, group):
    for seed in range(group, CASES, GROUPS):
        case(templates[clean], tmp_path, seed)
