/* Zigzag varints as Kafka writes them (protobuf style): groups of 7 bits,
 * least significant first, high bit set while more bytes follow. Shared by
 * the record codec and the Arrow column decoder. */
#ifndef SEGLOG_VARINT_H
#define SEGLOG_VARINT_H

#include <stdint.h>
#include <stddef.h>

enum { VARINT_OK = 0, VARINT_TRUNCATED = -1, VARINT_TOO_LONG = -2 };

/* Reads a zigzag varint of at most max_bytes (5 for int32, 10 for int64). */
static inline int
varint_read(const uint8_t **pp, const uint8_t *end, int max_bytes, int64_t *out)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) { /* the common one-byte case */
        uint64_t v = *p;
        *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
        *pp = p + 1;
        return VARINT_OK;
    }
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return VARINT_TRUNCATED;
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (max_bytes == 5) { /* int32: bits past 32 are dropped, as Java does */
                uint32_t u = (uint32_t)v;
                *out = (int32_t)((u >> 1) ^ (~(u & 1) + 1));
            } else {
                *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
            }
            *pp = p;
            return VARINT_OK;
        }
        shift += 7;
    }
    return VARINT_TOO_LONG;
}

static inline size_t
varint_size(int64_t value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *
varint_write(uint8_t *p, int64_t value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

#endif
