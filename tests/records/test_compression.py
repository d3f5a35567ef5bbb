"""The codecs, as Kafka's clients frame them."""

from __future__ import annotations

import gzip
import random
import struct

import cramjam
import lz4.block
import lz4.frame
import pytest
import xxhash
import zstandard

from seglog.errors import CorruptRecordError, UnsupportedCompressionTypeError
from seglog.records import Compression
from seglog.records.compression import compress, decompress, decompress_stream

from ..conftest import KAFKA_DATA

DATA = b"".join(b"record %d of a batch; " % i + bytes(random.Random(i).randbytes(20)) for i in range(20000))


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_round_trip(codec):
    assert decompress(codec, compress(codec, DATA)) == DATA
    assert decompress(codec, compress(codec, b"")) == b""


# the largest piece of a stream: gzip and zstd cut by the chunk, xerial snappy and lz4 by their blocks
_LARGEST_PIECE = {
    Compression.GZIP: 1000,
    Compression.ZSTD: 1000,
    Compression.SNAPPY: 32 << 10,
    Compression.LZ4: 64 << 10,
}


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_a_stream_gives_the_same_bytes_in_bounded_pieces(codec):
    pieces = list(decompress_stream(codec, compress(codec, DATA), 1000))
    assert b"".join(pieces) == DATA
    assert len(pieces) > 5 and max(map(len, pieces)) <= _LARGEST_PIECE[codec] and all(pieces)
    assert list(decompress_stream(codec, compress(codec, b""), 1000)) == []


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_gzip_streamed_across_members_and_chunk_edges(chunk):
    members = gzip.compress(DATA[:5000]) + gzip.compress(b"") + gzip.compress(DATA[5000:9000])
    assert b"".join(decompress_stream(Compression.GZIP, members, chunk)) == DATA[:9000]
    with pytest.raises(CorruptRecordError, match="gzip"):
        b"".join(decompress_stream(Compression.GZIP, members[:-3], chunk))


def test_a_stream_meets_a_fault_after_the_pieces_before_it():
    frame = compress(Compression.SNAPPY, DATA)[:-10]  # the last xerial block cut short
    stream = decompress_stream(Compression.SNAPPY, frame)
    first = next(stream)
    assert first == DATA[: len(first)]
    with pytest.raises(CorruptRecordError, match="xerial block"):
        list(stream)


@pytest.mark.parametrize("linked", [True, False])
@pytest.mark.parametrize("content_size", [True, False])
@pytest.mark.parametrize("checksums", [True, False])
@pytest.mark.parametrize("block_size", [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX4MB])
def test_lz4_frames_of_every_shape(linked, content_size, checksums, block_size):
    frame = lz4.frame.compress(
        DATA,
        block_size=block_size,
        block_linked=linked,
        store_size=content_size,
        content_checksum=checksums,
        block_checksum=checksums,
    )
    assert decompress(Compression.LZ4, frame) == DATA
    assert b"".join(decompress_stream(Compression.LZ4, frame, 1000)) == DATA


def test_lz4_written_like_the_java_client():
    frame = compress(Compression.LZ4, DATA)
    assert frame[4] == 0x60 and frame[5] == 0x40  # independent blocks, 64 KiB, no checksums
    assert frame[6] == (xxhash.xxh32_intdigest(frame[4:6]) >> 8) & 0xFF  # the header checksum _lz4.h writes
    assert lz4.frame.decompress(frame) == DATA
    stored = random.Random(3).randbytes(70000)  # incompressible: its blocks are stored
    assert lz4.frame.decompress(compress(Compression.LZ4, stored)) == stored


def test_lz4_bytes_are_the_java_clients():
    """Real Java-client lz4 batches (Confluent Platform's, lz4-java's fast compressor) come
    out of seglog's compression byte for byte, so a batch the cleaner rebuilds is Kafka's."""
    from seglog.records import BatchIterator, RecordBatch
    from seglog.records.layout import HEADER_SIZE

    frames = [
        bytes(b.buffer[HEADER_SIZE:])
        for path in sorted((KAFKA_DATA / "real_segments").glob("**/*.log"))
        for b in BatchIterator(path.read_bytes())
        if isinstance(b, RecordBatch) and b.compression == Compression.LZ4
    ]
    assert len(frames) >= 2500  # README of the data: 1,951 + 523 + 69 + ...
    assert all(compress(Compression.LZ4, decompress(Compression.LZ4, f)) == f for f in frames)


def test_lz4_wrong_header_checksum_of_kafka_0_8_is_accepted():
    # golden v0_lz4 carries KAFKA-3160's header checksum, computed over the magic too
    from seglog.records import BatchIterator

    (wrapper,) = BatchIterator((KAFKA_DATA / "golden" / "v0_lz4.stored.bin").read_bytes())
    assert len(wrapper.records()) > 1


def test_lz4_bad_header_checksum_is_refused():
    frame = bytearray(lz4.frame.compress(DATA))
    frame[6 if not frame[4] & 0x08 else 14] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="header checksum"):
        decompress(Compression.LZ4, bytes(frame))


def test_lz4_block_checksum_mismatch():
    frame = bytearray(lz4.frame.compress(DATA, block_checksum=True, store_size=False))
    frame[20] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, bytes(frame))


def test_snappy_xerial_and_raw():
    framed = compress(Compression.SNAPPY, DATA)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(Compression.SNAPPY, framed) == DATA
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(DATA))) == DATA


def test_snappy_lying_length_is_refused():
    raw = bytearray(cramjam.snappy.compress_raw(b"abc" * 10))
    raw[0:1] = b"\xff\xff\xff\xff\x0f"  # claims 4 GiB
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, bytes(raw))


def test_gzip_several_members_read_as_one():
    assert decompress(Compression.GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


def test_zstd_without_content_size():
    stream = zstandard.ZstdCompressor(write_content_size=False).compress(DATA)
    assert decompress(Compression.ZSTD, stream) == DATA


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_garbage_is_a_corrupt_record_error(codec):
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x00\x01garbage" * 10)


def test_unknown_codec():
    with pytest.raises(UnsupportedCompressionTypeError):
        decompress(6, b"")
    with pytest.raises(UnsupportedCompressionTypeError):
        Compression.parse("brotli")
    assert Compression.parse("lz4") is Compression.LZ4


# --- hostile input ---------------------------------------------------------------------

_HOSTILE = r"""
import gzip, resource, struct, time, xxhash, zstandard
from seglog.errors import CorruptRecordError
from seglog.records.compression import decompress

def vm_size():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize"))

lz4_header = bytearray(b"\x04\x22\x4d\x18" + bytes([0x68, 0x70]) + struct.pack("<Q", 2**62))
lz4_header.append((xxhash.xxh32_intdigest(bytes(lz4_header[4:])) >> 8) & 0xFF)
gzip_isize = bytearray(gzip.compress(b"abc"))
gzip_isize[-4:] = b"\xff\xff\xff\xff"
zstd_frame = zstandard.ZstdCompressor().compress(b"a" * 100)
cases = [
    (2, b"\xff\xff\xff\xff\x0f" + bytes(30)),  # raw snappy preamble: 4 GiB
    (2, b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 2**31 - 1) + bytes(10)),  # xerial block: 2 GiB
    (3, bytes(lz4_header) + struct.pack("<I", 0x7FFFFFFF) + bytes(10)),  # lz4 content 2**62, block 2 GiB
    (4, zstd_frame[:4] + b"\xe4\x00\x00\x00\x00\x00\x01\x00\x00" + zstd_frame[-20:]),  # zstd content 2**40
    (4, b"\x28\xb5\x2f\xfd\x00\xf8" + bytes(20)),  # zstd window of 2**41
    (1, bytes(gzip_isize)),  # gzip trailer: 4 GiB
]
# any allocation sized by those claims would fail past this limit (MemoryError is not a seglog error)
resource.setrlimit(resource.RLIMIT_AS, (vm_size() + (128 << 20), resource.RLIM_INFINITY))
started = time.perf_counter()
for codec, data in cases:
    try:
        decompress(codec, data)
    except CorruptRecordError:
        pass
    else:
        raise SystemExit(f"codec {codec}: hostile input accepted")
print(f"{time.perf_counter() - started:.3f}")
"""


def test_hostile_size_claims_are_refused_quickly_with_little_memory():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _HOSTILE], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr + run.stdout
    assert float(run.stdout) < 1.0


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_decompressed_output_is_bounded(codec, monkeypatch):
    from seglog.records import compression

    bomb = compress(codec, bytes(3 << 20))  # 3 MiB of zeros in a few KiB
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        decompress(codec, bomb)
    given = 0
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        for piece in decompress_stream(codec, bomb, 4096):
            given += len(piece)
    assert given <= 1 << 20  # no piece past the bound is given out


# --- framings of other clients ---------------------------------------------------------


def test_raw_snappy_of_a_kafkajs_capture():
    from seglog.records import BatchIterator

    path = KAFKA_DATA / "wire_captures" / "tulios_kafkajs" / "extracted_records" / "v4_response_snappy.p3.records.bin"
    (batch,) = BatchIterator(path.read_bytes())
    batch.validate()
    assert batch.compression == Compression.SNAPPY
    assert not bytes(batch.buffer[61:69]).startswith(b"\x82SNAPPY")  # bare raw snappy, no xerial header
    assert [r.value for r in batch.records()] and all(r.value for r in batch.records())


def test_xerial_written_like_the_java_client():
    framed = compress(Compression.SNAPPY, DATA)
    assert framed[:16] == b"\x82SNAPPY\x00" + bytes([0, 0, 0, 1, 0, 0, 0, 1])
    pos, blocks = 16, 0
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        assert len(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + size])) <= 32 * 1024
        pos, blocks = pos + 4 + size, blocks + 1
    assert pos == len(framed) and blocks == -(-len(DATA) // (32 * 1024))


def test_xerial_with_a_truncated_block_is_refused():
    framed = compress(Compression.SNAPPY, DATA)
    with pytest.raises(CorruptRecordError, match="xerial block"):
        decompress(Compression.SNAPPY, framed[:-10])
    with pytest.raises(CorruptRecordError, match="truncated xerial"):
        decompress(Compression.SNAPPY, framed[:12])


@pytest.mark.parametrize("cut", [5, 7, 30, -1])
def test_truncated_lz4_frames_are_refused(cut):
    frame = lz4.frame.compress(DATA, content_checksum=True)
    with pytest.raises(CorruptRecordError, match="lz4"):
        decompress(Compression.LZ4, frame[:cut])


def test_lz4_content_checksum_mismatch():
    frame = bytearray(lz4.frame.compress(DATA, content_checksum=True, block_checksum=False))
    frame[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="content checksum"):
        decompress(Compression.LZ4, bytes(frame))


def test_lz4_with_a_dictionary_id_in_the_header():
    raw = lz4.block.compress(DATA[:60000], store_size=False)
    header = bytearray(b"\x04\x22\x4d\x18" + bytes([0x61, 0x40]) + struct.pack("<I", 7))  # FLG bit 0: dict id
    header.append((xxhash.xxh32_intdigest(bytes(header[4:])) >> 8) & 0xFF)
    frame = bytes(header) + struct.pack("<I", len(raw)) + raw + bytes(4)
    assert decompress(Compression.LZ4, frame) == DATA[:60000]


def test_gzip_cut_short_is_refused():
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(Compression.GZIP, gzip.compress(DATA)[:-20])


def test_zstd_frames_read_one_after_another():
    z = zstandard.ZstdCompressor()
    assert decompress(Compression.ZSTD, z.compress(b"abc") + z.compress(b"def")) == b"abcdef"


def test_zstd_frames_cut_short_are_refused():
    # python-zstandard's readers end a frame cut short silently (nothing, or part of it, out)
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(DATA)
    for cut in [1, 3, 4, 5, 100, len(frame) - 7]:
        with pytest.raises(CorruptRecordError, match=r"^zstd: "):
            decompress(Compression.ZSTD, frame[:-cut])
        with pytest.raises(CorruptRecordError, match=r"^zstd: "):
            list(decompress_stream(Compression.ZSTD, frame[:-cut], 7))
    skippable = struct.pack("<II", 0x184D2A53, 5) + b"hello"  # zstd's skippable frame: no output
    assert decompress(Compression.ZSTD, skippable + frame + skippable) == DATA


def test_snappy_faults_name_the_codec_once():
    with pytest.raises(CorruptRecordError, match=r"^snappy: corrupt input") as e:
        decompress(Compression.SNAPPY, b"\x05abc")
    assert "snappy: snappy" not in str(e.value)


@pytest.mark.parametrize("claim", [0, 1, len(DATA) - 1, len(DATA), len(DATA) + 1, 2**40])
def test_lz4_content_size_claims_size_nothing(claim):
    """A declared content size, true or not, changes nothing read: the blocks are read as they
    come (the hostile test above shows it sizes no allocation)."""
    frame = bytearray(lz4.frame.compress(DATA, store_size=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB))
    assert frame[4] & 0x08
    frame[6:14] = struct.pack("<Q", claim)
    frame[14] = (xxhash.xxh32_intdigest(bytes(frame[4:14])) >> 8) & 0xFF
    assert decompress(Compression.LZ4, bytes(frame)) == DATA
    assert b"".join(decompress_stream(Compression.LZ4, bytes(frame))) == DATA
