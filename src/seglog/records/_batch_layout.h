/* The record batch v2 header, written once for the C of every layer (Kafka's
 * DefaultRecordBatch). records/layout.py is the same table for Python (its
 * docstring draws it); tests/records/test_layout.py holds the two equal.
 * Big-endian; every offset is the previous field's offset plus its length. */
#ifndef SEGLOG_BATCH_LAYOUT_H
#define SEGLOG_BATCH_LAYOUT_H

#include <stdint.h>

enum {
    BASE_OFFSET_OFFSET = 0,
    BASE_OFFSET_LENGTH = 8,
    LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH,
    LENGTH_LENGTH = 4,
    PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH,
    PARTITION_LEADER_EPOCH_LENGTH = 4,
    MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH,
    MAGIC_LENGTH = 1,
    CRC_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH,
    CRC_LENGTH = 4,
    ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH,
    ATTRIBUTES_LENGTH = 2,
    LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH,
    LAST_OFFSET_DELTA_LENGTH = 4,
    BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH,
    BASE_TIMESTAMP_LENGTH = 8,
    MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH,
    MAX_TIMESTAMP_LENGTH = 8,
    PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH,
    PRODUCER_ID_LENGTH = 8,
    PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH,
    PRODUCER_EPOCH_LENGTH = 2,
    BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH,
    BASE_SEQUENCE_LENGTH = 4,
    RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH,
    RECORDS_COUNT_LENGTH = 4,
    RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH,

    HEADER_SIZE = RECORDS_OFFSET,                            /* 61: Kafka's RECORD_BATCH_OVERHEAD */
    LOG_OVERHEAD = LENGTH_OFFSET + LENGTH_LENGTH,            /* the framing every magic shares */
    HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH,   /* enough to learn a batch's size and magic */
    CRC_START = ATTRIBUTES_OFFSET,                           /* the CRC covers attributes to the end */
    MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD,           /* the smallest batchLength of a v2 batch */
    MAGIC = 2,
};

/* attribute bits, by Kafka's DefaultRecordBatch names */
enum {
    COMPRESSION_CODEC_MASK = 0x07,
    TIMESTAMP_TYPE_MASK = 0x08,
    TRANSACTIONAL_FLAG_MASK = 0x10,
    CONTROL_FLAG_MASK = 0x20,
    DELETE_HORIZON_FLAG_MASK = 0x40,
};

/* The smallest batchLength of magic 0, 1 or 2 (batches.py's table, legacy.py's
 * MIN_MESSAGE_SIZE for 0 and 1): smaller is bad framing. */
static inline int32_t
min_batch_length(int magic)
{
    return magic == 0 ? 14 : magic == 1 ? 22 : MIN_BATCH_LENGTH;
}

#endif
