/* lz4 frames as Kafka's Java client writes them (KafkaLZ4BlockOutputStream), for the C
 * of every layer: the frame header 04 22 4D 18 | 60 40 | 82 (version 1, independent
 * blocks, no checksums, 64 KiB blocks), then each 64 KiB of input compressed by
 * lz4-java's fast compressor, which is liblz4's LZ4_compress_default, or stored (size
 * word's high bit) when that is no smaller, then the end mark 0. records/compression.py
 * draws the frame and reads every other shape of it; tests/records/test_compression.py
 * holds the two equal and the output equal to the Java client's bytes.
 *
 * liblz4 is python-lz4's (a dependency): its extension module exports liblz4's
 * functions, found here by name in the module already loaded, so that one liblz4
 * serves Python and C and the build needs no lz4 headers. Only the stable API is used.
 *
 * Not thread-safe: the compression state is one per extension, used under the GIL. */
#ifndef SEGLOG_LZ4_H
#define SEGLOG_LZ4_H

#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

enum {
    LZ4_FRAME_HEADER_SIZE = 7,
    LZ4_FRAME_BLOCK = 64 * 1024, /* the Java client's block, and the most one of its blocks holds */
    LZ4_STORED_BIT_SHIFT = 31,   /* a block size word's high bit: the block is stored as it is */
};
static const uint8_t LZ4_FRAME_HEADER[LZ4_FRAME_HEADER_SIZE] = {0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82};

static struct {
    int (*decompress_safe)(const char *src, char *dst, int src_size, int dst_capacity);
    int (*compress_fast_ext_state)(void *state, const char *src, char *dst, int src_size, int dst_capacity,
                                   int acceleration);
    void *state;
} lz4lib;

/* Finds liblz4's functions in python-lz4's block module. 0, or -1 with ImportError set. */
static int
lz4_init(void)
{
    PyObject *module = PyImport_ImportModule("lz4.block._block");
    PyObject *file = module ? PyObject_GetAttrString(module, "__file__") : NULL;
    PyObject *path = file ? PyUnicode_EncodeFSDefault(file) : NULL;
    Py_XDECREF(module);
    Py_XDECREF(file);
    if (path == NULL)
        return -1;
    void *lib = dlopen(PyBytes_AS_STRING(path), RTLD_NOW | RTLD_NOLOAD);
    Py_DECREF(path);
    int (*sizeof_state)(void) = NULL;
    if (lib != NULL) {
        *(void **)&lz4lib.decompress_safe = dlsym(lib, "LZ4_decompress_safe");
        *(void **)&lz4lib.compress_fast_ext_state = dlsym(lib, "LZ4_compress_fast_extState");
        *(void **)&sizeof_state = dlsym(lib, "LZ4_sizeofState");
    }
    if (!lz4lib.decompress_safe || !lz4lib.compress_fast_ext_state || !sizeof_state) {
        PyErr_SetString(PyExc_ImportError, "python-lz4's block module does not export liblz4's functions");
        return -1;
    }
    if (lz4lib.state == NULL && (lz4lib.state = PyMem_RawMalloc((size_t)sizeof_state())) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static inline uint32_t
lz4_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void
lz4_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

/* The most bytes lz4_frame_compress writes for n bytes of input. */
static inline size_t
lz4_frame_bound(size_t n)
{
    return LZ4_FRAME_HEADER_SIZE + n + 4 * (n / LZ4_FRAME_BLOCK + 1) + 4;
}

/* n bytes compressed into dst (room for lz4_frame_bound(n)); returns the frame's size. */
static size_t
lz4_frame_compress(const uint8_t *src, size_t n, uint8_t *dst)
{
    uint8_t *p = dst;
    memcpy(p, LZ4_FRAME_HEADER, LZ4_FRAME_HEADER_SIZE);
    p += LZ4_FRAME_HEADER_SIZE;
    for (size_t at = 0; at < n; at += LZ4_FRAME_BLOCK) {
        int size = (int)(n - at < LZ4_FRAME_BLOCK ? n - at : LZ4_FRAME_BLOCK);
        /* one byte less room than the input: 0 when compressing would not make it smaller */
        int packed = lz4lib.compress_fast_ext_state(lz4lib.state, (const char *)src + at, (char *)p + 4, size,
                                                    size - 1, 1);
        if (packed > 0) {
            lz4_put_le32(p, (uint32_t)packed);
        } else {
            lz4_put_le32(p, (uint32_t)size | 1u << LZ4_STORED_BIT_SHIFT);
            memcpy(p + 4, src + at, (size_t)size);
            packed = size;
        }
        p += 4 + packed;
    }
    lz4_put_le32(p, 0);
    return (size_t)(p + 4 - dst);
}

/* The most bytes a frame of the Java client's shape holds, from its block size words: a
 * stored block its size, a compressed one LZ4_FRAME_BLOCK at most, and no more than lz4's
 * greatest expansion (a match's length grows by 255 a byte) allows, so that a small
 * hostile frame claims little room; -1 when the frame is of another shape or damaged, for
 * records/compression.py to read or to name the fault. A block that would decompress to
 * more fails, and Python reads the frame. */
static Py_ssize_t
lz4_frame_bound_of(const uint8_t *src, size_t n)
{
    if (n < LZ4_FRAME_HEADER_SIZE || memcmp(src, LZ4_FRAME_HEADER, LZ4_FRAME_HEADER_SIZE) != 0)
        return -1;
    size_t pos = LZ4_FRAME_HEADER_SIZE;
    Py_ssize_t bound = 0;
    for (;;) {
        if (n - pos < 4)
            return -1;
        uint32_t word = lz4_le32(src + pos);
        pos += 4;
        if (word == 0)
            return bound;
        uint32_t size = word & ~(1u << LZ4_STORED_BIT_SHIFT);
        if (size > LZ4_FRAME_BLOCK || size > n - pos)
            return -1;
        pos += size;
        if (word >> LZ4_STORED_BIT_SHIFT)
            bound += size;
        else
            bound += (Py_ssize_t)size * 255 + 16 < LZ4_FRAME_BLOCK ? (Py_ssize_t)size * 255 + 16 : LZ4_FRAME_BLOCK;
    }
}

/* Decompresses a frame whose lz4_frame_bound_of is >= 0 into dst (room for that bound):
 * its size, or -1 when a block is damaged or the frame holds more than the bound. */
static Py_ssize_t
lz4_frame_decompress(const uint8_t *src, uint8_t *dst, Py_ssize_t capacity)
{
    size_t pos = LZ4_FRAME_HEADER_SIZE;
    Py_ssize_t out = 0;
    for (;;) {
        uint32_t word = lz4_le32(src + pos);
        pos += 4;
        if (word == 0)
            return out;
        int size = (int)(word & ~(1u << LZ4_STORED_BIT_SHIFT));
        if (word >> LZ4_STORED_BIT_SHIFT) {
            if (size > capacity - out) /* a block before took more than its bound */
                return -1;
            memcpy(dst + out, src + pos, (size_t)size);
            out += size;
        } else {
            int room = capacity - out < LZ4_FRAME_BLOCK ? (int)(capacity - out) : LZ4_FRAME_BLOCK;
            int got = lz4lib.decompress_safe((const char *)src + pos, (char *)dst + out, size, room);
            if (got < 0)
                return -1;
            out += got;
        }
        pos += (size_t)size;
    }
}

#endif
