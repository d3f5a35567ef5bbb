/* CRC32C (Castagnoli), the checksum of a v2 record batch (bytes CRC_START..end),
 * for the C walks that check or rewrite batches without the GIL (storage's
 * append check, recovery and offset assignment) and for records.crc32c. With
 * the CPU's SSE 4.2 instruction, three streams at a time; a table-driven
 * fallback elsewhere. Call crc32c_init() once, in the module's init, before
 * crc32c_of. Every function is static: each extension that includes this
 * header has its own tables. */
#ifndef SEGLOG_CRC32C_H
#define SEGLOG_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define CRC32C_X86 1
#endif

#define CRC_POLY 0x82F63B78u /* Castagnoli, reflected */
#define CRC_LONG 4096        /* bytes a stream of the three-stream loops takes */
#define CRC_SHORT 256

static uint32_t crc_table[8][256];               /* slicing by eight */
static uint32_t crc_shift_long[4][256], crc_shift_short[4][256]; /* x^(8*LEN) mod P, a byte at a time */

static uint32_t
crc_soft(uint32_t crc, const uint8_t *p, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff] ^
              crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
    }
#endif
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

/* The register after `len` zero bytes more, by the tables of that length. */
static inline uint32_t
crc_shift(uint32_t crc, uint32_t table[4][256])
{
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^ table[2][(crc >> 16) & 0xff] ^ table[3][crc >> 24];
}

/* The register after `len` zero bytes is linear in the register before: tabulate
 * it from the images of the 32 single bits. */
static void
crc_shift_init(uint32_t table[4][256], size_t len)
{
    static const uint8_t zeros[CRC_LONG];
    uint32_t bit[32];
    for (int i = 0; i < 32; i++)
        bit[i] = crc_soft(1u << i, zeros, len);
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b >> i & 1)
                    v ^= bit[8 * k + i];
            table[k][b] = v;
        }
}

static void
crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ CRC_POLY : c >> 1;
        crc_table[0][n] = c;
    }
    for (int n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^ crc_table[0][crc_table[k - 1][n] & 0xff];
    crc_shift_init(crc_shift_long, CRC_LONG);
    crc_shift_init(crc_shift_short, CRC_SHORT);
}

#ifdef CRC32C_X86
/* The crc32 instruction has a latency of three cycles and a throughput of one:
 * three independent streams keep it busy, and their registers are joined by
 * shifting the first over the bytes of the others (the CRC is linear). A batch
 * arriving in an append is seldom in cache: each stream prefetches 2 KiB ahead
 * (16 KiB, cold: 1.65 us -> 1.3 us). */
#define CRC_AHEAD 2048
#define CRC_STREAMS(len, table)                                                 \
    while (n >= 3 * (len)) {                                                    \
        uint64_t c1 = 0, c2 = 0;                                                \
        for (const uint8_t *stop = p + (len); p < stop; p += 8) {               \
            uint64_t w0, w1, w2;                                                \
            if (!((uintptr_t)p & 63)) { /* a line each, well ahead */           \
                __builtin_prefetch(p + CRC_AHEAD);                              \
                __builtin_prefetch(p + (len) + CRC_AHEAD);                      \
                __builtin_prefetch(p + 2 * (len) + CRC_AHEAD);                  \
            }                                                                   \
            memcpy(&w0, p, 8);                                                  \
            memcpy(&w1, p + (len), 8);                                          \
            memcpy(&w2, p + 2 * (len), 8);                                      \
            c0 = _mm_crc32_u64(c0, w0);                                         \
            c1 = _mm_crc32_u64(c1, w1);                                         \
            c2 = _mm_crc32_u64(c2, w2);                                         \
        }                                                                       \
        c0 = crc_shift((uint32_t)c0, table) ^ (uint32_t)c1;                     \
        c0 = crc_shift((uint32_t)c0, table) ^ (uint32_t)c2;                     \
        p += 2 * (len);                                                         \
        n -= 3 * (len);                                                         \
    }

__attribute__((target("sse4.2"))) static uint32_t
crc_hard(uint32_t crc, const uint8_t *p, size_t n)
{
    for (; n && ((uintptr_t)p & 7); n--)
        crc = _mm_crc32_u8(crc, *p++);
    uint64_t c0 = crc;
    CRC_STREAMS(CRC_LONG, crc_shift_long)
    CRC_STREAMS(CRC_SHORT, crc_shift_short)
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c0 = _mm_crc32_u64(c0, w);
    }
    crc = (uint32_t)c0;
    while (n--)
        crc = _mm_crc32_u8(crc, *p++);
    return crc;
}
#endif

static uint32_t (*crc_update)(uint32_t, const uint8_t *, size_t) = crc_soft;

static inline uint32_t
crc32c_of(const uint8_t *p, size_t n)
{
    return ~crc_update(~0u, p, n);
}

/* Fills the tables and picks the CPU's instruction when it has one; returns 1 then, else 0. */
static int
crc32c_init(void)
{
    crc_init();
#ifdef CRC32C_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        crc_update = crc_hard;
#endif
    return crc_update != crc_soft;
}

#endif
