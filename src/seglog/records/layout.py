"""The record batch v2 header, written once for Python (Kafka's ``DefaultRecordBatch``).

Big-endian; every offset is the previous field's offset plus its length, as
Kafka declares them::

    offset  size  field
    0       8     baseOffset             rewritten by the broker on append
    8       4     batchLength            bytes after this field
    12      4     partitionLeaderEpoch   rewritten by the broker on append
    16      1     magic                  2
    17      4     crc                    CRC32C of bytes 21..end
    21      2     attributes             bits 0-2 codec, 3 LogAppendTime,
                                         4 transactional, 5 control,
                                         6 has delete horizon
    23      4     lastOffsetDelta
    27      8     baseTimestamp          the delete horizon when bit 6 is set
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordCount
    61      ...   records (compressed as one block when the codec is not none)

The first 17 bytes (offset, length, 4 bytes, magic) are shared by every magic.
``records/_batch_layout.h`` is the same table for the C of every layer; a test
(tests/records/test_layout.py) holds the two equal.
"""

import struct

BASE_OFFSET_OFFSET = 0
BASE_OFFSET_LENGTH = 8
LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH
LENGTH_LENGTH = 4
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH
PARTITION_LEADER_EPOCH_LENGTH = 4
MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH
MAGIC_LENGTH = 1
CRC_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH
CRC_LENGTH = 4
ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH
ATTRIBUTES_LENGTH = 2
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH
LAST_OFFSET_DELTA_LENGTH = 4
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
BASE_TIMESTAMP_LENGTH = 8
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH
MAX_TIMESTAMP_LENGTH = 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH
PRODUCER_ID_LENGTH = 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH
PRODUCER_EPOCH_LENGTH = 2
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH
BASE_SEQUENCE_LENGTH = 4
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH
RECORDS_COUNT_LENGTH = 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH

HEADER_SIZE = RECORDS_OFFSET  # 61: Kafka's RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = LENGTH_OFFSET + LENGTH_LENGTH  # baseOffset + batchLength: the framing every magic shares
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH  # enough framing to learn a batch's size and magic
CRC_START = ATTRIBUTES_OFFSET  # the CRC covers the attributes to the end of the batch
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # the smallest batchLength of a v2 batch
MAGIC = 2

# The whole header in one unpack: baseOffset, batchLength, partitionLeaderEpoch, magic,
# crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
# producerEpoch, baseSequence, recordCount.
HEADER = struct.Struct(">qiibIhiqqqhii")

# attribute bits, by Kafka's DefaultRecordBatch names
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

assert HEADER.size == HEADER_SIZE
