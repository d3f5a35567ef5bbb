/* The log cleaner's per-record loops, in C: mapping keys to their latest offset
 * (Kafka's SkimpyOffsetMap) and filtering the records of a batch (Kafka's
 * MemoryRecords.filterTo), whole batches at a time.
 *
 * The offset map is a bytearray owned by storage/offset_map.py, whose docstring
 * draws its layout: `slots` entries of 24 bytes, {lo, hi, offset}, where (lo, hi)
 * is the 128-bit SipHash-2-4 of a key under the map's 128-bit seed, lo's bit 0
 * forced to 1 so that lo == 0 means an empty slot. The marks are one bit per
 * offset of the dirty section: set when a record loses (a later record has its
 * key, or it has no key), so the rewrite need not hash a dirty key again.
 *
 * Two kinds of calls, their arguments after the buffers by keyword:
 *   - one batch (map_batch, filter_batch): a v2 batch and, when it is compressed,
 *     its records decompressed by Python, which also recompresses the result;
 *   - a run of batches (map_batches, filter_batches): walk a buffer of batches
 *     and handle every non-transactional, non-control v2 batch, uncompressed or
 *     lz4 in the Java client's frame (decompressed into a buffer the caller owns,
 *     recompressed as the Java client does: records/_lz4.h), stopping at the
 *     first one whose fate Python decides (legacy, otherwise compressed,
 *     control, transactional, damaged, or one that would lose all its records).
 *     Python's rules (cleaner.py) stay the referee; C takes the common case.
 * And two for producer state (producer_state.py): skim_batches steps over the
 * batch headers that tell it nothing (no producer id), skim_file does so past large
 * batches reading their headers alone from the file.
 *
 * It lives beside its owners (offset_map.py, cleaner.py, producer_state.py); the
 * format comes from records/ through its headers (_batch_layout.h, _crc32c.h,
 * _record.h).
 * Nothing here trusts a length: records are parsed by _record.h, which checks
 * every field against the bytes present, and faults raise CorruptRecordError
 * naming the batch's position. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "records/_batch_layout.h"
#include "records/_crc32c.h"
#include "records/_lz4.h"
#include "records/_record.h"

static PyObject *CorruptRecordError; /* seglog.errors.CorruptRecordError */
static Py_ssize_t max_decompressed;  /* seglog.records.compression.MAX_DECOMPRESSED_BYTES */


static inline uint64_t
get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static inline void
put_be(uint8_t *p, int n, uint64_t v)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline int64_t be64(const uint8_t *p) { return (int64_t)get_be(p, 8); }
static inline int32_t be32(const uint8_t *p) { return (int32_t)(uint32_t)get_be(p, 4); }

/* Java's long arithmetic wraps; so does an offset or timestamp read from a hostile batch */
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

static PyObject *
corrupt(Py_ssize_t position, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, args);
    va_end(args);
    PyObject *kwargs = msg ? Py_BuildValue("{s:n}", "position", position) : NULL;
    PyObject *argv = kwargs ? PyTuple_Pack(1, msg) : NULL;
    PyObject *exc = argv ? PyObject_Call(CorruptRecordError, argv, kwargs) : NULL;
    if (exc != NULL) {
        PyErr_SetObject(CorruptRecordError, exc);
        Py_DECREF(exc);
    }
    Py_XDECREF(msg);
    Py_XDECREF(kwargs);
    Py_XDECREF(argv);
    return NULL;
}

/* ------------------------------------------------------------------ SipHash-2-4-128
 * Aumasson and Bernstein's keyed hash, with its 128-bit output: a pseudorandom
 * function of the key, so nobody who does not know the map's seed can choose
 * keys that collide (two keys with one hash would count as one key and the
 * older one's latest record would be lost). */

static inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

#define SIPROUND                                                                        \
    do {                                                                                \
        v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);                      \
        v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;                                         \
        v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;                                         \
        v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);                      \
    } while (0)

static inline uint64_t
get_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

typedef struct {
    uint64_t lo, hi;
} Hash;

static Hash
siphash128(const uint8_t *data, size_t len, uint64_t k0, uint64_t k1)
{
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL ^ 0xee;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m;
        memcpy(&m, data + i, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        m = __builtin_bswap64(m);
#endif
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)len << 56 | get_le(data + whole, len - whole);
    v3 ^= last;
    SIPROUND;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xee;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    Hash h;
    h.lo = v0 ^ v1 ^ v2 ^ v3;
    v1 ^= 0xdd;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    h.hi = v0 ^ v1 ^ v2 ^ v3;
    return h;
}

/* ------------------------------------------------------------------ the map */

typedef struct {
    uint64_t lo, hi;
    int64_t offset;
} Entry;
_Static_assert(sizeof(Entry) == 24, "a map entry is 24 bytes");

enum { DOUBLE_HASH_PROBES = 16 };

typedef struct {
    Entry *slots;
    uint64_t n;
    uint64_t k0, k1;
} Map;

static inline Hash
key_hash(const Map *m, const uint8_t *key, size_t len)
{
    Hash h = siphash128(key, len, m->k0, m->k1);
    h.lo |= 1;
    return h;
}

/* The first probe: hi scaled to [0, n) by a multiply (Lemire's), cheaper than a division. */
static inline uint64_t
first_slot(const Map *m, Hash h)
{
#ifdef __SIZEOF_INT128__
    return (uint64_t)(((unsigned __int128)h.hi * m->n) >> 64);
#else
    return h.hi % m->n;
#endif
}

static inline int
holds(const Entry *e, Hash h)
{
    return e->lo == 0 || (e->lo == h.lo && e->hi == h.hi);
}

/* The slot after slot i, the second probe: next to the first in memory, so that the
 * prefetch of the first (prefetch_slots) brings it too, where a probe by double hashing
 * lands anywhere and waits for memory. */
static inline uint64_t
next_slot(const Map *m, uint64_t i)
{
    return i + 1 < m->n ? i + 1 : 0;
}

/* The cache lines of the first probe and the second: an entry is 24 bytes, so the two
 * span 48 bytes, two lines at most (the wrapped second probe, slot 0, is left alone). */
static inline void
prefetch_slots(const Map *m, uint64_t first)
{
    const char *at = (const char *)&m->slots[first];
    __builtin_prefetch(at, 1);
    if (first + 1 < m->n)
        __builtin_prefetch(at + 2 * sizeof(Entry) - 1, 1);
}

/* The probes after the first (slot i): the next slot, then double hashing from i, then
 * linear probing, which reaches every slot. The map always keeps an empty slot
 * (max_entries < slots), so the search ends. */
static Entry *
find_beyond(const Map *m, Hash h, uint64_t i)
{
    Entry *e = &m->slots[next_slot(m, i)];
    if (holds(e, h))
        return e;
    uint64_t n = m->n, step = 1 + h.lo % (n - 1);
    for (int k = 0; k < DOUBLE_HASH_PROBES; k++) {
        i = i >= n - step ? i - (n - step) : i + step; /* (i + step) mod n without overflow */
        if (holds(&m->slots[i], h))
            return &m->slots[i];
    }
    for (uint64_t k = 0; k < n; k++) {
        i = i + 1 < n ? i + 1 : 0;
        if (holds(&m->slots[i], h))
            return &m->slots[i];
    }
    return NULL; /* unreachable while an empty slot remains */
}

/* The entry holding h, or the empty one where it would go; `first` is first_slot(m, h). */
static inline Entry *
find_from(const Map *m, Hash h, uint64_t first)
{
    Entry *e = &m->slots[first];
    return holds(e, h) ? e : find_beyond(m, h, first);
}

static inline Entry *
find(const Map *m, Hash h)
{
    return find_from(m, h, first_slot(m, h));
}

/* Gets the map's bytearray; n is 0 when it is too small to be a map. */
static int
map_open(Map *m, Py_buffer *buf, unsigned long long k0, unsigned long long k1)
{
    if (buf->len % (Py_ssize_t)sizeof(Entry) || buf->len < 2 * (Py_ssize_t)sizeof(Entry)) {
        PyErr_SetString(PyExc_ValueError, "an offset map is a whole number of 24-byte entries, two at least");
        return -1;
    }
    m->slots = buf->buf;
    m->n = (uint64_t)buf->len / sizeof(Entry);
    m->k0 = k0;
    m->k1 = k1;
    return 0;
}

typedef struct {
    uint8_t *bits; /* one bit an offset: the record loses */
    int64_t first, count;
} Marks;

static inline void
mark(const Marks *mk, int64_t offset)
{
    uint64_t rel = (uint64_t)offset - (uint64_t)mk->first;
    if (rel < (uint64_t)mk->count)
        mk->bits[rel >> 3] |= (uint8_t)(1u << (rel & 7));
}

static inline int
marked(const Marks *mk, int64_t offset, int *covered)
{
    uint64_t rel = (uint64_t)offset - (uint64_t)mk->first;
    *covered = rel < (uint64_t)mk->count;
    return *covered && (mk->bits[rel >> 3] >> (rel & 7) & 1);
}

/* Maps h, found at e, to offset, marking the offset it replaces; -1 (and nothing changed)
 * when h is new and there is no room left. */
static inline int
put(Entry *e, const Marks *mk, Hash h, int64_t offset, Py_ssize_t *room)
{
    if (e->lo == 0) {
        if (*room <= 0)
            return -1;
        e->lo = h.lo;
        e->hi = h.hi;
        (*room)--;
    } else {
        mark(mk, e->offset); /* the key's earlier record loses */
    }
    e->offset = offset;
    return 0;
}

/* -1 when the key is not in the map */
static inline int64_t
lookup(const Map *m, Hash h)
{
    Entry *e = find(m, h);
    return e->lo ? e->offset : -1;
}

static int
get_marks(Marks *mk, Py_buffer *buf, long long first, long long count)
{
    if (count < 0 || (count + 7) / 8 > buf->len) {
        PyErr_SetString(PyExc_ValueError, "marks hold fewer bits than their count");
        return -1;
    }
    mk->bits = buf->buf;
    mk->first = first;
    mk->count = count;
    return 0;
}

/* ------------------------------------------------------------------ batches */

typedef struct {
    int64_t base_offset, base_ts, max_ts;
    int32_t length, last_delta, count;
    int attributes;
    const uint8_t *start; /* the batch's first byte */
    const uint8_t *records, *records_end;
    Py_ssize_t position; /* where the batch starts in its file, for errors */
} Batch;

static void
batch_header(Batch *b, const uint8_t *p)
{
    b->start = p;
    b->base_offset = be64(p + BASE_OFFSET_OFFSET);
    b->length = be32(p + LENGTH_OFFSET);
    b->attributes = (int)(int16_t)get_be(p + ATTRIBUTES_OFFSET, ATTRIBUTES_LENGTH);
    b->last_delta = be32(p + LAST_OFFSET_DELTA_OFFSET);
    b->base_ts = be64(p + BASE_TIMESTAMP_OFFSET);
    b->max_ts = be64(p + MAX_TIMESTAMP_OFFSET);
    b->count = be32(p + RECORDS_COUNT_OFFSET);
}

/* The buffers of one batch: the batch, and its records decompressed (or nothing). */
typedef struct {
    Py_buffer batch, section;
} BatchArgs;

static void
batch_args_release(BatchArgs *a)
{
    if (a->batch.obj)
        PyBuffer_Release(&a->batch);
    if (a->section.obj)
        PyBuffer_Release(&a->section);
}

/* The batch in a->batch (its header, and its records unless `section` is not None: then
 * they are the records decompressed). */
static int
batch_from(Batch *b, BatchArgs *a, PyObject *section, Py_ssize_t position)
{
    b->position = position;
    if (section != Py_None && PyObject_GetBuffer(section, &a->section, PyBUF_SIMPLE) < 0)
        return -1;
    if (a->batch.len < HEADER_SIZE) {
        corrupt(position, "batch of %zd bytes is shorter than a header", a->batch.len);
        return -1;
    }
    batch_header(b, a->batch.buf);
    if (a->section.obj) {
        b->records = a->section.buf;
        b->records_end = b->records + a->section.len;
    } else {
        b->records = (const uint8_t *)a->batch.buf + HEADER_SIZE;
        b->records_end = (const uint8_t *)a->batch.buf + a->batch.len;
    }
    return 0;
}

static int
check_count(const Batch *b)
{
    Py_ssize_t len = b->records_end - b->records;
    if (b->count >= 0 && b->count <= len / 7) /* a record takes 7 bytes at least */
        return 0;
    corrupt(b->position, "record count %d does not fit in %zd bytes of records", (int)b->count, len);
    return -1;
}

static int
record_fault(const Batch *b, Py_ssize_t index, ParseResult res)
{
    corrupt(b->position, "record %zd: %s at byte %zd of the records", index, res.fault,
            (Py_ssize_t)(res.at - b->records));
    return -1;
}

/* The records ended cleanly, after `found` of them, before the count did (a record cut
 * short inside its bytes is a truncated record, which parse_record tells). */
static int
missing_records(const Batch *b, Py_ssize_t found)
{
    corrupt(b->position, "record count %d disagrees with the batch: its records end after %zd", (int)b->count,
            found);
    return -1;
}

static int
trailing_bytes(const Batch *b, const uint8_t *p)
{
    corrupt(b->position, "record count %d disagrees with the batch: %zd bytes follow the last record", (int)b->count,
            (Py_ssize_t)(b->records_end - p));
    return -1;
}

/* ------------------------------------------------------------------ mapping */

/* Keys are hashed a chunk ahead of their insertion, and their first two slots prefetched:
 * the map is larger than the caches, so each probe would otherwise wait for memory. */
enum { MAP_AHEAD = 32 };

typedef struct {
    Hash h;
    uint64_t slot; /* the first probe */
    int64_t offset;
    int keyed;
} Pending;

/* Puts the keys of records [skip, count) whose offset is >= start_offset. Returns the
 * index of the first record whose key found no room (the map is full), count when all
 * went in, -1 on a fault. *latest becomes the offset of the last record put. */
static Py_ssize_t
map_records_of(const Batch *b, const Map *m, const Marks *mk, Py_ssize_t *room, int64_t start_offset, Py_ssize_t skip,
               int64_t *latest)
{
    if (check_count(b) < 0)
        return -1;
    const uint8_t *p = b->records, *end = b->records_end;
    Pending ahead[MAP_AHEAD];
    Py_ssize_t i = 0;
    while (i < b->count) {
        Py_ssize_t first = i, n = 0;
        for (; i < b->count && n < MAP_AHEAD; i++, n++) {
            RawRecord r;
            if (p == end)
                return missing_records(b, i);
            ParseResult res = parse_record(&p, end, &r);
            if (res.fault)
                return record_fault(b, i, res);
            Pending *q = &ahead[n];
            q->offset = wrap_add(b->base_offset, r.off_delta);
            q->keyed = r.key_len >= 0;
            if (q->keyed && i >= skip && q->offset >= start_offset) {
                q->h = key_hash(m, r.key, (size_t)r.key_len);
                q->slot = first_slot(m, q->h);
                prefetch_slots(m, q->slot);
            }
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            Pending *q = &ahead[k];
            if (first + k < skip || q->offset < start_offset)
                continue;
            if (!q->keyed) {
                mark(mk, q->offset); /* dropped: a compacted log's records need keys */
                continue;
            }
            if (put(find_from(m, q->h, q->slot), mk, q->h, q->offset, room) < 0)
                return first + k;
            *latest = q->offset;
        }
    }
    if (p != end)
        return trailing_bytes(b, p);
    return b->count;
}

/* The map and the marks of a call, over the Python buffers holding them. */
typedef struct {
    Py_buffer table, marks;
    Map map;
    Marks mk;
} MapArgs;

static void
map_args_release(MapArgs *a)
{
    if (a->table.obj)
        PyBuffer_Release(&a->table);
    if (a->marks.obj)
        PyBuffer_Release(&a->marks);
}

static int
map_args_open(MapArgs *a, unsigned long long k0, unsigned long long k1, long long first, long long count)
{
    return map_open(&a->map, &a->table, k0, k1) < 0 || get_marks(&a->mk, &a->marks, first, count) < 0 ? -1 : 0;
}

PyDoc_STRVAR(map_batch_doc,
             "map_batch(batch, section, *, table, k0, k1, room, start_offset, marks, marks_first, marks_count, "
             "skip, latest, position) -> (added, full_at, latest)\n\n"
             "Put the keys of a v2 batch's records [skip:] whose offset is >= start_offset into the map\n"
             "(table, seeded by k0, k1) with room for `room` new keys, marking the records that lose.\n"
             "`section` holds the records decompressed, or is None for an uncompressed batch.\n"
             "full_at is -1, or the index of the first record whose key found no room;\n"
             "latest is the offset of the last record put (the given latest if none was).");

static PyObject *
map_batch(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"batch", "section", "table", "k0", "k1", "room", "start_offset", "marks",
                            "marks_first", "marks_count", "skip", "latest", "position", NULL};
    MapArgs a = {0};
    BatchArgs ba = {0};
    PyObject *section, *result = NULL;
    unsigned long long k0, k1;
    Py_ssize_t room, skip, position;
    long long start_offset, first, count, latest;
    Batch b;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O$w*KKnLw*LLnLn:map_batch", names, &ba.batch, &section,
                                     &a.table, &k0, &k1, &room, &start_offset, &a.marks, &first, &count, &skip,
                                     &latest, &position) ||
        map_args_open(&a, k0, k1, first, count) < 0 || batch_from(&b, &ba, section, position) < 0)
        goto done;
    Py_ssize_t before = room;
    int64_t last = latest;
    Py_ssize_t at = map_records_of(&b, &a.map, &a.mk, &room, start_offset, skip, &last);
    if (at >= 0)
        result = Py_BuildValue("nnL", before - room, at == b.count ? (Py_ssize_t)-1 : at, (long long)last);
done:
    map_args_release(&a);
    batch_args_release(&ba);
    return result;
}

/* Where a walk over a buffer of batches stopped (WALK_ON: it goes on; WALK_ERROR: an
 * exception is set). */
enum { WALK_ERROR = -2, WALK_ON = -1, WALK_END = 0, WALK_PYTHON = 1, WALK_FLUSH = 2 };
/* the batches a walk leaves to Python: transactional, control, compressed (but lz4, when
 * the walk has a buffer to decompress into) */
enum { PYTHON_ATTRIBUTES = TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK, CODEC_LZ4 = 3 };

/* The batch at p, if whole: WALK_END when fewer bytes than a whole batch remain,
 * WALK_PYTHON when Python must look at it (bad framing, another magic, transactional,
 * control, or compressed by a codec other than lz4, or lz4 when `lz4` is 0), else
 * WALK_ON with its header read. */
static int
next_batch(Batch *b, const uint8_t *p, const uint8_t *end, Py_ssize_t position, int lz4)
{
    if (end - p < HEADER_SIZE_UP_TO_MAGIC)
        return WALK_END;
    int32_t size = be32(p + LENGTH_OFFSET);
    uint8_t magic = p[MAGIC_OFFSET];
    if (magic > MAGIC || size < min_batch_length(magic))
        return WALK_PYTHON; /* BatchIterator raises on it */
    if ((Py_ssize_t)size > end - p - LOG_OVERHEAD)
        return WALK_END;
    if (magic != MAGIC)
        return WALK_PYTHON;
    batch_header(b, p);
    int codec = b->attributes & COMPRESSION_CODEC_MASK;
    if ((b->attributes & PYTHON_ATTRIBUTES) || (codec && !(codec == CODEC_LZ4 && lz4)))
        return WALK_PYTHON;
    b->records = p + HEADER_SIZE;
    b->records_end = p + LOG_OVERHEAD + size;
    b->position = position;
    return WALK_ON;
}

/* The records of batch b (as next_batch read it) ready to walk: an lz4 batch's
 * decompressed into the bytearray `section`, b's records then pointing there. WALK_ON,
 * or WALK_PYTHON when Python must read the frame (of another shape than the Java
 * client's, damaged, or too large), or WALK_ERROR. */
static int
records_ready(Batch *b, PyObject *section)
{
    if (!(b->attributes & COMPRESSION_CODEC_MASK))
        return WALK_ON;
    const uint8_t *frame = b->start + HEADER_SIZE;
    Py_ssize_t bound = lz4_frame_bound_of(frame, (size_t)(b->records_end - frame));
    if (bound < 0 || bound > max_decompressed)
        return WALK_PYTHON;
    if (PyByteArray_GET_SIZE(section) < bound && PyByteArray_Resize(section, bound) < 0)
        return WALK_ERROR;
    uint8_t *dst = (uint8_t *)PyByteArray_AS_STRING(section);
    Py_ssize_t size = lz4_frame_decompress(frame, dst, bound);
    if (size < 0)
        return WALK_PYTHON;
    b->records = dst;
    b->records_end = dst + size;
    return WALK_ON;
}

PyDoc_STRVAR(map_batches_doc,
             "map_batches(view, pos, origin, *, table, k0, k1, room, start_offset, marks, marks_first, "
             "marks_count, latest, section) -> (pos, stop, added, latest, records, bytes)\n\n"
             "map_batch over the whole batches of `view` from `pos` (at byte `origin` of its file), for as long\n"
             "as they are non-transactional, non-control v2 batches with fewer records than the room left,\n"
             "uncompressed, or lz4 frames as the Java client writes them when `section` is a bytearray (their\n"
             "records are decompressed into it; it grows to the largest).\n"
             "stop is 0 at the end of the whole batches (pos is there), 1 at a batch for Python\n"
             "(pos is its start). latest also takes the last offset of every batch that reaches start_offset.\n"
             "records and bytes count the batches mapped.");

static PyObject *
map_batches(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"view", "pos", "origin", "table", "k0", "k1", "room", "start_offset", "marks",
                            "marks_first", "marks_count", "latest", "section", NULL};
    MapArgs a = {0};
    Py_buffer view = {0};
    unsigned long long k0, k1;
    Py_ssize_t room, pos, origin;
    long long start_offset, first, count, latest;
    PyObject *result = NULL, *section;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nn$w*KKnLw*LLLO:map_batches", names, &view, &pos, &origin,
                                     &a.table, &k0, &k1, &room, &start_offset, &a.marks, &first, &count, &latest,
                                     &section))
        goto done;
    if (section != Py_None && !PyByteArray_Check(section)) {
        PyErr_SetString(PyExc_TypeError, "section must be a bytearray or None");
        goto done;
    }
    if (map_args_open(&a, k0, k1, first, count) < 0)
        goto done;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_ValueError, "position out of the buffer");
        goto done;
    }
    const uint8_t *base = view.buf, *end = base + view.len;
    Py_ssize_t before = room, records = 0, bytes = 0;
    int64_t last = latest;
    int stop;
    for (;;) {
        Batch b = {0};
        stop = next_batch(&b, base + pos, end, origin + pos, section != Py_None);
        if (stop != WALK_ON)
            break;
        if (b.count > room) {
            stop = WALK_PYTHON; /* it may fill the map: Python grows it or stops there */
            break;
        }
        Py_ssize_t size = b.records_end - b.start;
        if ((stop = records_ready(&b, section)) == WALK_ERROR)
            goto done;
        if (stop != WALK_ON)
            break;
        if (map_records_of(&b, &a.map, &a.mk, &room, start_offset, 0, &last) < 0)
            goto done;
        int64_t batch_last = wrap_add(b.base_offset, b.last_delta);
        if (batch_last >= start_offset && batch_last > last)
            last = batch_last;
        records += b.count;
        bytes += size;
        pos += size;
    }
    result = Py_BuildValue("ninLnn", pos, stop, before - room, (long long)last, records, bytes);
done:
    map_args_release(&a);
    if (view.obj)
        PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ filtering */

/* Kafka's shouldRetainRecord for data records: a record past the map's latest offset
 * stays; below it a record without a key goes (counted invalid); one whose key maps to
 * a later offset goes (for a dirty record its mark says so); a tombstone goes once its
 * batch's delete horizon has passed (retain_deletes false). */
typedef struct {
    const Map *map;
    int64_t latest;
    const Marks *mk;
    int64_t now, horizon; /* a new delete horizon: now + delete.retention.ms */
} Rule;

typedef struct {
    Py_ssize_t kept, invalid;
    int tombstone;        /* a tombstone is kept */
    int64_t first_ts;     /* of the first kept record */
    int64_t max_ts;       /* of the kept records (CreateTime) */
    Py_ssize_t bytes;     /* of the kept records as they are */
} Kept;

static inline int64_t
record_ts(const Batch *b, int64_t ts_delta)
{
    return b->attributes & TIMESTAMP_TYPE_MASK ? b->max_ts : wrap_add(b->base_ts, ts_delta);
}

/* Where the timestamp delta of a record (one parse_record accepted) ends, and the record. */
typedef struct {
    const uint8_t *attributes, *after_ts, *next;
    int64_t ts_delta;
} Fields;

static inline void
record_fields(const uint8_t *start, const uint8_t *end, Fields *f)
{
    const uint8_t *p = start;
    int64_t length = 0;
    varint_read(&p, end, 5, &length);
    f->next = p + length;
    f->attributes = p++;
    f->ts_delta = 0;
    varint_read(&p, f->next, 10, &f->ts_delta);
    f->after_ts = p;
}

/* The body of a record once its timestamp delta is relative to base_ts; *delta is that delta. */
static inline int64_t
restamped_body(const Batch *b, const Fields *f, int64_t base_ts, int64_t *delta)
{
    *delta = (int64_t)((uint64_t)record_ts(b, f->ts_delta) - (uint64_t)base_ts);
    return 1 + (int64_t)varint_size(*delta) + (f->next - f->after_ts);
}

/* Pass 1: which records stay (keep[i]), and the size of what stays. */
static int
decide(const Batch *b, const Rule *rule, uint8_t *keep, Kept *k)
{
    if (check_count(b) < 0)
        return -1;
    int retain_deletes = !(b->attributes & DELETE_HORIZON_FLAG_MASK) || rule->now < b->base_ts;
    const uint8_t *p = b->records, *end = b->records_end;
    memset(k, 0, sizeof *k);
    k->max_ts = -1;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        const uint8_t *start = p;
        RawRecord r;
        if (p == end)
            return missing_records(b, i);
        ParseResult res = parse_record(&p, end, &r);
        if (res.fault)
            return record_fault(b, i, res);
        int64_t offset = wrap_add(b->base_offset, r.off_delta);
        int stays = 1;
        if (offset <= rule->latest) {
            int covered;
            int lost = marked(rule->mk, offset, &covered);
            if (r.key_len < 0) {
                k->invalid++;
                stays = 0;
            } else if (covered) {
                stays = !lost;
            } else {
                Hash h = key_hash(rule->map, r.key, (size_t)r.key_len);
                stays = offset >= lookup(rule->map, h);
            }
            if (stays && r.value_len < 0 && !retain_deletes)
                stays = 0;
        }
        keep[i] = (uint8_t)stays;
        if (!stays)
            continue;
        int64_t ts = record_ts(b, r.ts_delta);
        if (k->kept++ == 0)
            k->first_ts = ts;
        k->tombstone |= r.value_len < 0;
        if (ts > k->max_ts)
            k->max_ts = ts;
        k->bytes += p - start;
    }
    if (p != end)
        return trailing_bytes(b, p);
    return 0;
}

/* The size of the kept records once their timestamps are relative to base_ts. */
static Py_ssize_t
restamped_size(const Batch *b, const uint8_t *keep, int64_t base_ts)
{
    Py_ssize_t size = 0;
    const uint8_t *p = b->records;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        Fields f;
        record_fields(p, b->records_end, &f);
        if (keep[i]) {
            int64_t delta, body = restamped_body(b, &f, base_ts, &delta);
            size += (Py_ssize_t)(varint_size(body) + body);
        }
        p = f.next;
    }
    return size;
}

/* Pass 2: the kept records, copied; with `restamp`, their timestamp deltas re-encoded
 * relative to base_ts (the rebuilt batch's, see filter_into). */
static uint8_t *
write_kept(const Batch *b, const uint8_t *keep, int restamp, int64_t base_ts, uint8_t *dst)
{
    const uint8_t *p = b->records, *run = NULL;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        Fields f;
        record_fields(p, b->records_end, &f);
        if (!restamp) { /* copy runs of kept records */
            if (keep[i] && run == NULL)
                run = p;
            if (!keep[i] && run != NULL) {
                memcpy(dst, run, p - run);
                dst += p - run;
                run = NULL;
            }
        } else if (keep[i]) {
            int64_t delta, body = restamped_body(b, &f, base_ts, &delta);
            dst = varint_write(dst, body);
            *dst++ = *f.attributes;
            dst = varint_write(dst, delta);
            memcpy(dst, f.after_ts, f.next - f.after_ts);
            dst += f.next - f.after_ts;
        }
        p = f.next;
    }
    if (run != NULL) {
        memcpy(dst, run, p - run);
        dst += p - run;
    }
    return dst;
}

/* The header of the filtered batch: the original one with its record count, length,
 * base timestamp, max timestamp, and a newly set delete horizon; the CRC is left to the caller. */
static void
write_header(const Batch *b, const Kept *k, int new_horizon, int64_t base_ts, Py_ssize_t records_size,
             uint8_t *dst)
{
    memcpy(dst, b->start, HEADER_SIZE);
    put_be(dst + LENGTH_OFFSET, LENGTH_LENGTH, (uint64_t)(HEADER_SIZE - LOG_OVERHEAD + records_size));
    put_be(dst + CRC_OFFSET, CRC_LENGTH, 0);
    if (new_horizon)
        put_be(dst + ATTRIBUTES_OFFSET, ATTRIBUTES_LENGTH, (uint64_t)(b->attributes | DELETE_HORIZON_FLAG_MASK));
    put_be(dst + BASE_TIMESTAMP_OFFSET, BASE_TIMESTAMP_LENGTH, (uint64_t)base_ts);
    if (!(b->attributes & TIMESTAMP_TYPE_MASK))
        put_be(dst + MAX_TIMESTAMP_OFFSET, MAX_TIMESTAMP_LENGTH, (uint64_t)k->max_ts);
    put_be(dst + RECORDS_COUNT_OFFSET, RECORDS_COUNT_LENGTH, (uint64_t)k->kept);
}

/* Room for `extra` bytes after the first `len` of out, whose size may run ahead of what
 * is written (the caller trims it, or keeps it for the next batches): grows by doubling,
 * where bytearray grows by an eighth. */
static uint8_t *
reserve(PyObject *out, Py_ssize_t len, Py_ssize_t extra)
{
    Py_ssize_t size = PyByteArray_GET_SIZE(out);
    if (len + extra > size && PyByteArray_Resize(out, len + extra > 2 * size ? len + extra : 2 * size) < 0)
        return NULL;
    return (uint8_t *)PyByteArray_AS_STRING(out) + len;
}

/* Filters one batch into out at *len (growing it), or leaves out alone when the batch stays
 * as it is or loses every record. Returns 1 when it wrote, 0 when not, -1 on a fault. */
static int
filter_into(const Batch *b, const Rule *rule, PyObject *out, Py_ssize_t *len, Kept *k)
{
    uint8_t small[512], *keep = b->count <= (int32_t)sizeof small ? small : NULL;
    if (keep == NULL && (keep = PyMem_Malloc(b->count > 0 ? (size_t)b->count : 1)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = -1;
    if (decide(b, rule, keep, k) < 0)
        goto done;
    int has_horizon = (b->attributes & DELETE_HORIZON_FLAG_MASK) != 0;
    int new_horizon = k->tombstone && !has_horizon;
    rc = 0;
    if (k->kept == 0 || (k->kept == b->count && !new_horizon))
        goto done;
    /* Kafka rebuilds the batch (MemoryRecords.buildRetainedRecordsInto) with a base timestamp
     * of its delete horizon, or else of its first kept record (in a LogAppendTime batch: the
     * append time, every record's), the records' deltas relative to it */
    int64_t base_ts = new_horizon ? rule->horizon : has_horizon ? b->base_ts : k->first_ts;
    int restamp = base_ts != b->base_ts || (b->attributes & TIMESTAMP_TYPE_MASK);
    Py_ssize_t size = restamp ? restamped_size(b, keep, base_ts) : k->bytes;
    rc = -1;
    uint8_t *dst = reserve(out, *len, HEADER_SIZE + size);
    if (dst == NULL)
        goto done;
    write_header(b, k, new_horizon, base_ts, size, dst);
    write_kept(b, keep, restamp, base_ts, dst + HEADER_SIZE);
    *len += HEADER_SIZE + size;
    rc = 1;
done:
    if (keep != small)
        PyMem_Free(keep);
    return rc;
}

PyDoc_STRVAR(filter_batch_doc,
             "filter_batch(batch, section, *, table, k0, k1, latest, marks, marks_first, marks_count, now, "
             "horizon, position) -> (out, kept, invalid, max_timestamp)\n\n"
             "The records of a v2 data batch that compaction keeps (`section`: its records decompressed, or\n"
             "None). out is None when every record stays as it is, or none does; else a bytearray: the\n"
             "batch's header (record count, length, max timestamp updated; the base timestamp Kafka's:\n"
             "the delete horizon `horizon` if a tombstone stays and none was set, the one set, else the first\n"
             "kept record's; CRC left zero) and the kept records, uncompressed, their timestamp deltas\n"
             "relative to that base.\n"
             "max_timestamp is that of the kept records (the batch's own for LogAppendTime).");

static PyObject *
filter_batch(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"batch", "section", "table", "k0", "k1", "latest", "marks", "marks_first",
                            "marks_count", "now", "horizon", "position", NULL};
    MapArgs a = {0};
    BatchArgs ba = {0};
    PyObject *section, *out = NULL, *result = NULL;
    unsigned long long k0, k1;
    long long latest, first, count, now, horizon;
    Py_ssize_t position;
    Batch b;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O$w*KKLy*LLLLn:filter_batch", names, &ba.batch, &section,
                                     &a.table, &k0, &k1, &latest, &a.marks, &first, &count, &now, &horizon,
                                     &position) ||
        map_args_open(&a, k0, k1, first, count) < 0 || batch_from(&b, &ba, section, position) < 0 ||
        (out = PyByteArray_FromStringAndSize(NULL, 0)) == NULL)
        goto done;
    Rule rule = {&a.map, latest, &a.mk, now, horizon};
    Py_ssize_t len = 0;
    Kept k;
    int wrote = filter_into(&b, &rule, out, &len, &k);
    if (wrote < 0 || PyByteArray_Resize(out, len) < 0)
        goto done;
    /* the max timestamp of what stays: the new header's, or the batch's */
    int64_t max_ts = wrote ? be64((const uint8_t *)PyByteArray_AS_STRING(out) + MAX_TIMESTAMP_OFFSET) : b.max_ts;
    result = Py_BuildValue("OnnL", wrote ? out : Py_None, k.kept, k.invalid, (long long)max_ts);
done:
    Py_XDECREF(out);
    map_args_release(&a);
    batch_args_release(&ba);
    return result;
}

static int
add_entry(PyObject *entries, Py_ssize_t at, Py_ssize_t size, int64_t last_offset, int64_t max_ts)
{
    PyObject *entry = Py_BuildValue("nnLL", at, size, (long long)last_offset, (long long)max_ts);
    if (entry == NULL)
        return -1;
    int rc = PyList_Append(entries, entry);
    Py_DECREF(entry);
    return rc;
}

/* The lz4 batch rebuilt by filter_into in `rebuilt` (header, records uncompressed) appended
 * to out at *len, its records compressed; its CRC is left to the caller. */
static int
deflate_into(PyObject *rebuilt, Py_ssize_t rebuilt_len, PyObject *out, Py_ssize_t *len)
{
    size_t records = (size_t)(rebuilt_len - HEADER_SIZE);
    uint8_t *dst = reserve(out, *len, HEADER_SIZE + (Py_ssize_t)lz4_frame_bound(records));
    if (dst == NULL)
        return -1;
    const uint8_t *src = (const uint8_t *)PyByteArray_AS_STRING(rebuilt);
    memcpy(dst, src, HEADER_SIZE);
    size_t frame = lz4_frame_compress(src + HEADER_SIZE, records, dst + HEADER_SIZE);
    put_be(dst + LENGTH_OFFSET, LENGTH_LENGTH, (uint64_t)(HEADER_SIZE - LOG_OVERHEAD + frame));
    *len += HEADER_SIZE + (Py_ssize_t)frame;
    return 0;
}

PyDoc_STRVAR(filter_batches_doc,
             "filter_batches(view, pos, origin, *, out, out_len, out_limit, entries, table, k0, k1, latest, marks, "
             "marks_first, marks_count, now, horizon, upper_bound, group_end, section, rebuilt) -> "
             "(pos, stop, read, written, invalid, changed, out_len)\n\n"
             "filter_batch over the whole batches of `view` from `pos` (at byte `origin` of its file), for\n"
             "as long as they are non-transactional, non-control v2 batches whose CRC holds, uncompressed, or\n"
             "lz4 frames as the Java client writes them when `section` and `rebuilt` are bytearrays (the\n"
             "records decompressed into the first, the kept ones gathered in the second and compressed again\n"
             "as the Java client does; both grow to the largest batch):\n"
             "each result (the batch as it is, or filtered and sealed with its CRC32C) is\n"
             "written to the bytearray `out` from byte out_len (out grows as needed, and never shrinks: the\n"
             "caller keeps it from flush to flush), and (position in out, size, last offset, max timestamp) to\n"
             "`entries`; a batch left empty goes, unless it has a producer id, ends at upper_bound (the\n"
             "cleaning's end offset) or at byte group_end (the group's last batch): Python decides those.\n"
             "stop is 0 at the end of the whole batches, 1 at a batch for Python (pos is its start),\n"
             "2 once out holds out_limit bytes or more. read, written and invalid count records,\n"
             "changed the batches not kept as they were; out_len is where out's bytes now end.");

static PyObject *
filter_batches(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"view", "pos", "origin", "out", "out_len", "out_limit", "entries", "table", "k0", "k1", "latest",
                            "marks", "marks_first", "marks_count", "now", "horizon", "upper_bound", "group_end",
                            "section", "rebuilt", NULL};
    MapArgs a = {0};
    Py_buffer view = {0};
    PyObject *out, *entries, *result = NULL, *section, *rebuilt;
    unsigned long long k0, k1;
    long long latest, first, count, now, horizon, upper_bound;
    Py_ssize_t pos, origin, len, limit, group_end;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nn$O!nnO!w*KKLy*LLLLLnOO:filter_batches", names, &view, &pos,
                                     &origin, &PyByteArray_Type, &out, &len, &limit, &PyList_Type, &entries, &a.table, &k0,
                                     &k1, &latest, &a.marks, &first, &count, &now, &horizon, &upper_bound,
                                     &group_end, &section, &rebuilt))
        goto done;
    int lz4 = section != Py_None;
    if (lz4 != (rebuilt != Py_None) || (lz4 && (!PyByteArray_Check(section) || !PyByteArray_Check(rebuilt)))) {
        PyErr_SetString(PyExc_TypeError, "section and rebuilt must both be bytearrays, or both None");
        goto done;
    }
    if (map_args_open(&a, k0, k1, first, count) < 0)
        goto done;
    Rule rule = {&a.map, latest, &a.mk, now, horizon};
    if (pos < 0 || pos > view.len || len < 0 || len > PyByteArray_GET_SIZE(out)) {
        PyErr_SetString(PyExc_ValueError, "position out of the buffer");
        goto done;
    }
    const uint8_t *base = view.buf, *end = base + view.len;
    Py_ssize_t read = 0, written = 0, invalid = 0, changed = 0;
    int stop;
    for (;;) {
        if (len >= limit) {
            stop = WALK_FLUSH;
            break;
        }
        Batch b = {0};
        stop = next_batch(&b, base + pos, end, origin + pos, lz4);
        if (stop != WALK_ON)
            break;
        Py_ssize_t size = b.records_end - b.start;
        if (crc32c_of(b.start + CRC_START, (size_t)(size - CRC_START)) !=
                (uint32_t)get_be(b.start + CRC_OFFSET, CRC_LENGTH) || b.count < 0 || b.last_delta < -1) {
            stop = WALK_PYTHON; /* validate() says what is wrong */
            break;
        }
        int compressed = (b.attributes & COMPRESSION_CODEC_MASK) != 0;
        if ((stop = records_ready(&b, section)) == WALK_ERROR)
            goto done;
        if (stop != WALK_ON)
            break;
        Py_ssize_t at = len, rebuilt_len = 0;
        Kept k;
        /* a compressed batch is rebuilt uncompressed aside, then compressed into out */
        int wrote = filter_into(&b, &rule, compressed ? rebuilt : out, compressed ? &rebuilt_len : &len, &k);
        if (wrote < 0 || (wrote && compressed && deflate_into(rebuilt, rebuilt_len, out, &len) < 0))
            goto done;
        if (k.kept == 0) {
            /* an empty batch stays as a header if it is the last of its producer (Python
             * knows), of the cleaning, or of the group; else it goes */
            int64_t next = wrap_add(wrap_add(b.base_offset, b.last_delta), 1);
            if (be64(b.start + PRODUCER_ID_OFFSET) >= 0 || next == upper_bound || origin + pos + size == group_end) {
                stop = WALK_PYTHON;
                break;
            }
            read += b.count;
            invalid += k.invalid;
            changed++;
            pos += size;
            continue;
        }
        int64_t max_ts = b.max_ts;
        if (wrote) {
            uint8_t *sealed = (uint8_t *)PyByteArray_AS_STRING(out) + at;
            put_be(sealed + CRC_OFFSET, CRC_LENGTH, crc32c_of(sealed + CRC_START, (size_t)(len - at - CRC_START)));
            max_ts = be64(sealed + MAX_TIMESTAMP_OFFSET);
        } else {
            uint8_t *dst = reserve(out, len, size);
            if (dst == NULL)
                goto done;
            memcpy(dst, b.start, size);
            len += size;
        }
        if (add_entry(entries, at, len - at, wrap_add(b.base_offset, b.last_delta), max_ts) < 0)
            goto done;
        read += b.count;
        written += k.kept;
        invalid += k.invalid;
        changed += wrote;
        pos += size;
    }
    result = Py_BuildValue("ninnnnn", pos, stop, read, written, invalid, changed, len);
done:
    map_args_release(&a);
    if (view.obj)
        PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ skimming */

PyDoc_STRVAR(skim_batches_doc,
             "skim_batches(buffer, n, pos, end) -> (pos, records, last, last_size)\n\n"
             "Step over the v2 batches of buffer[:n] from `pos` that producer state passes by (no\n"
             "producer id, not control), by their headers: while a whole header is there and the\n"
             "batch ends by byte `end` of the buffer (the end of the file). records sums their\n"
             "record counts, last is where the last one starts (-1: none) and last_size its size.\n"
             "pos may end past n: the rest of a large batch is not needed.");

/* The size of the v2 batch whose header is at p, room bytes before the file ends, when
 * producer state passes it by (no producer id, not control); 0 when Python must look:
 * another magic, bad framing, a partial batch, a producer's or a control batch. */
static inline Py_ssize_t
skimmable(const uint8_t *p, Py_ssize_t room)
{
    int32_t length = be32(p + LENGTH_OFFSET);
    if (p[MAGIC_OFFSET] != MAGIC || length < MIN_BATCH_LENGTH || (Py_ssize_t)length > room - LOG_OVERHEAD)
        return 0;
    if (be64(p + PRODUCER_ID_OFFSET) >= 0 || (get_be(p + ATTRIBUTES_OFFSET, ATTRIBUTES_LENGTH) & CONTROL_FLAG_MASK))
        return 0;
    return LOG_OVERHEAD + (Py_ssize_t)length;
}

static PyObject *
skim_batches(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t n, pos, end;
    if (!PyArg_ParseTuple(args, "y*nnn", &buf, &n, &pos, &end))
        return NULL;
    if (n < 0 || n > buf.len || pos < 0) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "position out of the buffer");
        return NULL;
    }
    const uint8_t *base = buf.buf;
    long long records = 0;
    Py_ssize_t last = -1, last_size = 0;
    while (pos <= n - HEADER_SIZE) {
        const uint8_t *p = base + pos;
        Py_ssize_t size = skimmable(p, end - pos);
        if (size == 0)
            break; /* Python says why */
        records += be32(p + RECORDS_COUNT_OFFSET);
        last = pos;
        last_size = size;
        pos += size;
    }
    PyBuffer_Release(&buf);
    return Py_BuildValue("nLnn", pos, records, last, last_size);
}

PyDoc_STRVAR(skim_file_doc,
             "skim_file(fd, pos, end, above) -> (pos, records, last, fingerprint, next_size)\n\n"
             "skim_batches for batches larger than `above` bytes, reading only their headers from the\n"
             "file (pread, the GIL released): from byte `pos`, while the batch there is one skim_batches\n"
             "steps over, larger than `above` and ends by byte `end`. records sums their record counts,\n"
             "last is where the last one starts (-1: none) and fingerprint its first bytes up to the\n"
             "CRC (None: none). next_size is the size of the batch it stopped at when it is one to step\n"
             "over (a smaller one), else 0. Raises OSError when a read fails.");

static PyObject *
skim_file(PyObject *self, PyObject *args)
{
    int fd;
    Py_ssize_t pos, end, above;
    if (!PyArg_ParseTuple(args, "innn", &fd, &pos, &end, &above))
        return NULL;
    uint8_t header[HEADER_SIZE], fingerprint[CRC_START];
    long long records = 0;
    Py_ssize_t last = -1, next_size = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    while (end - pos >= HEADER_SIZE) {
        ssize_t n = pread(fd, header, HEADER_SIZE, (off_t)pos);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            err = errno;
        if (n < HEADER_SIZE)
            break; /* a failure, or the file shorter than `end`: Python's read says which */
        Py_ssize_t size = skimmable(header, end - pos);
        if (size <= above) {
            next_size = size;
            break;
        }
        records += be32(header + RECORDS_COUNT_OFFSET);
        last = pos;
        memcpy(fingerprint, header, sizeof fingerprint);
        pos += size;
    }
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (last < 0)
        return Py_BuildValue("nLnOn", pos, records, last, Py_None, next_size);
    return Py_BuildValue("nLny#n", pos, records, last, (const char *)fingerprint, (Py_ssize_t)sizeof fingerprint,
                         next_size);
}

/* ------------------------------------------------------------------ single keys */

PyDoc_STRVAR(map_put_doc, "map_put(table, k0, k1, key, offset, room) -> int\n\n"
                          "Map key to offset: 1 when the key is new, 0 when it was there, -1 when it is\n"
                          "new and room is 0 (nothing changed).");

static PyObject *
map_put(PyObject *self, PyObject *args)
{
    Py_buffer table, key;
    unsigned long long k0, k1;
    long long offset;
    Py_ssize_t room;
    if (!PyArg_ParseTuple(args, "w*KKy*Ln", &table, &k0, &k1, &key, &offset, &room))
        return NULL;
    Map m;
    long rc = -2;
    if (map_open(&m, &table, k0, k1) == 0) {
        Marks none = {NULL, 0, 0};
        Py_ssize_t left = room;
        Hash h = key_hash(&m, key.buf, (size_t)key.len);
        rc = put(find(&m, h), &none, h, offset, &left) < 0 ? -1 : room - left;
    }
    PyBuffer_Release(&table);
    PyBuffer_Release(&key);
    return rc == -2 ? NULL : PyLong_FromLong(rc);
}

PyDoc_STRVAR(map_get_doc, "map_get(table, k0, k1, key) -> int\n\nThe offset mapped to key, or -1.");

static PyObject *
map_get(PyObject *self, PyObject *args)
{
    Py_buffer table, key;
    unsigned long long k0, k1;
    if (!PyArg_ParseTuple(args, "w*KKy*", &table, &k0, &k1, &key))
        return NULL;
    Map m;
    PyObject *result = NULL;
    if (map_open(&m, &table, k0, k1) == 0)
        result = PyLong_FromLongLong(lookup(&m, key_hash(&m, key.buf, (size_t)key.len)));
    PyBuffer_Release(&table);
    PyBuffer_Release(&key);
    return result;
}

PyDoc_STRVAR(map_clear_doc, "map_clear(table)\n\nEmpty the map, in place (no second map's worth of zeros).");

static PyObject *
map_clear(PyObject *self, PyObject *args)
{
    Py_buffer table;
    if (!PyArg_ParseTuple(args, "w*", &table))
        return NULL;
    memset(table.buf, 0, (size_t)table.len);
    PyBuffer_Release(&table);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(map_absorb_doc, "map_absorb(table, other) -> int\n\n"
                             "Put every entry of `other` (a map with the same seed) into `table`, which must\n"
                             "have room for them; returns how many keys were new.");

static PyObject *
map_absorb(PyObject *self, PyObject *args)
{
    Py_buffer table, other;
    if (!PyArg_ParseTuple(args, "w*y*", &table, &other))
        return NULL;
    Map m, src;
    PyObject *result = NULL;
    if (map_open(&m, &table, 0, 0) == 0 && map_open(&src, &other, 0, 0) == 0) {
        Py_ssize_t added = 0;
        for (uint64_t i = 0; i < src.n; i++) {
            const Entry *e = &src.slots[i];
            if (e->lo == 0)
                continue;
            Hash h = {e->lo, e->hi};
            Entry *d = find(&m, h);
            if (d == NULL) {
                PyErr_SetString(PyExc_ValueError, "the offset map has no room for the entries absorbed");
                goto done;
            }
            added += d->lo == 0;
            *d = *e;
        }
        result = PyLong_FromSsize_t(added);
    }
done:
    PyBuffer_Release(&table);
    PyBuffer_Release(&other);
    return result;
}

static PyMethodDef methods[] = {
    {"map_batch", (PyCFunction)(void (*)(void))map_batch, METH_VARARGS | METH_KEYWORDS, map_batch_doc},
    {"map_batches", (PyCFunction)(void (*)(void))map_batches, METH_VARARGS | METH_KEYWORDS, map_batches_doc},
    {"filter_batch", (PyCFunction)(void (*)(void))filter_batch, METH_VARARGS | METH_KEYWORDS, filter_batch_doc},
    {"filter_batches", (PyCFunction)(void (*)(void))filter_batches, METH_VARARGS | METH_KEYWORDS,
     filter_batches_doc},
    {"skim_batches", skim_batches, METH_VARARGS, skim_batches_doc},
    {"skim_file", skim_file, METH_VARARGS, skim_file_doc},
    {"map_put", map_put, METH_VARARGS, map_put_doc},
    {"map_get", map_get, METH_VARARGS, map_get_doc},
    {"map_clear", map_clear, METH_VARARGS, map_clear_doc},
    {"map_absorb", map_absorb, METH_VARARGS, map_absorb_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "seglog.storage._compact", "The log cleaner's per-record loops.", -1, methods,
};

PyMODINIT_FUNC
PyInit__compact(void)
{
    PyObject *errors = PyImport_ImportModule("seglog.errors");
    if (errors == NULL)
        return NULL;
    CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (CorruptRecordError == NULL)
        return NULL;
    PyObject *compression = PyImport_ImportModule("seglog.records.compression");
    PyObject *bound = compression ? PyObject_GetAttrString(compression, "MAX_DECOMPRESSED_BYTES") : NULL;
    Py_XDECREF(compression);
    max_decompressed = bound ? PyLong_AsSsize_t(bound) : -1;
    Py_XDECREF(bound);
    if (max_decompressed < 0 || lz4_init() < 0)
        return NULL;
    crc32c_init();
    return PyModule_Create(&module);
}
