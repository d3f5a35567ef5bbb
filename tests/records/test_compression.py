"""The codecs, as Kafka's clients frame them."""

from __future__ import annotations

import gzip
import random

import cramjam
import lz4.frame
import pytest
import zstandard

from seglog.errors import CorruptRecordError, UnsupportedCompressionTypeError
from seglog.records import Compression
from seglog.records.compression import compress, decompress

from ..conftest import KAFKA_DATA

DATA = b"".join(b"record %d of a batch; " % i + bytes(random.Random(i).randbytes(20)) for i in range(20000))


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_round_trip(codec):
    assert decompress(codec, compress(codec, DATA)) == DATA
    assert decompress(codec, compress(codec, b"")) == b""


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


def test_lz4_written_like_the_java_client():
    frame = compress(Compression.LZ4, DATA)
    assert frame[4] == 0x60 and frame[5] == 0x40  # independent blocks, 64 KiB, no checksums
    assert lz4.frame.decompress(frame) == DATA


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
