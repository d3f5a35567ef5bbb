/* Walks over whole buffers of v2 batches, in C: the storage layer's hot loops,
 * beside their Python owners (log.py's append validation, segment.py's recovery
 * and lookups, index.py's search). Buffers in, values out; one call writes (a
 * leader's usual append, to the segment's fd, its state into the segment's slots).
 * Six calls (check_append and recover_batches take keywords too), now_ms, the log's
 * default clock, and bind_segment, which names the classes whose slots the append
 * reads and writes:
 *
 *   check_append    every check a leader (or a follower) makes of an append,
 *                   batch by batch in the order validator.py's general path
 *                   makes them, and the facts the log needs of each batch;
 *   check_and_assign a leader's same checks and then its in-place edits of
 *                   the batches: base offsets, leader epoch, the max timestamp
 *                   (LogAppendTime's stamp, or CreateTime's largest record
 *                   timestamp, as Kafka's LogValidator sets it) and the CRC;
 *   append_batch    a producer's usual append whole: one batch of no producer
 *                   id, or an idempotent producer's next in order (found in
 *                   the producer state it is handed), checked and assigned
 *                   as check_and_assign does, then the segment's roll rules,
 *                   the write, the index entries stored into the index maps
 *                   and the segment's state after it into its slots; anything
 *                   else it leaves to the Python path untouched;
 *   recover_batches one recovery chunk of a segment: framing, CRC, offsets
 *                   increasing, leader epoch changes, and the sparse index
 *                   entries of the chunk, packed as the index files hold them;
 *   find_timestamp  the first record of a batch at or after a timestamp and an
 *                   offset, without a record object;
 *   floor_entry     the binary search of a lookup in an index's buffer.
 *
 * The format itself comes from records/ through its headers: the batch header
 * (_batch_layout.h), its checksum (_crc32c.h) and the record parser (_record.h).
 *
 * Legacy (magic 0/1) batches are Python's: a walk stops at one and says so.
 * Faults raise (or, for recovery, return) seglog's errors with the messages,
 * positions and offsets of the Python paths that check the same things
 * (batches.py, batch.py's check_batch, records/_codec.c's record walk, log.py's
 * validation, segment.py's recovery); tests/storage/test_scan.py holds the
 * two to each other on random and damaged input. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "records/_batch_layout.h"
#include "records/_crc32c.h"
#include "records/_record.h"

__extension__ typedef __int128 i128; /* sums of two int64 fields, exact as Python's ints */

#define MAX_RELATIVE_OFFSET 0x7FFFFFFF

static PyObject *CorruptRecordError, *InvalidRecordError, *InvalidTimestampError, *RecordTooLargeError,
    *UnexpectedAppendOffsetError;

/* ------------------------------------------------------------------ bytes */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define FROM_BE64(v) (v)
#define FROM_BE32(v) (v)
#define FROM_BE16(v) (v)
#else
#define FROM_BE64(v) __builtin_bswap64(v)
#define FROM_BE32(v) __builtin_bswap32(v)
#define FROM_BE16(v) __builtin_bswap16(v)
#endif

/* Big-endian fields at any alignment (memcpy: one load). */
#define BE_LOADER(name, type, utype, swap)     \
    static inline type name(const uint8_t *p) \
    {                                          \
        utype v;                               \
        memcpy(&v, p, sizeof v);               \
        return (type)swap(v);                  \
    }
BE_LOADER(i64_at, int64_t, uint64_t, FROM_BE64)
BE_LOADER(i32_at, int32_t, uint32_t, FROM_BE32)
BE_LOADER(i16_at, int16_t, uint16_t, FROM_BE16)

static inline void
store_be(uint8_t *p, int n, uint64_t v)
{
    while (n-- > 0) {
        p[n] = (uint8_t)v;
        v >>= 8;
    }
}

/* An exact int of at most two 30-bit digits read from them (3.11's layout), without the
 * call PyLong_AsLongLong makes, which goes through a byte array for three digits and
 * more (a timestamp's bound, Long.MAX_VALUE): 1, or 0 when v is none such. An append reads
 * a dozen ints a call (the segment's slots, the log's rules); callers fall back to the API. */
static inline int
small_int64(PyObject *v, int64_t *out)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && PYLONG_BITS_IN_DIGIT == 30
    if (!PyLong_CheckExact(v))
        return 0;
    Py_ssize_t size = Py_SIZE(v);
    const digit *d = ((PyLongObject *)v)->ob_digit;
    if (size < -2 || size > 2)
        return 0;
    int64_t x = size == 0 ? 0 : (int64_t)d[0];
    if (size == 2 || size == -2)
        x |= (int64_t)d[1] << PyLong_SHIFT;
    *out = size < 0 ? -x : x;
    return 1;
#else
    return 0;
#endif
}

static inline int64_t
wrap_add(int64_t a, int64_t b) /* Java's long arithmetic, as the record decoder's */
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* ------------------------------------------------------------------ errors */

/* An instance of `type`(message, file=..., position=..., offset=...), the place
 * keywords given only where known (not: file NULL or None, position < 0, has_offset 0). */
static PyObject *
error_object(PyObject *type, PyObject *file, Py_ssize_t position, int has_offset, int64_t offset, const char *fmt,
             ...)
{
    char text[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    PyObject *msg = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
    PyObject *argv = msg ? PyTuple_Pack(1, msg) : NULL;
    PyObject *kwargs = PyDict_New();
    PyObject *exc = NULL;
    Py_XDECREF(msg);
    if (argv == NULL || kwargs == NULL)
        goto done;
    if (file != NULL && file != Py_None && PyDict_SetItemString(kwargs, "file", file) < 0)
        goto done;
    if (position >= 0) {
        PyObject *v = PyLong_FromSsize_t(position);
        if (v == NULL || PyDict_SetItemString(kwargs, "position", v) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    if (has_offset) {
        PyObject *v = PyLong_FromLongLong(offset);
        if (v == NULL || PyDict_SetItemString(kwargs, "offset", v) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    exc = PyObject_Call(type, argv, kwargs);
done:
    Py_XDECREF(argv);
    Py_XDECREF(kwargs);
    return exc;
}

/* Raises what error_object makes; returns NULL. */
#define RAISE(type, file, position, has_offset, offset, ...)                                     \
    do {                                                                                         \
        PyObject *exc_ = error_object((type), (file), (position), (has_offset), (offset), __VA_ARGS__); \
        if (exc_ != NULL) {                                                                      \
            PyErr_SetObject((PyObject *)Py_TYPE(exc_), exc_);                                    \
            Py_DECREF(exc_);                                                                     \
        }                                                                                        \
    } while (0)

/* An exact integer as text (int128: a sum of two int64 fields may pass int64). */
static const char *
i128_text(i128 v, char out[48])
{
    char digits[48];
    int n = 0;
    unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    int k = 0;
    if (v < 0)
        out[k++] = '-';
    while (n)
        out[k++] = digits[--n];
    out[k] = 0;
    return out;
}

/* ------------------------------------------------------------------ faults */

/* What went wrong with a batch, held as data: the recovery walk finds faults
 * without the GIL, and turns them into exceptions after. */
typedef enum {
    F_NONE,
    F_BAD_MAGIC,      /* a: magic */
    F_BELOW_MINIMUM,  /* a: size, b: minimum, c: magic */
    F_TOO_LARGE,      /* a: size with framing, b: limit */
    F_CRC,            /* a: stored, b: computed */
    F_COUNT_RANGE,    /* a: count, b: last offset delta */
    F_NOT_FOLLOWING,  /* w1: base, w2: last, w3: previous last */
} FaultKind;

typedef struct {
    FaultKind kind;
    Py_ssize_t position; /* of the batch, in its file or buffer */
    int64_t offset;      /* the batch's base offset */
    int64_t a, b, c;
    i128 w1, w2, w3;
} Fault;

static PyObject *
fault_object(const Fault *f)
{
    char t1[48], t2[48], t3[48];
    switch (f->kind) {
    case F_BAD_MAGIC:
        return error_object(CorruptRecordError, NULL, f->position, 1, f->offset, "bad magic %lld", (long long)f->a);
    case F_BELOW_MINIMUM:
        return error_object(CorruptRecordError, NULL, f->position, 1, f->offset,
                            "batch size %lld is below the minimum %lld for magic %lld", (long long)f->a,
                            (long long)f->b, (long long)f->c);
    case F_TOO_LARGE:
        return error_object(CorruptRecordError, NULL, f->position, 1, f->offset,
                            "batch size %lld exceeds the largest allowed %lld", (long long)f->a, (long long)f->b);
    case F_CRC:
        return error_object(CorruptRecordError, NULL, f->position, 1, f->offset,
                            "CRC mismatch: stored 0x%08llx, computed 0x%08llx", (long long)f->a, (long long)f->b);
    case F_COUNT_RANGE:
        return error_object(CorruptRecordError, NULL, f->position, 1, f->offset,
                            "record count %lld / last offset delta %lld out of range", (long long)f->a,
                            (long long)f->b);
    case F_NOT_FOLLOWING:
        return error_object(CorruptRecordError, NULL, f->position, 1, f->offset,
                            "batch offsets %s..%s do not follow %s", i128_text(f->w1, t1), i128_text(f->w2, t2),
                            i128_text(f->w3, t3));
    default:
        PyErr_SetString(PyExc_SystemError, "no fault to report");
        return NULL;
    }
}

static void
raise_fault(const Fault *f)
{
    PyObject *exc = fault_object(f);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

/* ------------------------------------------------------------------ framing */

typedef enum { FRAME_BATCH, FRAME_LEGACY, FRAME_PARTIAL, FRAME_FAULT } Frame;

/* batches.py's framing of the batch at `pos` (peek_frame, then the size limit,
 * then whether it is whole): *end is where it ends when it is whole. */
static Frame
frame_at(const uint8_t *buf, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t origin, int64_t limit, Py_ssize_t *end,
         Fault *f)
{
    if (len - pos < HEADER_SIZE_UP_TO_MAGIC)
        return FRAME_PARTIAL;
    const uint8_t *b = buf + pos;
    int32_t size = i32_at(b + LENGTH_OFFSET);
    uint8_t magic = b[MAGIC_OFFSET];
    f->position = origin + pos;
    f->offset = i64_at(b);
    if (magic > MAGIC) {
        f->kind = F_BAD_MAGIC;
        f->a = magic;
        return FRAME_FAULT;
    }
    if (size < min_batch_length(magic)) {
        *f = (Fault){F_BELOW_MINIMUM, f->position, f->offset, size, min_batch_length(magic), magic, 0, 0, 0};
        return FRAME_FAULT;
    }
    if (limit >= 0 && (int64_t)size + LOG_OVERHEAD > limit) {
        *f = (Fault){F_TOO_LARGE, f->position, f->offset, (int64_t)size + LOG_OVERHEAD, limit, 0, 0, 0, 0};
        return FRAME_FAULT;
    }
    if ((int64_t)size + LOG_OVERHEAD > len - pos)
        return FRAME_PARTIAL;
    *end = pos + LOG_OVERHEAD + size;
    return magic == MAGIC ? FRAME_BATCH : FRAME_LEGACY;
}

/* batch.py's check_batch of a whole v2 batch (its length agrees with the framing
 * by construction): the CRC, then the record count and last offset delta. */
static int
batch_ok(const uint8_t *b, Py_ssize_t size, Fault *f)
{
    uint32_t stored = (uint32_t)i32_at(b + CRC_OFFSET);
    uint32_t computed = crc32c_of(b + CRC_START, (size_t)(size - CRC_START));
    if (stored != computed) {
        *f = (Fault){F_CRC, f->position, i64_at(b), stored, computed, 0, 0, 0, 0};
        return 0;
    }
    int32_t count = i32_at(b + RECORDS_COUNT_OFFSET), delta = i32_at(b + LAST_OFFSET_DELTA_OFFSET);
    if (count < 0 || delta < -1) {
        *f = (Fault){F_COUNT_RANGE, f->position, i64_at(b), count, delta, 0, 0, 0, 0};
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ records */

/* What a walk over a batch's records learns; the search fields find the first
 * record with timestamp >= target and offset >= start (search set). */
typedef struct {
    int64_t min_ts_delta, max_ts_delta;
    Py_ssize_t bad_offset, null_key; /* first record whose offset delta is not its index; first null key */
    int quiet;                       /* a fault fails the walk without raising (no GIL held) */
    int search, log_append_time, found;
    int64_t base_offset, base_ts, max_ts, target, start_offset;
    int64_t found_ts, found_offset;
} Walk;

/* A fault of the walk: raised, or, for a quiet walk, only reported by the -1. */
#define WALK_FAULT(...)                                                   \
    do {                                                                  \
        if (!w->quiet)                                                    \
            RAISE(CorruptRecordError, NULL, position, 0, 0, __VA_ARGS__); \
        return -1;                                                        \
    } while (0)

/* _codec.c's record walk (decode_records / check_records): the same checks and
 * messages; raises CorruptRecordError naming the batch's position. */
static int
walk_records(const uint8_t *start, Py_ssize_t len, Py_ssize_t count, Py_ssize_t position, Walk *w)
{
    const uint8_t *p = start, *end = start + len;
    w->min_ts_delta = w->max_ts_delta = 0;
    w->bad_offset = w->null_key = -1;
    w->found = 0;
    if (count < 0 || count > len / 7) /* a record takes at least 7 bytes */
        WALK_FAULT("record count %zd does not fit in %zd bytes of records", count, len);
    for (Py_ssize_t i = 0; i < count; i++) {
        RawRecord r;
        if (p == end)
            WALK_FAULT("record count %zd disagrees with the batch: its records end after %zd", count, i);
        ParseResult res = parse_record(&p, end, &r);
        if (res.fault)
            WALK_FAULT("record %zd: %s at byte %zd of the records", i, res.fault, (Py_ssize_t)(res.at - start));
        if (i == 0 || r.ts_delta < w->min_ts_delta)
            w->min_ts_delta = r.ts_delta;
        if (i == 0 || r.ts_delta > w->max_ts_delta)
            w->max_ts_delta = r.ts_delta;
        if (w->bad_offset < 0 && r.off_delta != i)
            w->bad_offset = i;
        if (w->null_key < 0 && r.key_len < 0)
            w->null_key = i;
        if (w->search && !w->found) {
            int64_t ts = w->log_append_time ? w->max_ts : wrap_add(w->base_ts, r.ts_delta);
            int64_t offset = wrap_add(w->base_offset, r.off_delta);
            if (ts >= w->target && offset >= w->start_offset) {
                w->found = 1;
                w->found_ts = ts;
                w->found_offset = offset;
            }
        }
    }
    if (p != end)
        WALK_FAULT("record count %zd disagrees with the batch: %zd bytes follow the last record", count,
                   (Py_ssize_t)(end - p));
    return 0;
}
#undef WALK_FAULT

/* The records of the batch at `at` of `owner` (size bytes at b): the bytes after
 * the header, or, compressed, what decompress(codec, view) gives (held in *held,
 * to release). A decompression fault is placed at the batch (`position`), as
 * RecordBatch's records_section places it. */
static int
records_of(PyObject *owner, const uint8_t *b, Py_ssize_t at, Py_ssize_t size, Py_ssize_t position,
           PyObject *decompress, Py_buffer *held, const uint8_t **records, Py_ssize_t *len)
{
    int codec = i16_at(b + ATTRIBUTES_OFFSET) & COMPRESSION_CODEC_MASK;
    if (codec == 0) {
        *records = b + HEADER_SIZE;
        *len = size - HEADER_SIZE;
        return 0;
    }
    PyObject *whole = PyMemoryView_FromObject(owner);
    PyObject *body = whole ? PySequence_GetSlice(whole, at + HEADER_SIZE, at + size) : NULL;
    PyObject *out = body ? PyObject_CallFunction(decompress, "iO", codec, body) : NULL;
    Py_XDECREF(body);
    Py_XDECREF(whole);
    if (out == NULL) {
        if (PyErr_ExceptionMatches(CorruptRecordError)) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            PyObject *method = PyObject_GetAttrString(value, "at");
            PyObject *empty = PyTuple_New(0);
            PyObject *place = Py_BuildValue("{s:n,s:L}", "position", position, "offset", (long long)i64_at(b));
            PyObject *placed = method && empty && place ? PyObject_Call(method, empty, place) : NULL;
            Py_XDECREF(method);
            Py_XDECREF(empty);
            Py_XDECREF(place);
            if (placed == NULL) {
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
                return -1;
            }
            Py_DECREF(placed);
            PyErr_Restore(type, value, tb);
        }
        return -1;
    }
    int rc = PyObject_GetBuffer(out, held, PyBUF_SIMPLE);
    Py_DECREF(out);
    if (rc < 0)
        return -1;
    *records = held->buf;
    *len = held->len;
    return 0;
}

/* ------------------------------------------------------------------ append */

/* What validation learns of a batch of an append. */
typedef struct {
    Py_ssize_t position, size;
    int32_t count, delta, epoch;
    int64_t max_ts, base;
} Facts;

typedef struct {
    int leader, allow_control, compact, check_ts;
    Py_ssize_t max_bytes;
    int64_t low, high; /* CreateTime timestamps allowed, with check_ts */
    PyObject *decompress, *file;
} AppendRules;

/* An append at least this large is checked without the GIL where it can be. */
#define NO_GIL_BYTES (64 * 1024)

/* What checking one batch of an append found. */
typedef enum { B_OK, B_STOP, B_PARTIAL, B_LEGACY, B_ERROR } Verdict;

/* A refusal: raised (B_ERROR), or, in a quiet check, only a stop (B_STOP), so that
 * the check made again with the GIL raises it. */
#define REFUSE(type, file, position, has_offset, offset, ...)                  \
    do {                                                                       \
        if (quiet)                                                             \
            return B_STOP;                                                     \
        RAISE(type, file, position, has_offset, offset, __VA_ARGS__);          \
        return B_ERROR;                                                        \
    } while (0)

/* Every check of log.py's _validate_general of the batch at `pos`, fault for fault:
 * B_OK with its facts in *x and its end in *end. A quiet check runs without the GIL:
 * it stops (B_STOP) rather than raise, and at a compressed batch, whose records only
 * Python's codecs can give. */
static Verdict
check_batch_at(PyObject *owner, const uint8_t *data, Py_ssize_t len, Py_ssize_t pos, const AppendRules *rules,
               int quiet, i128 *prev_last, Facts *x, Py_ssize_t *end)
{
    Fault f = {F_NONE};
    PyObject *file = rules->file;
    Frame kind = frame_at(data, len, pos, 0, -1, end, &f);
    if (kind == FRAME_PARTIAL)
        return B_PARTIAL;
    if (kind == FRAME_LEGACY)
        return B_LEGACY;
    const uint8_t *b = data + pos;
    Py_ssize_t size = *end - pos;
    if (kind == FRAME_FAULT)
        goto fault;
    if (size > rules->max_bytes)
        REFUSE(RecordTooLargeError, file, pos, 0, 0, "batch of %zd bytes exceeds max.message.bytes %zd", size,
               rules->max_bytes);
    if (!batch_ok(b, size, &f))
        goto fault;
    *x = (Facts){.position = pos,
                 .size = size,
                 .count = i32_at(b + RECORDS_COUNT_OFFSET),
                 .delta = i32_at(b + LAST_OFFSET_DELTA_OFFSET),
                 .epoch = i32_at(b + PARTITION_LEADER_EPOCH_OFFSET),
                 .max_ts = i64_at(b + MAX_TIMESTAMP_OFFSET),
                 .base = i64_at(b + BASE_OFFSET_OFFSET)};
    if (!rules->leader) {
        if ((i128)x->base <= *prev_last) {
            char t[48];
            REFUSE(UnexpectedAppendOffsetError, file, -1, 1, x->base, "batch offsets %lld.. do not follow %s",
                   (long long)x->base, i128_text(*prev_last, t));
        }
        *prev_last = (i128)x->base + x->delta;
        return B_OK;
    }
    int control = i16_at(b + ATTRIBUTES_OFFSET) & CONTROL_FLAG_MASK;
    if (control && !rules->allow_control)
        REFUSE(InvalidRecordError, file, pos, 0, 0, "clients may not write control batches");
    if (x->delta != (int64_t)x->count - 1)
        REFUSE(InvalidRecordError, file, pos, 0, 0, "last offset delta %d disagrees with the record count %d",
               x->delta, x->count);
    if (quiet && (i16_at(b + ATTRIBUTES_OFFSET) & COMPRESSION_CODEC_MASK))
        return B_STOP;
    Py_buffer held = {NULL};
    const uint8_t *records;
    Py_ssize_t records_len;
    if (records_of(owner, b, pos, size, pos, rules->decompress, &held, &records, &records_len) < 0)
        return B_ERROR;
    Walk w = {.quiet = quiet};
    int rc = walk_records(records, records_len, x->count, pos, &w);
    if (held.obj != NULL)
        PyBuffer_Release(&held);
    if (rc < 0)
        return quiet ? B_STOP : B_ERROR;
    if (w.bad_offset >= 0)
        REFUSE(InvalidRecordError, file, pos, 0, 0, "record %zd has an offset delta other than %zd", w.bad_offset,
               w.bad_offset);
    if (w.null_key >= 0 && !control && rules->compact)
        REFUSE(InvalidRecordError, file, pos, 0, 0, "a compacted topic cannot accept a record without a key");
    if (x->count && rules->check_ts) {
        i128 base_ts = i64_at(b + BASE_TIMESTAMP_OFFSET);
        i128 lowest = base_ts + w.min_ts_delta, highest = base_ts + w.max_ts_delta;
        if (lowest < rules->low || highest > rules->high) {
            char t1[48], t2[48];
            REFUSE(InvalidTimestampError, file, pos, 0, 0,
                   "timestamps %s..%s are outside [%lld, %lld] (message.timestamp.before.max.ms / after.max.ms)",
                   i128_text(lowest, t1), i128_text(highest, t2), (long long)rules->low, (long long)rules->high);
        }
        x->max_ts = (int64_t)highest;
    }
    return B_OK;
fault:
    if (!quiet)
        raise_fault(&f);
    return quiet ? B_STOP : B_ERROR;
}
#undef REFUSE

/* Room for one more batch's facts; 0 when memory ran out (PyMem_Raw*: callable
 * without the GIL). */
static int
room_for_one(Facts **facts, Py_ssize_t n, Py_ssize_t *cap)
{
    if (n < *cap)
        return 1;
    Facts *grown = PyMem_RawRealloc(*facts, sizeof(Facts) * (size_t)(*cap * 2));
    if (grown == NULL)
        return 0;
    *facts = grown;
    *cap *= 2;
    return 1;
}

/* log.py's _validate_general over a whole append, fault for fault. Returns the
 * number of batches (their facts in *out, PyMem_Raw-allocated), -1 with an exception
 * set, or -2 at a legacy batch before any fault (the general path's).
 *
 * The batches that need no Python (uncompressed and passing every check, the
 * usual append) are checked first without the GIL, so that the appends of several
 * partitions made from threads run at once; the check goes on with the GIL from
 * the first batch that needs it, which raises its fault or decompresses. */
static Py_ssize_t
validate_append(PyObject *owner, const uint8_t *data, Py_ssize_t len, const AppendRules *rules, Facts **out)
{
    Py_ssize_t pos = 0, n = 0, cap = 4, end = 0;
    Facts *facts = PyMem_RawMalloc(sizeof(Facts) * (size_t)cap);
    i128 prev_last = -1;
    int out_of_memory = 0;
    if (facts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    /* releasing the GIL costs about what checking 1 KiB does: a producer's batch keeps it */
    PyThreadState *released = len >= NO_GIL_BYTES ? PyEval_SaveThread() : NULL;
    while (!(out_of_memory = !room_for_one(&facts, n, &cap)) &&
           check_batch_at(owner, data, len, pos, rules, 1, &prev_last, &facts[n], &end) == B_OK) {
        n++;
        pos = end;
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    for (;;) {
        if (out_of_memory || !room_for_one(&facts, n, &cap)) {
            PyErr_NoMemory();
            goto fail;
        }
        Verdict v = check_batch_at(owner, data, len, pos, rules, 0, &prev_last, &facts[n], &end);
        if (v == B_PARTIAL)
            break;
        if (v == B_LEGACY) {
            PyMem_RawFree(facts);
            return -2;
        }
        if (v != B_OK)
            goto fail;
        n++;
        pos = end;
    }
    if (pos < len) {
        RAISE(CorruptRecordError, rules->file, pos, 0, 0, "%zd bytes of a partial batch at the end of the append",
              len - pos);
        goto fail;
    }
    if (n == 0) {
        RAISE(InvalidRecordError, rules->file, -1, 0, 0, "an append must hold at least one batch");
        goto fail;
    }
    *out = facts;
    return n;
fail:
    PyMem_RawFree(facts);
    return -1;
}

/* An instance of `type`, a tuple or a subclass of it (a NamedTuple: the log's AppendInfo
 * and LogOffsetMetadata), of the n ints `values`, made as tuple.__new__ makes one but
 * without the tuple it copies: the append's results, every append. (tuple_type checks
 * the type first.) */
static int
tuple_type(PyObject *type)
{
    if (PyType_Check(type) && PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type))
        return 1;
    PyErr_SetString(PyExc_TypeError, "append_batch(): a result type must be a tuple type");
    return 0;
}

static PyObject *
record_of(PyObject *type, const int64_t *values, Py_ssize_t n)
{
    PyObject *t = type == (PyObject *)&PyTuple_Type ? PyTuple_New(n) : ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLongLong(values[i]);
        if (v == NULL) {
            Py_DECREF(t); /* (a tuple with NULL items deallocates) */
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* An instance of `type` (as record_of) of the n objects `items` (borrowed: the record
 * takes its own references). */
static PyObject *
new_record(PyObject *type, PyObject *const *items, Py_ssize_t n)
{
    PyObject *t = type == (PyObject *)&PyTuple_Type ? PyTuple_New(n) : ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(items[i]));
    return t;
}

/* Whether offsets from next_offset on hold the batches of facts, the log end after
 * them an int64 too (the next offset, what a fetch asks for); raises if not. */
static int
offsets_fit(const Facts *facts, Py_ssize_t n, int64_t next_offset, Py_ssize_t len, PyObject *file)
{
    i128 offset = next_offset;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Facts *f = &facts[i];
        if (f->position < 0 || f->size < HEADER_SIZE || f->position > len - f->size) {
            PyErr_SetString(PyExc_ValueError, "a batch lies outside the buffer");
            return 0;
        }
        offset += (i128)f->delta + 1;
        if (offset > INT64_MAX) {
            char next[48];
            RAISE(InvalidRecordError, file, -1, 1, next_offset,
                  "the partition's offsets are used up: this append would take the log end offset to %s, past "
                  "the largest int64",
                  i128_text(offset, next));
            return 0;
        }
    }
    return 1;
}

/* A leader's edits of one validated batch b given base offset `base`: the base offset,
 * the leader epoch, and the max timestamp with a new CRC where it changes. Returns the
 * batch's max timestamp as the indexes take it. */
static int64_t
edit_batch(uint8_t *b, const Facts *f, int64_t base, int32_t epoch, int stamping, int64_t append_time,
           int create_time)
{
    store_be(b + BASE_OFFSET_OFFSET, BASE_OFFSET_LENGTH, (uint64_t)base);
    store_be(b + PARTITION_LEADER_EPOCH_OFFSET, PARTITION_LEADER_EPOCH_LENGTH, (uint32_t)epoch);
    if (stamping) {
        uint16_t attributes = (uint16_t)(i16_at(b + ATTRIBUTES_OFFSET) | TIMESTAMP_TYPE_MASK);
        store_be(b + ATTRIBUTES_OFFSET, ATTRIBUTES_LENGTH, attributes);
        store_be(b + MAX_TIMESTAMP_OFFSET, MAX_TIMESTAMP_LENGTH, (uint64_t)append_time);
        store_be(b + CRC_OFFSET, CRC_LENGTH, crc32c_of(b + CRC_START, (size_t)(f->size - CRC_START)));
        return append_time;
    }
    if (create_time && f->count > 0 &&
        (i64_at(b + MAX_TIMESTAMP_OFFSET) != f->max_ts || (i16_at(b + ATTRIBUTES_OFFSET) & TIMESTAMP_TYPE_MASK))) {
        /* a producer's header max timestamp (Sarama writes -1) gives way to its records'
         * largest, which the time index holds: lookups by time read the header */
        uint16_t attributes = (uint16_t)(i16_at(b + ATTRIBUTES_OFFSET) & ~TIMESTAMP_TYPE_MASK);
        store_be(b + ATTRIBUTES_OFFSET, ATTRIBUTES_LENGTH, attributes);
        store_be(b + MAX_TIMESTAMP_OFFSET, MAX_TIMESTAMP_LENGTH, (uint64_t)f->max_ts);
        store_be(b + CRC_OFFSET, CRC_LENGTH, crc32c_of(b + CRC_START, (size_t)(f->size - CRC_START)));
    }
    return f->max_ts;
}

/* A leader's edits of validated batches, and what the log and segment need of
 * them: (entries, first offset, last offset, max timestamp, record count). */
static PyObject *
assign(uint8_t *data, Py_ssize_t len, const Facts *facts, Py_ssize_t n, int64_t next_offset, int32_t epoch,
       int stamping, int64_t append_time, int create_time, PyObject *file)
{
    if (!offsets_fit(facts, n, next_offset, len, file)) /* every offset first: nothing is written unless all fit */
        return NULL;
    PyObject *entries = PyList_New(n);
    if (entries == NULL)
        return NULL;
    int64_t base = next_offset, max_ts = 0, last = 0;
    long long records = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Facts *f = &facts[i];
        int64_t batch_max_ts = edit_batch(data + f->position, f, base, epoch, stamping, append_time, create_time);
        last = base + f->delta;
        if (i == 0 || batch_max_ts > max_ts)
            max_ts = batch_max_ts;
        records += f->count;
        int64_t values[4] = {f->position, f->size, last, batch_max_ts};
        PyObject *entry = record_of((PyObject *)&PyTuple_Type, values, 4);
        if (entry == NULL) {
            Py_DECREF(entries);
            return NULL;
        }
        PyList_SET_ITEM(entries, i, entry);
        base = last + 1;
    }
    return Py_BuildValue("(NLLLL)", entries, (long long)next_offset, (long long)last, (long long)max_ts, records);
}

/* (next offset, epoch, append time or None, segment bytes) of an assignment. */
typedef struct {
    long long next_offset, segment_bytes;
    int epoch, stamping;
    long long append_time;
} Assignment;

static int
parse_assignment(PyObject *spec, Assignment *a)
{
    PyObject *stamp;
    if (PyTuple_CheckExact(spec) && PyTuple_GET_SIZE(spec) == 4 && PyLong_CheckExact(PyTuple_GET_ITEM(spec, 0)) &&
        PyLong_CheckExact(PyTuple_GET_ITEM(spec, 1)) && PyLong_CheckExact(PyTuple_GET_ITEM(spec, 3))) {
        /* the log's own tuple, every append: read without the format parser */
        long epoch;
        a->next_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(spec, 0));
        epoch = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
        stamp = PyTuple_GET_ITEM(spec, 2);
        a->segment_bytes = PyLong_AsLongLong(PyTuple_GET_ITEM(spec, 3));
        if (PyErr_Occurred())
            return -1;
        if (epoch < INT_MIN || epoch > INT_MAX) {
            PyErr_SetString(PyExc_OverflowError, "leader epoch out of range");
            return -1;
        }
        a->epoch = (int)epoch;
    }
    else if (!PyArg_ParseTuple(spec, "LiOL", &a->next_offset, &a->epoch, &stamp, &a->segment_bytes))
        return -1;
    a->stamping = stamp != Py_None;
    if (a->stamping && (a->append_time = PyLong_AsLongLong(stamp)) == -1 && PyErr_Occurred())
        return -1;
    return 0;
}

PyDoc_STRVAR(check_append_doc,
             "check_append(buffer, leader, allow_control, compact, max_bytes, timestamp_bounds, decompress, file)\n\n"
             "Validate an append of v2 batches as validator.py's general path does, fault for fault: framing,\n"
             "max.message.bytes, CRC, counts; a leader's checks of control batches, offset deltas, record\n"
             "structure, null keys in a compacted topic and CreateTime timestamps within timestamp_bounds\n"
             "(lowest, highest), or None when they are not checked; a follower's offsets increasing.\n"
             "A batch's max timestamp is its records' largest when timestamps are checked, else its header's.\n"
             "Returns a list of (position, size, record count, last offset delta, max timestamp, epoch, base\n"
             "offset), one a batch; or None, with nothing checked further, when the buffer holds a legacy\n"
             "(magic 0/1) batch before any fault: the general path's.");

PyDoc_STRVAR(check_and_assign_doc,
             "check_and_assign(buffer, allow_control, compact, max_bytes, timestamp_bounds, decompress, file,\n"
             "                 assignment)\n\n"
             "A leader's check_append, then its edits of the writable buffer. assignment is (next offset,\n"
             "leader epoch, append time or None, segment.bytes): the append's size is checked against\n"
             "segment.bytes and the batches edited: base offsets from next offset, the leader epoch, and the\n"
             "max timestamp with a new CRC where it changes: the append time (LogAppendTime), or with\n"
             "timestamp_bounds (CreateTime) the records' largest. Returns (entries, first offset, last offset,\n"
             "max timestamp, record count), entries listing (position, size, last offset, max timestamp) of\n"
             "each batch as the segment indexes them (nothing is written unless every offset fits in an\n"
             "int64); None, with nothing written, for a legacy batch before any fault.");

/* walk_append's walk of a buffer already held in *buf (released here on -1 and -2). */
static Py_ssize_t
walk_held(PyObject *owner, AppendRules *rules, const Assignment *a, int assigning, Py_buffer *buf, Facts **facts)
{
    Py_ssize_t n = validate_append(owner, buf->buf, buf->len, rules, facts);
    if (n >= 0 && assigning && buf->len > a->segment_bytes) {
        RAISE(RecordTooLargeError, rules->file, -1, 0, 0, "append of %zd bytes exceeds segment.bytes %lld", buf->len,
              a->segment_bytes);
        PyMem_RawFree(*facts);
        n = -1;
    }
    if (n < 0)
        PyBuffer_Release(buf);
    return n;
}

/* The walk every append call makes, with its rules parsed (max_bytes and the timestamp
 * bounds in *rules, an assignment in *a when `assigning`), and an assignment's
 * segment.bytes check: the number of batches, their facts in *facts (PyMem_Raw) and the
 * buffer held in *buf (writable when assigning); -1 with an exception set, or -2 at a
 * legacy batch before any fault (the general path's); on both, nothing is held. */
static Py_ssize_t
walk_append(PyObject *owner, AppendRules *rules, const Assignment *a, int assigning, Py_buffer *buf, Facts **facts)
{
    if (PyObject_GetBuffer(owner, buf, assigning ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    return walk_held(owner, rules, a, assigning, buf, facts);
}

/* max.message.bytes as the walk takes it (an int past any buffer: no limit). */
static int
parse_max_bytes(PyObject *max_bytes, AppendRules *rules)
{
    int overflow;
    long long limit = PyLong_AsLongLongAndOverflow(max_bytes, &overflow);
    if (limit == -1 && PyErr_Occurred())
        return -1;
    rules->max_bytes = overflow > 0 || limit > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : limit < 0 ? -1 : (Py_ssize_t)limit;
    return 0;
}

/* walk_append with its rules parsed from the Python arguments: max_bytes, the timestamp
 * bounds (lowest, highest) or None, and an assignment (spec) or NULL. */
static Py_ssize_t
checked(PyObject *owner, AppendRules *rules, PyObject *max_bytes, PyObject *bounds, PyObject *spec, Assignment *a,
        Py_buffer *buf, Facts **facts)
{
    if (parse_max_bytes(max_bytes, rules) < 0)
        return -1;
    long long low = 0, high = 0;
    rules->check_ts = bounds != Py_None;
    if (rules->check_ts && PyTuple_CheckExact(bounds) && PyTuple_GET_SIZE(bounds) == 2) {
        low = PyLong_AsLongLong(PyTuple_GET_ITEM(bounds, 0)); /* (the format parser costs more than the rest) */
        high = PyLong_AsLongLong(PyTuple_GET_ITEM(bounds, 1));
        if (PyErr_Occurred())
            return -1;
    }
    else if (rules->check_ts && !PyArg_ParseTuple(bounds, "LL", &low, &high))
        return -1;
    rules->low = low;
    rules->high = high;
    if (spec != NULL && parse_assignment(spec, a) < 0)
        return -1;
    return walk_append(owner, rules, a, spec != NULL, buf, facts);
}

/* The walk both calls make; with an assignment (spec), the leader's edits after it. */
static PyObject *
check(PyObject *owner, AppendRules *rules, PyObject *max_bytes, PyObject *bounds, PyObject *spec)
{
    Assignment a = {0};
    Py_buffer buf;
    Facts *facts = NULL;
    Py_ssize_t n = checked(owner, rules, max_bytes, bounds, spec, &a, &buf, &facts);
    if (n == -2)
        return Py_NewRef(Py_None);
    if (n < 0)
        return NULL;
    PyObject *result = NULL;
    if (spec != NULL)
        result = assign(buf.buf, buf.len, facts, n, a.next_offset, a.epoch, a.stamping, a.append_time,
                        rules->check_ts, rules->file);
    else if ((result = PyList_New(n)) != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            const Facts *x = &facts[i];
            PyObject *item = Py_BuildValue("(nniiLiL)", x->position, x->size, x->count, x->delta,
                                           (long long)x->max_ts, x->epoch, (long long)x->base);
            if (item == NULL) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, i, item);
        }
    }
    PyMem_RawFree(facts);
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *
check_append(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"buffer",     "leader",     "allow_control", "compact", "max_bytes",
                            "timestamp_bounds", "decompress", "file",          NULL};
    PyObject *owner, *max_bytes, *bounds;
    AppendRules rules = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OpppO!OOO:check_append", names, &owner, &rules.leader,
                                     &rules.allow_control, &rules.compact, &PyLong_Type, &max_bytes, &bounds,
                                     &rules.decompress, &rules.file))
        return NULL;
    return check(owner, &rules, max_bytes, bounds, NULL);
}

/* Positional only, without the format parser: a leader's every append calls it. */
static PyObject *
check_and_assign(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "check_and_assign() takes 8 positional arguments (%zd given)", nargs);
        return NULL;
    }
    AppendRules rules = {.leader = 1, .decompress = args[5], .file = args[6]};
    if ((rules.allow_control = PyObject_IsTrue(args[1])) < 0 || (rules.compact = PyObject_IsTrue(args[2])) < 0)
        return NULL;
    if (!PyLong_Check(args[3])) {
        PyErr_Format(PyExc_TypeError, "check_and_assign() argument 4 must be int, not %.50s", Py_TYPE(args[3])->tp_name);
        return NULL;
    }
    return check(args[0], &rules, args[3], args[4], args[7]);
}

/* ------------------------------------------------------------------ the active segment's state
 *
 * append_batch reads the segment's state where segment.py keeps it, in the slots of its
 * LogSegment, OffsetIndex, TimeIndex and FileHandle, and writes it back there: no
 * argument or result a Python frame packs and unpacks, every append. bind_segment gives
 * the classes once (segment.py, at import); the slots' offsets are read from their member
 * descriptors then, and each call checks the types of the objects it is handed. */

enum {
    S_SIZE, S_BASE, S_ROLLING, S_ROLLING_LOADED, S_JITTER, S_INTERVAL, S_SINCE, S_MAX_TS, S_OFFSET_INDEX,
    S_TIME_INDEX, S_HANDLE, S_COUNT
};
static const char *const segment_slot_names[S_COUNT] = {
    "_size", "base_offset", "_rolling_based_timestamp", "_rolling_loaded", "roll_jitter_ms", "index_interval_bytes",
    "bytes_since_last_index_entry", "_max_ts_and_offset", "_offset_index", "_time_index", "_handle",
};
enum { I_MAP, I_ENTRIES, I_RESERVED, I_COUNT };
static const char *const index_slot_names[I_COUNT] = {"_mmap", "entries", "reserved"};

static PyTypeObject *segment_type, *index_types[2], *handle_type; /* (NULL until bound) */
static Py_ssize_t segment_slots[S_COUNT], index_slots[2][I_COUNT], handle_fd_slot;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* The offset of the writable object slot `name` of `type` (a __slots__ member). */
static int
slot_offset(PyObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *descr = PyObject_GetAttrString(type, name);
    if (descr == NULL)
        return 0;
    int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type);
    if (ok) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        ok = m->type == T_OBJECT_EX && !(m->flags & READONLY);
        *offset = m->offset;
    }
    Py_DECREF(descr);
    if (!ok)
        PyErr_Format(PyExc_TypeError, "bind_segment(): %.100s.%.100s is not a writable slot",
                     ((PyTypeObject *)type)->tp_name, name);
    return ok;
}

PyDoc_STRVAR(bind_segment_doc,
             "bind_segment(segment_type, offset_index_type, time_index_type, handle_type)\n\n"
             "The classes whose slots append_batch reads and writes: segment.py's LogSegment, index.py's\n"
             "OffsetIndex and TimeIndex, fileio.py's FileHandle.");

static PyObject *
bind_segment(PyObject *self, PyObject *args)
{
    PyObject *types[4];
    if (!PyArg_ParseTuple(args, "O!O!O!O!:bind_segment", &PyType_Type, &types[0], &PyType_Type, &types[1],
                          &PyType_Type, &types[2], &PyType_Type, &types[3]))
        return NULL;
    Py_ssize_t seg[S_COUNT], idx[2][I_COUNT], fd;
    for (int i = 0; i < S_COUNT; i++)
        if (!slot_offset(types[0], segment_slot_names[i], &seg[i]))
            return NULL;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < I_COUNT; i++)
            if (!slot_offset(types[1 + k], index_slot_names[i], &idx[k][i]))
                return NULL;
    if (!slot_offset(types[3], "fd", &fd))
        return NULL;
    memcpy(segment_slots, seg, sizeof seg);
    memcpy(index_slots, idx, sizeof idx);
    handle_fd_slot = fd;
    PyTypeObject **bound[4] = {&segment_type, &index_types[0], &index_types[1], &handle_type};
    for (int i = 0; i < 4; i++)
        Py_XSETREF(*bound[i], (PyTypeObject *)Py_NewRef(types[i]));
    Py_RETURN_NONE;
}

/* An int64 held in a slot: 0 when it is unset, None or not an int64 (the slow path's
 * state to make: a segment just opened, its indexes not mapped), without an exception. */
static int
slot_int64(PyObject *obj, Py_ssize_t offset, int64_t *out)
{
    PyObject *v = SLOT(obj, offset);
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    if (small_int64(v, out))
        return 1;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    return !overflow;
}

/* The object in a slot if it is an instance of `type`, else NULL. */
static PyObject *
slot_of(PyObject *obj, Py_ssize_t offset, PyTypeObject *type)
{
    PyObject *v = SLOT(obj, offset);
    return v != NULL && PyObject_TypeCheck(v, type) ? v : NULL;
}

/* Replaces a slot's object by `value` (a new reference, never NULL). */
static void
slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    SLOT(obj, offset) = value;
    Py_XDECREF(old);
}

/* The segment's state as append_batch takes it: every slot of it set, else the slow path
 * (0). The index objects and the pair of max timestamp and offset are borrowed. */
typedef struct {
    int64_t size, base, rolling, jitter, interval, since, max_ts, max_ts_offset, fd;
    int64_t entries[2], reserved[2];
    PyObject *max_ts_and_offset, *index[2];
} SegmentState;

static int
segment_state(PyObject *segment, SegmentState *s)
{
    const Py_ssize_t *at = segment_slots;
    if (SLOT(segment, at[S_ROLLING_LOADED]) != Py_True || !slot_int64(segment, at[S_SIZE], &s->size) ||
        !slot_int64(segment, at[S_BASE], &s->base) || !slot_int64(segment, at[S_ROLLING], &s->rolling) ||
        !slot_int64(segment, at[S_JITTER], &s->jitter) || !slot_int64(segment, at[S_INTERVAL], &s->interval) ||
        !slot_int64(segment, at[S_SINCE], &s->since))
        return 0;
    PyObject *pair = SLOT(segment, at[S_MAX_TS]), *handle = slot_of(segment, at[S_HANDLE], handle_type);
    if (pair == NULL || !PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || handle == NULL ||
        !slot_int64(handle, handle_fd_slot, &s->fd) || s->fd < 0 || s->fd > INT_MAX)
        return 0;
    if (!slot_int64(pair, offsetof(PyTupleObject, ob_item), &s->max_ts) ||
        !slot_int64(pair, offsetof(PyTupleObject, ob_item) + sizeof(PyObject *), &s->max_ts_offset))
        return 0;
    s->max_ts_and_offset = pair;
    for (int k = 0; k < 2; k++) {
        PyObject *index = slot_of(segment, at[S_OFFSET_INDEX + k], index_types[k]);
        if (index == NULL || !slot_int64(index, index_slots[k][I_ENTRIES], &s->entries[k]) ||
            !slot_int64(index, index_slots[k][I_RESERVED], &s->reserved[k]))
            return 0;
        s->index[k] = index;
    }
    return 1;
}

/* A writable index map's buffer, or none (buf.obj NULL): a copy, a closed index, or
 * one that takes no entries (index.py's states: only theirs that do are writable maps). */
static int
index_map(PyObject *index, int k, Py_buffer *buf)
{
    PyObject *map = SLOT(index, index_slots[k][I_MAP]);
    buf->obj = NULL;
    if (map == NULL || map == Py_None || PyObject_GetBuffer(map, buf, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        buf->obj = NULL;
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ the append of one batch */

/* An int64 argument of append_batch. */
static int
int64_arg(PyObject *obj, int64_t *out)
{
    if (small_int64(obj, out))
        return 1;
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return 0;
    *out = v;
    return 1;
}

/* Writes all of data at position: 0, or the errno of the write that failed (part of
 * it may be written then). Without the GIL. */
static int
write_all(int fd, const uint8_t *data, Py_ssize_t len, int64_t position)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, data, (size_t)len, (off_t)position);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return ENOSPC; /* (a regular file takes bytes or says why not) */
        data += n;
        len -= n;
        position += n;
    }
    return 0;
}

PyDoc_STRVAR(append_batch_doc,
             "append_batch(buffer, segment, rules, next_offset, epoch, producers=None)\n\n"
             "A leader's append of a buffer of one batch to the active segment, in one call: check_and_assign's\n"
             "checks (raised as it raises them) and edits, then the batch written at the segment's size in\n"
             "its file, then its index entries stored into the index maps, and the segment's state after it\n"
             "(its size, bytes since its last index entry, max timestamp and offset, each index's entry count)\n"
             "stored in its slots (see bind_segment). rules are the log's: (config, clock, decompress, file,\n"
             "info_type, metadata_type), config the bytes of seven native int64s (compact as 0 or 1,\n"
             "max.message.bytes, message.timestamp.type as 0 (neither), 1 (CreateTime) or 2 (LogAppendTime),\n"
             "before.max.ms, after.max.ms, segment.bytes, segment.ms), made once when they change; applied as\n"
             "validator.py's leader_rules does (clock() called once, only for those types: CreateTime's bounds,\n"
             "LogAppendTime's stamp); then the next offset and the leader epoch. The segment's roll rules are segment.py's should_roll.\n"
             "producers: the producer state's entries by producer id (ProducerStateManager.producers), where\n"
             "a producer's batch is looked up: taken when it is its producer's next in order (in_order_entry).\n"
             "Returns (info, end, end offset, entry): info an info_type (first offset, last offset, max timestamp,\n"
             "record count, bytes, log append time or -1), end a metadata_type (the log end offset, the\n"
             "segment's base offset, its size), the log end offset again (the same int), and the producer's\n"
             "entry, whose state the caller then records (ProducerStateManager.on_in_order_append), or None\n"
             "for a batch of no producer; an errno when\n"
             "the write failed (part of the batch may be written past the segment's size, which is\n"
             "unchanged: the caller cuts it off); or None, with nothing checked\n"
             "further nor edited nor written, when the append is not one the call makes: more or other than\n"
             "one v2 batch, a producer's but its next in order (any other is the producer state's, Python's),\n"
             "a segment whose state is not all loaded\n"
             "(its first batch, its indexes or file not open), a roll due, an index entry due that the index\n"
             "cannot take as it is (unmapped, full, blocks not reserved, out of order: the slow path\n"
             "reserves, or raises).");

enum { R_CONFIG, R_CLOCK, R_DECOMPRESS, R_FILE, R_INFO_TYPE, R_METADATA_TYPE, R_COUNT };
/* the config's int64s (packed by the log when its config changes: no int parsed, every append) */
enum { C_COMPACT, C_MAX_BYTES, C_TS_TYPE, C_BEFORE, C_AFTER, C_SEGMENT_BYTES, C_SEGMENT_MS, C_COUNT };
enum { TS_NEITHER, TS_CREATE_TIME, TS_LOG_APPEND_TIME };

static PyObject *now_ms(PyObject *self, PyObject *unused);

/* The wall clock in ms, as now_ms gives it: 0, or -1 with OSError set. */
static int
realtime_ms(int64_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    /* floor division, as Python's: a time before the epoch rounds down too */
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    *out = ns >= 0 ? ns / 1000000 : -((-ns + 999999) / 1000000);
    return 0;
}

/* validator.py's leader_rules: CreateTime's bounds [now - before, now + after] within an
 * int64, or LogAppendTime's stamp; the clock read only for those (now_ms's without a call
 * nor an int made). */
static int
leader_rules(PyObject *clock, const int64_t *config, AppendRules *rules, Assignment *a)
{
    int create = config[C_TS_TYPE] == TS_CREATE_TIME, append = config[C_TS_TYPE] == TS_LOG_APPEND_TIME;
    rules->check_ts = create;
    a->stamping = append;
    if (!create && !append)
        return 0;
    int64_t now, before = config[C_BEFORE], after = config[C_AFTER];
    if (PyCFunction_Check(clock) && PyCFunction_GET_FUNCTION(clock) == now_ms) {
        if (realtime_ms(&now) < 0)
            return -1;
    }
    else {
        PyObject *t = PyObject_CallNoArgs(clock);
        int ok = t != NULL && int64_arg(t, &now);
        Py_XDECREF(t);
        if (!ok)
            return -1;
    }
    if (append) {
        a->append_time = now;
        return 0;
    }
    i128 low = (i128)now - before, high = (i128)now + after;
    rules->low = low > INT64_MIN ? (int64_t)low : INT64_MIN;
    rules->high = high < INT64_MAX ? (int64_t)high : INT64_MAX;
    return 0;
}

/* Whether the segment's roll rules (segment.py's should_roll) let the batch in:
 * bytes, time since its first batch, room in both indexes, its last offset's distance
 * from the segment's base. */
static int
fits_segment(int64_t size, Py_ssize_t bytes, int64_t segment_bytes, int64_t rolling, int64_t roll_after,
             int64_t max_ts, int64_t last, int64_t base, Py_ssize_t offset_slots, int64_t offset_entries,
             Py_ssize_t time_slots, int64_t time_entries)
{
    if (size <= 0 || size > segment_bytes - bytes || size > INT32_MAX || rolling < 0)
        return 0;
    if ((i128)max_ts - rolling > roll_after)
        return 0;
    if (offset_entries >= offset_slots || time_entries >= time_slots - 1)
        return 0;
    return (i128)last - base >= 0 && (i128)last - base <= MAX_RELATIVE_OFFSET;
}

/* The producer state's entry of the batch's producer (b a v2 header's bytes), a new reference, when
 * the batch is that producer's next one in order and producer_state_manager.py's analyze would
 * let it through changing nothing but the entry's kept batches: the entry's epoch, a base
 * sequence continuing its last kept batch's (wrapping from Int.MaxValue to 0), at least one
 * record, no kept batch ending where it ends (a duplicate needs one: the general path decides),
 * inside the transaction the producer has open or outside one it has not. Else NULL (perhaps
 * with an exception set, which the caller clears). producers: ProducerStateManager.producers, pid ->
 * ProducerStateEntry, whose batches are a deque of BatchMetadata tuples (last seq first).
 * (The bytes read are under the CRC, which the checks that follow verify.) */
static PyObject *s_producer_epoch, *s_batches, *s_current_txn_first_offset; /* (interned at import) */

static int
attr_int64(PyObject *obj, PyObject *name, int64_t *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    int ok = v != NULL && PyLong_CheckExact(v) && int64_arg(v, out);
    Py_XDECREF(v);
    return ok;
}

static PyObject *
in_order_entry(const uint8_t *b, PyObject *producers)
{
    int attributes = i16_at(b + ATTRIBUTES_OFFSET);
    int64_t count = i32_at(b + RECORDS_COUNT_OFFSET), sequence = i32_at(b + BASE_SEQUENCE_OFFSET), epoch;
    if (!PyDict_CheckExact(producers) || count < 1)
        return NULL;
    PyObject *key = PyLong_FromLongLong(i64_at(b + PRODUCER_ID_OFFSET));
    if (key == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(producers, key);
    Py_DECREF(key);
    if (entry == NULL || !attr_int64(entry, s_producer_epoch, &epoch) || epoch != i16_at(b + PRODUCER_EPOCH_OFFSET))
        return NULL;
    PyObject *txn = PyObject_GetAttr(entry, s_current_txn_first_offset);
    if (txn == NULL)
        return NULL;
    int in_txn = txn != Py_None;
    Py_DECREF(txn);
    if (in_txn != !!(attributes & TRANSACTIONAL_FLAG_MASK))
        return NULL;
    PyObject *batches = PyObject_GetAttr(entry, s_batches);
    if (batches == NULL)
        return NULL;
    Py_ssize_t kept = PyObject_Length(batches);
    int64_t last = sequence + count - 1; /* (its last sequence, wrapped as Kafka's incrementSequence) */
    if (last > INT32_MAX)
        last -= (int64_t)INT32_MAX + 1;
    int ok = kept > 0;
    for (Py_ssize_t i = kept - 1; ok && i >= 0; i--) {
        PyObject *batch = PySequence_GetItem(batches, i);
        int64_t last_seq;
        ok = batch != NULL && PyTuple_Check(batch) && PyTuple_GET_SIZE(batch) > 0 &&
             PyLong_CheckExact(PyTuple_GET_ITEM(batch, 0)) && int64_arg(PyTuple_GET_ITEM(batch, 0), &last_seq) &&
             last_seq != last && (i < kept - 1 || sequence == (last_seq == INT32_MAX ? 0 : last_seq + 1));
        Py_XDECREF(batch);
    }
    Py_DECREF(batches);
    return ok ? Py_NewRef(entry) : NULL;
}

static PyObject *
append_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 && nargs != 6) {
        PyErr_Format(PyExc_TypeError, "append_batch() takes 5 or 6 positional arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *producers = nargs == 6 ? args[5] : Py_None, *entry = NULL; /* (its entry, held: a new reference) */
    PyObject *owner = args[0], *segment = args[1], *r = args[2];
    if (segment_type == NULL || !PyObject_TypeCheck(segment, segment_type)) {
        PyErr_SetString(PyExc_TypeError, "append_batch(): segment must be a bound segment type's (bind_segment)");
        return NULL;
    }
    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != R_COUNT) {
        PyErr_Format(PyExc_TypeError, "append_batch(): rules must be a tuple of %d", R_COUNT);
        return NULL;
    }
    PyObject *const *rule = &PyTuple_GET_ITEM(r, 0);
    if (!PyBytes_CheckExact(rule[R_CONFIG]) || PyBytes_GET_SIZE(rule[R_CONFIG]) != C_COUNT * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_TypeError, "append_batch(): the rules' config must be the bytes of %d int64s", C_COUNT);
        return NULL;
    }
    int64_t config[C_COUNT];
    memcpy(config, PyBytes_AS_STRING(rule[R_CONFIG]), sizeof config);
    int64_t next_offset, epoch, segment_ms = config[C_SEGMENT_MS];
    if (!int64_arg(args[3], &next_offset) || !int64_arg(args[4], &epoch))
        return NULL;
    if (epoch < INT32_MIN || epoch > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "leader epoch out of range");
        return NULL;
    }
    if (!tuple_type(rule[R_INFO_TYPE]) || !tuple_type(rule[R_METADATA_TYPE]))
        return NULL;
    SegmentState s;
    if (!segment_state(segment, &s))
        Py_RETURN_NONE;

    Py_buffer buf;
    if (PyObject_GetBuffer(owner, &buf, PyBUF_WRITABLE) < 0)
        return NULL;
    const uint8_t *data = buf.buf;
    Py_ssize_t len = buf.len;
    /* one v2 batch, of no producer or of one next in order: else the slow path, before
     * anything is checked */
    if (len < HEADER_SIZE || data[MAGIC_OFFSET] != MAGIC || (int64_t)LOG_OVERHEAD + i32_at(data + LENGTH_OFFSET) != len ||
        (i64_at(data + PRODUCER_ID_OFFSET) >= 0 &&
         (producers == Py_None || (entry = in_order_entry(data, producers)) == NULL))) {
        PyBuffer_Release(&buf);
        PyErr_Clear(); /* (a state in_order_entry cannot read: the general path's) */
        Py_RETURN_NONE;
    }
    /* (the buffer held from here on: the walk and the write take it as it is now) */

    AppendRules rules = {.leader = 1, .allow_control = 0, .decompress = rule[R_DECOMPRESS], .file = rule[R_FILE]};
    Assignment a = {.next_offset = next_offset, .epoch = (int)epoch, .segment_bytes = config[C_SEGMENT_BYTES]};
    rules.compact = config[C_COMPACT] != 0;
    rules.max_bytes = config[C_MAX_BYTES] < 0 ? -1 : config[C_MAX_BYTES] > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)config[C_MAX_BYTES];
    if (leader_rules(rule[R_CLOCK], config, &rules, &a) < 0) {
        PyBuffer_Release(&buf);
        Py_XDECREF(entry);
        return NULL;
    }
    Facts *facts = NULL;
    Py_ssize_t n = walk_held(owner, &rules, &a, 1, &buf, &facts);
    if (n < 0) {
        Py_XDECREF(entry);
        return n == -2 ? Py_NewRef(Py_None) : NULL;
    }
    /* (check_and_assign's checks all made: now what takes the slow path, with nothing edited) */
    PyObject *result = NULL;
    Py_buffer oi = {NULL}, ti = {NULL};
    const Facts *f = &facts[0];
    if (!offsets_fit(facts, n, a.next_offset, buf.len, rules.file))
        goto done;
    int64_t last = a.next_offset + f->delta, max_ts = a.stamping ? a.append_time : f->max_ts;
    int64_t oi_n = s.entries[0], ti_n = s.entries[1], base = s.base, size = s.size, since = s.since;
    index_map(s.index[0], 0, &oi);
    index_map(s.index[1], 1, &ti);
    if (n != 1 || oi.obj == NULL || ti.obj == NULL ||
        !fits_segment(size, len, a.segment_bytes, s.rolling, segment_ms - s.jitter, max_ts, last, base, oi.len / 8,
                      oi_n, ti.len / 12, ti_n))
        goto slow;
    /* the entries due (segment.py's _index_batches of one batch), with index.py's checks of
     * each, which the slow path raises: offsets increasing, room, blocks reserved */
    int64_t ts_so_far = s.max_ts, ts_offset = s.max_ts_offset;
    if (max_ts > ts_so_far) {
        ts_so_far = max_ts;
        ts_offset = last;
    }
    int offset_entry = since > s.interval, time_entry = 0;
    uint8_t *oi_at = (uint8_t *)oi.buf + oi_n * 8, *ti_at = (uint8_t *)ti.buf + ti_n * 12;
    if (offset_entry) {
        if ((oi_n + 1) * 8 > s.reserved[0] || (ti_n + 2) * 12 > s.reserved[1]) /* segment.append's reservation */
            goto slow;
        if (oi_n && (int64_t)i32_at(oi_at - 8) >= last - base)
            goto slow;
        int64_t last_ts = ti_n ? i64_at(ti_at - 12) : -1, last_ts_offset = ti_n ? base + i32_at(ti_at - 4) : INT64_MIN;
        time_entry = ts_so_far > last_ts;
        if (time_entry && (ts_offset < last_ts_offset || (i128)ts_offset - base < 0 ||
                           (i128)ts_offset - base > MAX_RELATIVE_OFFSET))
            goto slow;
    }
    /* the batch edited and written: past here, the append is made or its write failed */
    uint8_t *b = (uint8_t *)buf.buf;
    edit_batch(b, f, a.next_offset, a.epoch, a.stamping, a.append_time, rules.check_ts);
    /* the maps are let go while the GIL is: an export held would refuse another thread's
     * close of them (BufferError); taken again for the stores, which a map changed since
     * (none does under the log's lock) would only leave out (an index is sparse) */
    PyBuffer_Release(&oi);
    PyBuffer_Release(&ti);
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = write_all((int)s.fd, b, len, size);
    Py_END_ALLOW_THREADS
    if (failed) {
        result = PyLong_FromLong(failed);
        goto done;
    }
    /* (the indexes looked at again: the GIL was let go, though no writer of them runs
     * without the log's lock, which the caller holds) */
    const Py_ssize_t *at = segment_slots;
    int64_t oi_now, ti_now;
    if (offset_entry && slot_of(segment, at[S_OFFSET_INDEX], index_types[0]) == s.index[0] &&
        slot_of(segment, at[S_TIME_INDEX], index_types[1]) == s.index[1] &&
        slot_int64(s.index[0], index_slots[0][I_ENTRIES], &oi_now) && oi_now == oi_n &&
        slot_int64(s.index[1], index_slots[1][I_ENTRIES], &ti_now) && ti_now == ti_n &&
        index_map(s.index[0], 0, &oi) && index_map(s.index[1], 1, &ti) && oi.len >= (oi_n + 1) * 8 &&
        ti.len >= (ti_n + 1) * 12) {
        oi_at = (uint8_t *)oi.buf + oi_n * 8;
        ti_at = (uint8_t *)ti.buf + ti_n * 12;
        store_be(oi_at, 4, (uint32_t)(last - base));
        store_be(oi_at + 4, 4, (uint32_t)size);
        oi_n++;
        if (time_entry) {
            store_be(ti_at, 8, (uint64_t)ts_so_far);
            store_be(ti_at + 8, 4, (uint32_t)(ts_offset - base));
            ti_n++;
        }
        since = 0;
    }
    else
        offset_entry = time_entry = 0;
    /* every object first, then the slots: when one cannot be made the append fails as a
     * write that failed, the segment's state as it was (the caller cuts the batch off).
     * Ints the results share are made once: the first offset is the next offset handed
     * in, the log end offset the end's, the segment's base its slot's, its size the end's */
    int64_t pair[2] = {ts_so_far, ts_offset};
    int new_pair = ts_so_far != s.max_ts || ts_offset != s.max_ts_offset;
    enum { M_FIRST, M_LAST, M_MAX_TS, M_COUNT_OF, M_BYTES, M_STAMP, M_END, M_SIZE, M_SINCE, M_PAIR, M_OFFSET_ENTRIES,
           M_TIME_ENTRIES, M_COUNT };
    PyObject *made[M_COUNT] = {
        PyLong_CheckExact(args[3]) ? Py_NewRef(args[3]) : PyLong_FromLongLong(a.next_offset),
        PyLong_FromLongLong(last),
        PyLong_FromLongLong(max_ts),
        PyLong_FromLongLong(f->count),
        PyLong_FromSsize_t(len),
        PyLong_FromLongLong(a.stamping ? a.append_time : -1),
        PyLong_FromLongLong(last + 1),
        PyLong_FromLongLong(size + len),
        PyLong_FromLongLong(since + len),
        new_pair ? record_of((PyObject *)&PyTuple_Type, pair, 2) : Py_NewRef(Py_None),
        offset_entry ? PyLong_FromLongLong(oi_n) : Py_NewRef(Py_None),
        time_entry ? PyLong_FromLongLong(ti_n) : Py_NewRef(Py_None),
    };
    PyObject *info = NULL, *end = NULL;
    int ok = 1;
    for (int k = 0; k < M_COUNT; k++)
        ok = ok && made[k] != NULL;
    if (ok && (info = new_record(rule[R_INFO_TYPE], &made[M_FIRST], 6)) != NULL) {
        PyObject *end_items[3] = {made[M_END], SLOT(segment, at[S_BASE]), made[M_SIZE]};
        end = new_record(rule[R_METADATA_TYPE], end_items, 3);
    }
    result = end != NULL ? PyTuple_New(4) : NULL;
    if (result == NULL) {
        Py_XDECREF(info);
        Py_XDECREF(end);
        for (int j = 0; j < M_COUNT; j++)
            Py_XDECREF(made[j]);
        PyErr_Clear();
        result = PyLong_FromLong(ENOMEM);
        goto done;
    }
    PyTuple_SET_ITEM(result, 0, info);
    PyTuple_SET_ITEM(result, 1, end);
    PyTuple_SET_ITEM(result, 2, Py_NewRef(made[M_END]));
    PyTuple_SET_ITEM(result, 3, entry != NULL ? Py_NewRef(entry) : Py_NewRef(Py_None));
    for (int k = M_FIRST; k <= M_END; k++) /* (held by the results now) */
        Py_DECREF(made[k]);
    slot_set(segment, at[S_SIZE], made[M_SIZE]); /* (the end holds it too) */
    slot_set(segment, at[S_SINCE], made[M_SINCE]);
    if (new_pair)
        slot_set(segment, at[S_MAX_TS], made[M_PAIR]);
    else
        Py_DECREF(made[M_PAIR]);
    if (offset_entry)
        slot_set(s.index[0], index_slots[0][I_ENTRIES], made[M_OFFSET_ENTRIES]);
    else
        Py_DECREF(made[M_OFFSET_ENTRIES]);
    if (time_entry)
        slot_set(s.index[1], index_slots[1][I_ENTRIES], made[M_TIME_ENTRIES]);
    else
        Py_DECREF(made[M_TIME_ENTRIES]);
    goto done;
slow:
    result = Py_NewRef(Py_None);
done:
    if (oi.obj != NULL)
        PyBuffer_Release(&oi);
    if (ti.obj != NULL)
        PyBuffer_Release(&ti);
    PyMem_RawFree(facts);
    PyBuffer_Release(&buf);
    Py_XDECREF(entry);
    return result;
}

/* ------------------------------------------------------------------ recovery */

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Bytes;

static int
bytes_put(Bytes *o, const uint8_t *p, size_t n)
{
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 1024;
        while (cap < o->len + n)
            cap *= 2;
        uint8_t *grown = PyMem_RawRealloc(o->data, cap);
        if (grown == NULL)
            return -1;
        o->data = grown;
        o->cap = cap;
    }
    memcpy(o->data + o->len, p, n);
    o->len += n;
    return 0;
}

typedef enum { STOP_END, STOP_LEGACY, STOP_FAULT, STOP_NO_MEMORY, STOP_POSITION } Stop;

/* One walk of recover_batches, with no Python object in it (it runs without the GIL). */
typedef struct {
    /* in */
    const uint8_t *data;
    Py_ssize_t len, origin;
    int64_t segment_base, limit, interval;
    /* carried from call to call */
    Py_ssize_t pos;
    int64_t prev_rel; /* the last offset so far, relative to the segment base */
    int has_epoch;
    int32_t epoch;
    int64_t since, max_ts, max_ts_offset, indexed_ts;
    /* out */
    Bytes offsets, times, epochs; /* index entries as the files hold them; (epoch int32, base int64) pairs */
    Fault fault;
} Recovery;

static Stop
recover_walk(Recovery *r)
{
    const uint8_t *data = r->data;
    for (;;) {
        Py_ssize_t end = 0, pos = r->pos;
        Frame kind = frame_at(data, r->len, pos, r->origin, r->limit, &end, &r->fault);
        if (kind == FRAME_PARTIAL)
            return STOP_END;
        if (kind == FRAME_LEGACY)
            return STOP_LEGACY;
        if (kind == FRAME_FAULT)
            return STOP_FAULT;
        const uint8_t *b = data + pos;
        Py_ssize_t size = end - pos;
        if (!batch_ok(b, size, &r->fault))
            return STOP_FAULT;
        int64_t base = i64_at(b), max_ts = i64_at(b + MAX_TIMESTAMP_OFFSET);
        i128 base_rel = (i128)base - r->segment_base, last_rel = base_rel + i32_at(b + LAST_OFFSET_DELTA_OFFSET);
        if (base_rel <= r->prev_rel || last_rel < 0 || last_rel > MAX_RELATIVE_OFFSET) {
            r->fault = (Fault){F_NOT_FOLLOWING, r->origin + pos, base, 0, 0, 0, (i128)base,
                               last_rel + r->segment_base, (i128)r->prev_rel + r->segment_base};
            return STOP_FAULT;
        }
        r->prev_rel = (int64_t)last_rel;
        int64_t last = r->segment_base + r->prev_rel;
        /* segment.py's _index_batches, batch by batch */
        if (max_ts > r->max_ts) {
            r->max_ts = max_ts;
            r->max_ts_offset = last;
        }
        if (r->since > r->interval) {
            Py_ssize_t position = r->origin + pos;
            if (position > INT32_MAX)
                return STOP_POSITION;
            uint8_t entry[12];
            store_be(entry, 4, (uint32_t)r->prev_rel);
            store_be(entry + 4, 4, (uint32_t)position);
            if (bytes_put(&r->offsets, entry, 8) < 0)
                return STOP_NO_MEMORY;
            if (r->max_ts > r->indexed_ts) {
                store_be(entry, 8, (uint64_t)r->max_ts);
                store_be(entry + 8, 4, (uint32_t)(r->max_ts_offset - r->segment_base));
                if (bytes_put(&r->times, entry, 12) < 0)
                    return STOP_NO_MEMORY;
                r->indexed_ts = r->max_ts;
            }
            r->since = 0;
        }
        r->since += size;
        int32_t epoch = i32_at(b + PARTITION_LEADER_EPOCH_OFFSET);
        if (!r->has_epoch || epoch != r->epoch) {
            uint8_t change[12];
            r->has_epoch = 1;
            r->epoch = epoch;
            store_be(change, 4, (uint32_t)epoch);
            store_be(change + 4, 8, (uint64_t)base);
            if (bytes_put(&r->epochs, change, 12) < 0)
                return STOP_NO_MEMORY;
        }
        r->pos = end;
    }
}

PyDoc_STRVAR(recover_batches_doc,
             "recover_batches(chunk, start, origin, segment_base, max_batch_size, interval, state)\n"
             "    -> (end, state, offset_entries, time_entries, epochs, stop)\n\n"
             "Walk the whole v2 batches of chunk from start as a segment's recovery does (chunk starts at\n"
             "byte origin of the segment): framing (max_batch_size < 0: no limit), CRC, counts, offsets\n"
             "increasing and within an int32 of segment_base. state, carried from call to call, is\n"
             "(previous last offset - segment_base, epoch or None, bytes since the last index entry,\n"
             "max timestamp, its offset, last time index timestamp). The index entries of the batches\n"
             "walked (one each time more than interval bytes passed since the last) come packed as the\n"
             ".index and .timeindex files hold them; epochs lists (epoch, base offset) where the leader\n"
             "epoch changed. The walk ends at end: stop is None at a partial batch or the chunk's end,\n"
             "True at a legacy batch (for Python to walk), or the CorruptRecordError of a bad batch.\n"
             "The GIL is released while it walks.");

static PyObject *
recover_batches(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"chunk", "start", "origin", "segment_base", "max_batch_size", "interval", "state", NULL};
    Py_buffer buf;
    PyObject *epoch_in;
    long long segment_base, limit, interval, prev_rel, since, max_ts, max_ts_offset, indexed_ts;
    Py_ssize_t start, origin;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnLLL(LOLLLL):recover_batches", names, &buf, &start, &origin,
                                     &segment_base, &limit, &interval, &prev_rel, &epoch_in, &since, &max_ts,
                                     &max_ts_offset, &indexed_ts))
        return NULL;
    Recovery r = {.data = buf.buf, .len = buf.len, .origin = origin, .segment_base = segment_base, .limit = limit,
                  .interval = interval, .pos = start, .prev_rel = prev_rel, .since = since, .max_ts = max_ts,
                  .max_ts_offset = max_ts_offset, .indexed_ts = indexed_ts};
    PyObject *result = NULL;
    if (start < 0 || start > buf.len) {
        PyErr_SetString(PyExc_ValueError, "start lies outside the chunk");
        goto done;
    }
    if (epoch_in != Py_None) {
        long e = PyLong_AsLong(epoch_in);
        if (e == -1 && PyErr_Occurred())
            goto done;
        r.has_epoch = 1;
        r.epoch = (int32_t)e;
    }
    if ((i128)max_ts_offset - segment_base < 0 || (i128)max_ts_offset - segment_base > MAX_RELATIVE_OFFSET) {
        PyErr_SetString(PyExc_ValueError, "the max timestamp's offset lies outside the segment");
        goto done;
    }
    Stop stop;
    Py_BEGIN_ALLOW_THREADS
    stop = recover_walk(&r);
    Py_END_ALLOW_THREADS
    if (stop == STOP_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (stop == STOP_POSITION) {
        PyErr_Format(PyExc_OverflowError, "position %zd does not fit in an offset index entry", r.origin + r.pos);
        goto done;
    }
    PyObject *stopped;
    if (stop == STOP_FAULT) {
        if ((stopped = fault_object(&r.fault)) == NULL)
            goto done;
    }
    else {
        stopped = stop == STOP_LEGACY ? Py_True : Py_None;
        Py_INCREF(stopped);
    }
    PyObject *epochs = PyList_New((Py_ssize_t)(r.epochs.len / 12));
    if (epochs == NULL) {
        Py_DECREF(stopped);
        goto done;
    }
    for (size_t i = 0; i < r.epochs.len / 12; i++) {
        const uint8_t *e = r.epochs.data + 12 * i;
        PyObject *pair = Py_BuildValue("(iL)", i32_at(e), (long long)i64_at(e + 4));
        if (pair == NULL) {
            Py_DECREF(epochs);
            Py_DECREF(stopped);
            goto done;
        }
        PyList_SET_ITEM(epochs, (Py_ssize_t)i, pair);
    }
    PyObject *epoch_out = r.has_epoch ? PyLong_FromLong(r.epoch) : Py_NewRef(Py_None);
    result = Py_BuildValue("(n(LNLLLL)y#y#NN)", r.pos, (long long)r.prev_rel, epoch_out, (long long)r.since,
                           (long long)r.max_ts, (long long)r.max_ts_offset, (long long)r.indexed_ts,
                           r.offsets.data ? (const char *)r.offsets.data : "", (Py_ssize_t)r.offsets.len,
                           r.times.data ? (const char *)r.times.data : "", (Py_ssize_t)r.times.len, epochs, stopped);
done:
    PyMem_RawFree(r.offsets.data);
    PyMem_RawFree(r.times.data);
    PyMem_RawFree(r.epochs.data);
    PyBuffer_Release(&buf);
    return result;
}

/* ------------------------------------------------------------------ lookup */

PyDoc_STRVAR(find_timestamp_doc,
             "find_timestamp(batch, target, start_offset, batch_position, decompress) -> (timestamp, offset) | None\n\n"
             "The first record of a whole v2 batch whose timestamp (the batch's max timestamp in a\n"
             "LogAppendTime batch) is >= target and offset >= start_offset, without record objects; the\n"
             "records of a compressed batch are decompress(codec, view)'s. Every record is walked and\n"
             "checked as decode_records checks them, so a damaged batch fails as decoding it does.");

/* An int target for a comparison with int64 values: clamped, and *never set when it
 * lies above them all. */
static int
int64_target(PyObject *obj, int64_t *value, int *never)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *value = overflow < 0 ? INT64_MIN : overflow > 0 ? INT64_MAX : v;
    *never |= overflow > 0;
    return 0;
}

static PyObject *
find_timestamp(PyObject *self, PyObject *args)
{
    PyObject *owner, *target_obj, *start_obj, *decompress;
    Py_ssize_t position;
    if (!PyArg_ParseTuple(args, "OO!O!nO", &owner, &PyLong_Type, &target_obj, &PyLong_Type, &start_obj, &position,
                          &decompress))
        return NULL;
    Walk w = {.search = 1};
    int never = 0;
    if (int64_target(target_obj, &w.target, &never) < 0 || int64_target(start_obj, &w.start_offset, &never) < 0)
        return NULL;
    Py_buffer buf, held = {NULL};
    if (PyObject_GetBuffer(owner, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    const uint8_t *b = buf.buf, *records;
    Py_ssize_t len;
    if (buf.len < HEADER_SIZE) {
        PyErr_SetString(PyExc_ValueError, "a batch is at least a header");
        goto done;
    }
    w.base_offset = i64_at(b);
    w.base_ts = i64_at(b + BASE_TIMESTAMP_OFFSET);
    w.max_ts = i64_at(b + MAX_TIMESTAMP_OFFSET);
    w.log_append_time = (i16_at(b + ATTRIBUTES_OFFSET) & TIMESTAMP_TYPE_MASK) != 0;
    if (records_of(owner, b, 0, buf.len, position, decompress, &held, &records, &len) < 0 ||
        walk_records(records, len, i32_at(b + RECORDS_COUNT_OFFSET), position, &w) < 0)
        goto done;
    if (w.found && !never)
        result = Py_BuildValue("(LL)", (long long)w.found_ts, (long long)w.found_offset);
    else
        result = Py_NewRef(Py_None);
done:
    if (held.obj != NULL)
        PyBuffer_Release(&held);
    PyBuffer_Release(&buf);
    return result;
}

/* ------------------------------------------------------------------ index search */

PyDoc_STRVAR(floor_entry_doc,
             "floor_entry(buffer, entries, entry_size, key_size, target, warm_bytes) -> int\n\n"
             "The slot of the largest of `entries` sorted entries whose key (a big-endian int32 or int64,\n"
             "key_size 4 or 8, at the start of each entry_size-byte entry) is <= target; -1 if none.\n"
             "Kafka's warm section first: when the entry warm_bytes before the last is <= target, only\n"
             "the entries after it are searched (the pages a tailing reader keeps in the page cache).");

static PyObject *
floor_entry(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t n, size, key_size, warm_bytes;
    PyObject *target_obj;
    if (!PyArg_ParseTuple(args, "y*nnnO!n", &buf, &n, &size, &key_size, &PyLong_Type, &target_obj, &warm_bytes))
        return NULL;
    Py_ssize_t slot = -1;
    int overflow;
    long long target = PyLong_AsLongLongAndOverflow(target_obj, &overflow);
    if (target == -1 && PyErr_Occurred())
        goto fail;
    if ((key_size != 4 && key_size != 8) || size < key_size || n < 0 || n > buf.len / size) {
        PyErr_SetString(PyExc_ValueError, "entries lie outside the buffer");
        goto fail;
    }
    const uint8_t *base = buf.buf;
#define KEY(i) (key_size == 4 ? (int64_t)i32_at(base + (i) * size) : i64_at(base + (i) * size))
    if (n == 0 || overflow < 0 || (overflow == 0 && KEY(0) > target))
        goto done; /* a target past the int64s: above or below every key */
    if (overflow > 0) {
        slot = n - 1;
        goto done;
    }
    Py_ssize_t warm = n - 1 - warm_bytes / size, lo, hi;
    if (warm < 0)
        warm = 0;
    if (KEY(warm) <= target)
        lo = warm, hi = n - 1;
    else
        lo = 0, hi = warm;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi + 1) >> 1;
        if (KEY(mid) <= target)
            lo = mid;
        else
            hi = mid - 1;
    }
#undef KEY
    slot = lo;
done:
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(slot);
fail:
    PyBuffer_Release(&buf);
    return NULL;
}

PyDoc_STRVAR(now_ms_doc, "now_ms()\n\nThe wall clock in milliseconds since the epoch (time.time_ns() // 1_000_000), in C: the\n"
             "log's default clock, which every append reads.");

static PyObject *
now_ms(PyObject *self, PyObject *unused)
{
    int64_t now;
    return realtime_ms(&now) < 0 ? NULL : PyLong_FromLongLong(now);
}

static PyMethodDef methods[] = {
    {"check_append", (PyCFunction)(void (*)(void))check_append, METH_VARARGS | METH_KEYWORDS, check_append_doc},
    {"check_and_assign", (PyCFunction)(void (*)(void))check_and_assign, METH_FASTCALL, check_and_assign_doc},
    {"append_batch", (PyCFunction)(void (*)(void))append_batch, METH_FASTCALL, append_batch_doc},
    {"bind_segment", bind_segment, METH_VARARGS, bind_segment_doc},
    {"now_ms", now_ms, METH_NOARGS, now_ms_doc},
    {"recover_batches", (PyCFunction)(void (*)(void))recover_batches, METH_VARARGS | METH_KEYWORDS,
     recover_batches_doc},
    {"find_timestamp", find_timestamp, METH_VARARGS, find_timestamp_doc},
    {"floor_entry", floor_entry, METH_VARARGS, floor_entry_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "seglog.storage._scan", "Walks over whole buffers of v2 batches.", -1, methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    PyObject *errors = PyImport_ImportModule("seglog.errors");
    if (errors == NULL)
        return NULL;
    struct {
        PyObject **slot;
        const char *name;
    } wanted[] = {
        {&CorruptRecordError, "CorruptRecordError"},
        {&InvalidRecordError, "InvalidRecordError"},
        {&InvalidTimestampError, "InvalidTimestampError"},
        {&RecordTooLargeError, "RecordTooLargeError"},
        {&UnexpectedAppendOffsetError, "UnexpectedAppendOffsetError"},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        *wanted[i].slot = PyObject_GetAttrString(errors, wanted[i].name);
        if (*wanted[i].slot == NULL) {
            Py_DECREF(errors);
            return NULL;
        }
    }
    Py_DECREF(errors);
    if ((s_producer_epoch = PyUnicode_InternFromString("producer_epoch")) == NULL ||
        (s_batches = PyUnicode_InternFromString("batches")) == NULL ||
        (s_current_txn_first_offset = PyUnicode_InternFromString("current_txn_first_offset")) == NULL)
        return NULL;
    crc32c_init();
    return PyModule_Create(&module);
}
