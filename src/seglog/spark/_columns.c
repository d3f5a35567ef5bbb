/* Records straight into columns: the buffers of Arrow arrays, with no Python
 * object per record. seglog.spark.arrow wraps them with pyarrow; this module
 * knows nothing of pyarrow, only Arrow's memory layout (little-endian):
 *
 *   fixed width   values, one per row
 *                   offset         int64
 *                   timestamp      int64, microseconds (Spark's TimestampType;
 *                                  Kafka's are milliseconds)
 *                   timestampType  int32 (-1 none, 0 CreateTime, 1 LogAppendTime)
 *   binary/string validity bitmap (bit i set = row i not null, least
 *                 significant bit first), int32 offsets (rows + 1), data;
 *                 value i is data[offsets[i]:offsets[i + 1]]
 *                   key, value     binary
 *   headers       list<struct<key: string, value: binary>>: validity bitmap
 *                 (a record without headers is a null list, as Spark's Kafka
 *                 source shows it), int32 list offsets (rows + 1) into the
 *                 header entries: a struct whose children are a string column
 *                 (keys, never null) and a binary column (values)
 *
 * A builder accumulates rows from many batches and hands its buffers over in
 * finish() without copying them: each is a ColumnBuffer, a read-only object
 * with the buffer protocol that owns its memory (pyarrow.py_buffer wraps it).
 * Record bytes are copied once, from the records section into the key/value
 * data: Arrow's binary layout allows no gaps between values, and a record's
 * varints sit between them.
 *
 * It lives beside its owner, seglog.spark.arrow; the format comes from records/
 * through its record parser (records/_record.h).
 *
 * Validation is records/_codec.c's (one parser, _record.h): a record count is checked
 * against the bytes present before anything is sized by it, every length
 * against the bytes left, and bytes after the last record are corrupt. A
 * batch that fails leaves the builder as it was before that batch. Header keys
 * that are not UTF-8 are stored as Java's decoder reads them (each malformed
 * sequence becomes U+FFFD), since Arrow and Spark strings must be UTF-8.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <string.h>

#include "records/_batch_layout.h"
#include "records/_crc32c.h"
#include "records/_record.h"

static PyObject *CorruptRecordError; /* seglog.errors.CorruptRecordError */

/* Raises CorruptRecordError(message, position=batch_position, offset=offset or None). */
static void
raise_corrupt(Py_ssize_t batch_position, PyObject *offset, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, args);
    va_end(args);
    PyObject *exc = NULL;
    if (msg != NULL) {
        PyObject *kwargs = Py_BuildValue("{s:n,s:O}", "position", batch_position, "offset", offset ? offset : Py_None);
        if (kwargs != NULL)
            exc = PyObject_VectorcallDict(CorruptRecordError, &msg, 1, kwargs);
        Py_XDECREF(kwargs);
        Py_DECREF(msg);
    }
    if (exc != NULL) {
        PyErr_SetObject(CorruptRecordError, exc);
        Py_DECREF(exc);
    }
}

/* ------------------------------------------------------------- ColumnBuffer */

/* Memory handed to Python: read-only bytes, freed with the object. The raw
 * allocator needs no GIL, so whoever drops the last reference may free it. */
typedef struct {
    PyObject_HEAD
    uint8_t *data;
    Py_ssize_t len;
} ColumnBuffer;

static int64_t EMPTY[1]; /* an empty buffer still gets an aligned, non-NULL address */

static int
column_buffer_get(ColumnBuffer *self, Py_buffer *view, int flags)
{
    void *data = self->data ? (void *)self->data : (void *)EMPTY;
    return PyBuffer_FillInfo(view, (PyObject *)self, data, self->len, 1, flags);
}

static Py_ssize_t
column_buffer_len(ColumnBuffer *self)
{
    return self->len;
}

static void
column_buffer_dealloc(ColumnBuffer *self)
{
    PyMem_RawFree(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs column_buffer_as_buffer = {(getbufferproc)column_buffer_get, NULL};
static PySequenceMethods column_buffer_as_sequence = {.sq_length = (lenfunc)column_buffer_len};

static PyTypeObject ColumnBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "seglog.records._columns.ColumnBuffer",
    .tp_basicsize = sizeof(ColumnBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only bytes of one Arrow buffer, handed over by ColumnBuilder.finish().",
    .tp_dealloc = (destructor)column_buffer_dealloc,
    .tp_as_buffer = &column_buffer_as_buffer,
    .tp_as_sequence = &column_buffer_as_sequence,
};

/* ---------------------------------------------------------- growable bytes */

typedef struct {
    uint8_t *data;
    Py_ssize_t len, cap;
    Py_ssize_t hint; /* the size handed over last time: the first allocation after a finish() */
} Buf;

static int
buf_grow(Buf *b, Py_ssize_t extra)
{
    if (extra > PY_SSIZE_T_MAX / 4 - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + extra;
    Py_ssize_t cap = b->cap ? b->cap * 2 : (b->hint > 4096 ? b->hint : 4096);
    while (cap < need)
        cap *= 2;
    uint8_t *data = PyMem_RawRealloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int
buf_reserve(Buf *b, Py_ssize_t extra)
{
    return extra <= b->cap - b->len ? 0 : buf_grow(b, extra);
}

/* Appends n bytes; room must have been reserved. */
static inline void
buf_push(Buf *b, const void *src, Py_ssize_t n)
{
    if (n > 0) /* an empty value may meet a buffer not yet allocated */
        memcpy(b->data + b->len, src, n);
    b->len += n;
}

/* The bytes so far as a ColumnBuffer, leaving b empty (it allocates anew, about as much). */
static PyObject *
buf_hand_over(Buf *b)
{
    ColumnBuffer *out = PyObject_New(ColumnBuffer, &ColumnBufferType);
    if (out == NULL)
        return NULL;
    out->data = b->data;
    out->len = b->len;
    b->hint = b->len + b->len / 8;
    b->data = NULL;
    b->len = b->cap = 0;
    return (PyObject *)out;
}

/* ----------------------------------------------------- validity bitmaps */

/* Sets the validity bit of row i (the next row); room for one byte reserved. */
static inline void
bits_push(Buf *bits, Py_ssize_t i, int valid)
{
    if ((i & 7) == 0)
        bits->data[bits->len++] = 0;
    if (valid)
        bits->data[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* Forgets the bits of rows n and after. */
static void
bits_truncate(Buf *bits, Py_ssize_t n)
{
    bits->len = (n + 7) / 8;
    if (n & 7) /* later rows OR their bits into this byte */
        bits->data[n >> 3] &= (uint8_t)((1u << (n & 7)) - 1);
}

/* ------------------------------------------------- variable-width columns */

typedef struct {
    Buf valid, offsets, data;
    Py_ssize_t count, nulls;
} VarColumn;

typedef struct {
    Py_ssize_t count, nulls, data_len;
} VarMark;

static int
var_start(VarColumn *c)
{
    int32_t zero = 0;
    c->count = c->nulls = 0;
    c->valid.len = c->offsets.len = c->data.len = 0;
    if (buf_reserve(&c->offsets, 4) < 0)
        return -1;
    buf_push(&c->offsets, &zero, 4);
    return 0;
}

/* Room for n more values of `bytes` bytes in all. */
static inline int
var_reserve(VarColumn *c, Py_ssize_t n, Py_ssize_t bytes)
{
    return buf_reserve(&c->valid, n / 8 + 1) < 0 || buf_reserve(&c->offsets, 4 * n) < 0 ||
                   buf_reserve(&c->data, bytes) < 0
               ? -1
               : 0;
}

/* Appends one value (len -1: null); var_reserve must have made room. The
 * caller keeps data below 2 GiB, where int32 offsets end. */
static inline void
var_push(VarColumn *c, const uint8_t *data, int64_t len)
{
    bits_push(&c->valid, c->count, len >= 0);
    if (len >= 0)
        buf_push(&c->data, data, (Py_ssize_t)len);
    else
        c->nulls++;
    c->count++;
    int32_t end = (int32_t)c->data.len;
    buf_push(&c->offsets, &end, 4);
}

static VarMark
var_mark(const VarColumn *c)
{
    VarMark m = {c->count, c->nulls, c->data.len};
    return m;
}

static void
var_rewind(VarColumn *c, VarMark m)
{
    c->count = m.count;
    c->nulls = m.nulls;
    c->data.len = m.data_len;
    c->offsets.len = 4 * (m.count + 1);
    bits_truncate(&c->valid, m.count);
}

/* (validity or None, offsets, data, null count). Hands the buffers over. */
static PyObject *
var_hand_over(VarColumn *c)
{
    PyObject *valid = c->nulls ? buf_hand_over(&c->valid) : Py_NewRef(Py_None);
    return Py_BuildValue("(NNNn)", valid, buf_hand_over(&c->offsets), buf_hand_over(&c->data), c->nulls);
}

static void
var_free(VarColumn *c)
{
    PyMem_RawFree(c->valid.data);
    PyMem_RawFree(c->offsets.data);
    PyMem_RawFree(c->data.data);
}

/* 1 if s[0:n) is well-formed UTF-8: shortest forms, no surrogates, at most U+10FFFF. */
static int
utf8_valid(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int more = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
        if (more < 0 || more >= n - i)
            return 0;
        for (int k = 1; k <= more; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        uint8_t c1 = s[i + 1];
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
            (c == 0xF4 && c1 > 0x8F))
            return 0;
        i += 1 + more;
    }
    return 1;
}

/* Appends a string value, repairing malformed UTF-8 as Java's decoder does
 * (the same maximal-subpart rule as Python's "replace"). */
static int
var_push_text(VarColumn *c, const uint8_t *data, int64_t len)
{
    if (utf8_valid(data, (Py_ssize_t)len)) {
        if (var_reserve(c, 1, (Py_ssize_t)len) < 0)
            return -1;
        var_push(c, data, len);
        return 0;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)len, "replace");
    if (text == NULL)
        return -1;
    Py_ssize_t fixed_len;
    const char *fixed = PyUnicode_AsUTF8AndSize(text, &fixed_len);
    int rc = fixed == NULL || var_reserve(c, 1, fixed_len) < 0 ? -1 : 0;
    if (rc == 0)
        var_push(c, (const uint8_t *)fixed, fixed_len);
    Py_DECREF(text);
    return rc;
}

/* ------------------------------------------------------------ the builder */

typedef struct {
    PyObject_HEAD
    int with_headers;
    Py_ssize_t rows;
    Buf offsets, timestamps, timestamp_types;
    Buf header_valid, header_offsets; /* the list column: null for a record without headers */
    Py_ssize_t header_nulls;
    VarColumn key, value, header_key, header_value;
} ColumnBuilder;

typedef struct {
    Py_ssize_t rows, header_nulls;
    VarMark key, value, header_key, header_value;
} Mark;

static int
builder_start(ColumnBuilder *self)
{
    int32_t zero = 0;
    self->rows = self->header_nulls = 0;
    self->offsets.len = self->timestamps.len = self->timestamp_types.len = 0;
    self->header_valid.len = self->header_offsets.len = 0;
    if (var_start(&self->key) < 0 || var_start(&self->value) < 0 || var_start(&self->header_key) < 0 ||
        var_start(&self->header_value) < 0 || buf_reserve(&self->header_offsets, 4) < 0)
        return -1;
    buf_push(&self->header_offsets, &zero, 4);
    return 0;
}

static Mark
builder_mark(const ColumnBuilder *self)
{
    Mark m = {self->rows, self->header_nulls, var_mark(&self->key), var_mark(&self->value),
              var_mark(&self->header_key), var_mark(&self->header_value)};
    return m;
}

static void
builder_rewind(ColumnBuilder *self, Mark m)
{
    self->rows = m.rows;
    self->offsets.len = self->timestamps.len = 8 * m.rows;
    self->timestamp_types.len = 4 * m.rows;
    if (self->with_headers) {
        self->header_nulls = m.header_nulls;
        self->header_offsets.len = 4 * (m.rows + 1);
        bits_truncate(&self->header_valid, m.rows);
    }
    var_rewind(&self->key, m.key);
    var_rewind(&self->value, m.value);
    var_rewind(&self->header_key, m.header_key);
    var_rewind(&self->header_value, m.header_value);
}

/* Room for n more rows and `bytes` more bytes of keys, values and headers;
 * OverflowError when a column could pass the 2 GiB of int32 offsets. */
static int
builder_reserve(ColumnBuilder *self, Py_ssize_t n, Py_ssize_t bytes)
{
    VarColumn *cols[4] = {&self->key, &self->value, &self->header_key, &self->header_value};
    for (int i = 0; i < 4; i++) {
        if (cols[i]->data.len > INT32_MAX - bytes || cols[i]->count > INT32_MAX - bytes) {
            PyErr_SetString(PyExc_OverflowError, "a column would pass 2 GiB: finish() the columns first");
            return -1;
        }
    }
    if (buf_reserve(&self->offsets, 8 * n) < 0 || buf_reserve(&self->timestamps, 8 * n) < 0 ||
        buf_reserve(&self->timestamp_types, 4 * n) < 0 || var_reserve(&self->key, n, 0) < 0 ||
        var_reserve(&self->value, n, 0) < 0)
        return -1;
    if (self->with_headers && (buf_reserve(&self->header_valid, n / 8 + 1) < 0 ||
                               buf_reserve(&self->header_offsets, 4 * n) < 0))
        return -1;
    return 0;
}

static int
builder_init(ColumnBuilder *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"with_headers", NULL};
    int with_headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:ColumnBuilder", names, &with_headers))
        return -1;
    self->with_headers = with_headers;
    return builder_start(self);
}

static void
builder_dealloc(ColumnBuilder *self)
{
    PyMem_RawFree(self->offsets.data);
    PyMem_RawFree(self->timestamps.data);
    PyMem_RawFree(self->timestamp_types.data);
    PyMem_RawFree(self->header_valid.data);
    PyMem_RawFree(self->header_offsets.data);
    var_free(&self->key);
    var_free(&self->value);
    var_free(&self->header_key);
    var_free(&self->header_value);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The fixed-width fields of one row; room reserved by builder_reserve. */
static inline void
push_fixed(ColumnBuilder *self, int64_t offset, int64_t micros, int32_t ts_type)
{
    buf_push(&self->offsets, &offset, 8);
    buf_push(&self->timestamps, &micros, 8);
    buf_push(&self->timestamp_types, &ts_type, 4);
}

/* Closes a row's list of headers; no headers is a null list, as in Spark's Kafka source. */
static inline void
end_headers(ColumnBuilder *self)
{
    int32_t end = (int32_t)self->header_key.count;
    int present = end != ((int32_t *)self->header_offsets.data)[self->rows];
    bits_push(&self->header_valid, self->rows, present);
    self->header_nulls += !present;
    buf_push(&self->header_offsets, &end, 4);
}

/* The headers of a record parse_record accepted. */
static int
push_headers(ColumnBuilder *self, const RawRecord *r)
{
    const uint8_t *p = r->headers;
    for (int64_t h = 0; h < r->header_count; h++) {
        const uint8_t *k, *v;
        int64_t klen, vlen;
        next_header(&p, &k, &klen, &v, &vlen);
        if (var_push_text(&self->header_key, k, klen) < 0 || var_reserve(&self->header_value, 1, vlen) < 0)
            return -1;
        var_push(&self->header_value, v, vlen);
    }
    end_headers(self);
    return 0;
}

/* Kafka's milliseconds as Spark's microseconds; -1 (with an error set) past int64. */
static int
to_micros(int64_t millis, int64_t *micros, Py_ssize_t batch_position, int64_t offset)
{
    if (!__builtin_mul_overflow(millis, (int64_t)1000, micros))
        return 0;
    PyObject *at = PyLong_FromLongLong(offset);
    raise_corrupt(batch_position, at, "timestamp %lld ms is beyond what microseconds can hold", (long long)millis);
    Py_XDECREF(at);
    return -1;
}

/* The fields of a v2 batch header that decoding needs. */
typedef struct {
    int64_t base_offset, base_timestamp, max_timestamp;
    Py_ssize_t count, position;
    int log_append_time;
    int32_t timestamp_type;
} BatchInfo;

/* Decodes a records section into the columns, keeping offsets in [min_offset,
 * end_offset); returns the rows kept, or -1 with CorruptRecordError set and
 * the builder rewound to where it was. */
static Py_ssize_t
decode_section(ColumnBuilder *self, const BatchInfo *b, const uint8_t *start, Py_ssize_t len, int64_t min_offset,
               int64_t end_offset)
{
    const uint8_t *p = start, *end = start + len;
    Mark mark = builder_mark(self);
    /* a record takes at least 7 bytes: the count is bounded by the bytes present */
    if (b->count < 0 || b->count > len / 7) {
        raise_corrupt(b->position, NULL, "record count %zd does not fit in %zd bytes of records", b->count, len);
        return -1;
    }
    if (builder_reserve(self, b->count, len) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        RawRecord r;
        if (p == end) { /* the records ended cleanly before the count did */
            raise_corrupt(b->position, NULL, "record count %zd disagrees with the batch: its records end after %zd",
                          b->count, i);
            goto fail;
        }
        ParseResult res = parse_record(&p, end, &r);
        if (res.fault) {
            raise_corrupt(b->position, NULL, "record %zd: %s at byte %zd of the records", i, res.fault,
                          (Py_ssize_t)(res.at - start));
            goto fail;
        }
        int64_t offset, millis = b->max_timestamp, micros;
        if (__builtin_add_overflow(b->base_offset, r.off_delta, &offset)) {
            raise_corrupt(b->position, NULL, "record %zd: offset past int64", i);
            goto fail;
        }
        if (offset < min_offset || offset >= end_offset)
            continue; /* still parsed: the whole batch is validated */
        if (!b->log_append_time && __builtin_add_overflow(b->base_timestamp, r.ts_delta, &millis)) {
            raise_corrupt(b->position, NULL, "record %zd: timestamp past int64", i);
            goto fail;
        }
        if (to_micros(millis, &micros, b->position, offset) < 0 || buf_reserve(&self->key.data, r.key_len) < 0 ||
            buf_reserve(&self->value.data, r.value_len) < 0)
            goto fail;
        push_fixed(self, offset, micros, b->timestamp_type);
        var_push(&self->key, r.key, r.key_len);
        var_push(&self->value, r.value, r.value_len);
        if (self->with_headers && push_headers(self, &r) < 0)
            goto fail;
        self->rows++;
    }
    if (p != end) {
        raise_corrupt(b->position, NULL, "record count %zd disagrees with the batch: %zd bytes follow the last record",
                      b->count, (Py_ssize_t)(end - p));
        goto fail;
    }
    return self->rows - mark.rows;
fail:
    builder_rewind(self, mark);
    return -1;
}

/* 0 when the whole v2 batch in `batch` carries the CRC32C of its bytes from the attributes on;
 * else -1 with CorruptRecordError set (the batch's position and base offset). */
static int
check_crc(const Py_buffer *batch, const BatchInfo *b)
{
    PyObject *at = NULL;
    if (batch->len < HEADER_SIZE) {
        raise_corrupt(b->position, at, "a batch of %zd bytes is shorter than a v2 batch header", batch->len);
        return -1;
    }
    const uint8_t *p = batch->buf;
    uint32_t stored = (uint32_t)p[CRC_OFFSET] << 24 | (uint32_t)p[CRC_OFFSET + 1] << 16 |
                      (uint32_t)p[CRC_OFFSET + 2] << 8 | p[CRC_OFFSET + 3];
    uint32_t computed = crc32c_of(p + CRC_START, (size_t)(batch->len - CRC_START));
    if (stored == computed)
        return 0;
    char hex[2][11];
    snprintf(hex[0], sizeof hex[0], "0x%08x", stored);
    snprintf(hex[1], sizeof hex[1], "0x%08x", computed);
    at = PyLong_FromLongLong(b->base_offset);
    raise_corrupt(b->position, at, "CRC mismatch: stored %s, computed %s", hex[0], hex[1]);
    Py_XDECREF(at);
    return -1;
}

PyDoc_STRVAR(append_doc,
             "append(records, count, base_offset, base_timestamp, log_append_time, max_timestamp,\n"
             "       timestamp_type, batch_position, min_offset, max_offset_exclusive, batch=None)\n"
             "       -> rows kept\n\n"
             "Decode the records section of one v2 batch (decompressed by the caller) into the\n"
             "columns, keeping the rows whose offset lies in [min_offset, max_offset_exclusive).\n"
             "In a LogAppendTime batch every row's timestamp is max_timestamp. Every record is\n"
             "validated, kept or not; corrupt bytes raise CorruptRecordError and leave the\n"
             "builder as it was. With batch (the whole batch's bytes, as stored: compressed if it\n"
             "is), its CRC32C is checked first, as Kafka's consumer does with check.crcs.");

static PyObject *
builder_append(ColumnBuilder *self, PyObject *args)
{
    Py_buffer buf, batch = {.obj = NULL};
    PyObject *batch_obj = Py_None;
    BatchInfo b;
    long long base_offset, base_timestamp, max_timestamp, min_offset, end_offset;
    if (!PyArg_ParseTuple(args, "y*nLLpLinLL|O:append", &buf, &b.count, &base_offset, &base_timestamp,
                          &b.log_append_time, &max_timestamp, &b.timestamp_type, &b.position, &min_offset,
                          &end_offset, &batch_obj))
        return NULL;
    b.base_offset = base_offset;
    b.base_timestamp = base_timestamp;
    b.max_timestamp = max_timestamp;
    Py_ssize_t rows = -1;
    if (batch_obj != Py_None && PyObject_GetBuffer(batch_obj, &batch, PyBUF_SIMPLE) < 0)
        goto done;
    if (batch.obj == NULL || check_crc(&batch, &b) == 0)
        rows = decode_section(self, &b, buf.buf, buf.len, min_offset, end_offset);
done:
    if (batch.obj != NULL)
        PyBuffer_Release(&batch);
    PyBuffer_Release(&buf);
    return rows < 0 ? NULL : PyLong_FromSsize_t(rows);
}

/* A key, value or header value: None, or anything with the buffer protocol. */
static int
optional_bytes(PyObject *obj, Py_buffer *view, const char *what)
{
    view->obj = NULL;
    view->buf = NULL;
    view->len = -1;
    if (obj == Py_None)
        return 0;
    if (PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes or None, not str", what);
        return -1;
    }
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE);
}

static void
release_optional(Py_buffer *view)
{
    if (view->obj != NULL)
        PyBuffer_Release(view);
}

/* One (key, value) header given by Python: the key a str (read back through
 * surrogateescape, so the bytes on disk) or bytes. */
static int
push_python_header(ColumnBuilder *self, PyObject *pair)
{
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "a header must be a (key, value) tuple");
        return -1;
    }
    PyObject *key = PyTuple_GET_ITEM(pair, 0);
    PyObject *raw = PyUnicode_Check(key) ? PyUnicode_AsEncodedString(key, "utf-8", "surrogateescape")
                    : PyBytes_Check(key) ? Py_NewRef(key)
                                         : NULL;
    if (raw == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a header key must be str");
        return -1;
    }
    Py_buffer value;
    int rc = var_push_text(&self->header_key, (const uint8_t *)PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw));
    Py_DECREF(raw);
    if (rc < 0 || optional_bytes(PyTuple_GET_ITEM(pair, 1), &value, "a header value") < 0)
        return -1;
    rc = var_reserve(&self->header_value, 1, value.len);
    if (rc == 0)
        var_push(&self->header_value, value.buf, value.len);
    release_optional(&value);
    return rc;
}

PyDoc_STRVAR(append_record_doc,
             "append_record(offset, timestamp, timestamp_type, key, value, headers=(), batch_position=-1)\n\n"
             "Append one row already decoded (the rare legacy v0/v1 message). The caller filters\n"
             "by offset; timestamp is in milliseconds, as Kafka keeps it.");

static PyObject *
builder_append_record(ColumnBuilder *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"offset", "timestamp", "timestamp_type", "key", "value", "headers", "batch_position",
                            NULL};
    long long offset, millis;
    int ts_type;
    PyObject *key_obj, *value_obj, *headers = NULL, *seq = NULL;
    Py_ssize_t batch_position = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LLiOO|On:append_record", names, &offset, &millis, &ts_type,
                                     &key_obj, &value_obj, &headers, &batch_position))
        return NULL;
    Py_buffer key, value;
    if (optional_bytes(key_obj, &key, "key") < 0)
        return NULL;
    if (optional_bytes(value_obj, &value, "value") < 0) {
        release_optional(&key);
        return NULL;
    }
    Mark mark = builder_mark(self);
    PyObject *result = NULL;
    int64_t micros;
    Py_ssize_t bytes = (key.len > 0 ? key.len : 0) + (value.len > 0 ? value.len : 0);
    if (headers != NULL && headers != Py_None &&
        (seq = PySequence_Fast(headers, "headers must be a sequence of (key, value) tuples")) == NULL)
        goto done;
    if (to_micros(millis, &micros, batch_position, offset) < 0 || builder_reserve(self, 1, bytes) < 0 ||
        var_reserve(&self->key, 1, key.len) < 0 || var_reserve(&self->value, 1, value.len) < 0)
        goto done;
    push_fixed(self, offset, micros, (int32_t)ts_type);
    var_push(&self->key, key.buf, key.len);
    var_push(&self->value, value.buf, value.len);
    if (self->with_headers) {
        Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
        for (Py_ssize_t h = 0; h < n; h++) {
            if (push_python_header(self, PySequence_Fast_GET_ITEM(seq, h)) < 0) {
                builder_rewind(self, mark);
                goto done;
            }
        }
        end_headers(self);
    }
    self->rows++;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(seq);
    release_optional(&key);
    release_optional(&value);
    return result;
}

PyDoc_STRVAR(finish_doc,
             "finish() -> dict\n\n"
             "Hand over the columns built so far and start afresh. Buffers are ColumnBuffers\n"
             "(read-only, buffer protocol, no copy). Keys: rows; offset, timestamp (microseconds)\n"
             "and timestampType as buffers; key and value as (validity or None, offsets, data,\n"
             "null count); with headers, headers as (validity or None, list offsets, (entries, key\n"
             "column, value column), null count): a record without headers has a null list.");

static PyObject *
builder_finish(ColumnBuilder *self, PyObject *unused)
{
    PyObject *out = Py_BuildValue("{s:n,s:N,s:N,s:N,s:N,s:N}", "rows", self->rows, "offset",
                                  buf_hand_over(&self->offsets), "timestamp", buf_hand_over(&self->timestamps),
                                  "timestampType", buf_hand_over(&self->timestamp_types), "key",
                                  var_hand_over(&self->key), "value", var_hand_over(&self->value));
    if (out != NULL && self->with_headers) {
        PyObject *valid = self->header_nulls ? buf_hand_over(&self->header_valid) : Py_NewRef(Py_None);
        PyObject *entries = Py_BuildValue("(nNN)", self->header_key.count, var_hand_over(&self->header_key),
                                          var_hand_over(&self->header_value));
        PyObject *headers = Py_BuildValue("(NNNn)", valid, buf_hand_over(&self->header_offsets), entries,
                                          self->header_nulls);
        if (headers == NULL || PyDict_SetItemString(out, "headers", headers) < 0)
            Py_CLEAR(out);
        Py_XDECREF(headers);
    }
    /* even after an error (out of memory), the builder is left empty and usable */
    if (builder_start(self) < 0)
        Py_CLEAR(out);
    return out;
}

static PyObject *
builder_rows(ColumnBuilder *self, void *closure)
{
    return PyLong_FromSsize_t(self->rows);
}

static PyObject *
builder_data_bytes(ColumnBuilder *self, void *closure)
{
    return PyLong_FromSsize_t(self->key.data.len + self->value.data.len + self->header_key.data.len +
                              self->header_value.data.len);
}

static PyObject *
builder_with_headers(ColumnBuilder *self, void *closure)
{
    return PyBool_FromLong(self->with_headers);
}

static PyMethodDef builder_methods[] = {
    {"append", (PyCFunction)builder_append, METH_VARARGS, append_doc},
    {"append_record", (PyCFunction)(void (*)(void))builder_append_record, METH_VARARGS | METH_KEYWORDS,
     append_record_doc},
    {"finish", (PyCFunction)builder_finish, METH_NOARGS, finish_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef builder_getset[] = {
    {"rows", (getter)builder_rows, NULL, "rows appended since the last finish()", NULL},
    {"data_bytes", (getter)builder_data_bytes, NULL, "bytes of keys, values and headers held", NULL},
    {"with_headers", (getter)builder_with_headers, NULL, "whether headers are decoded", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ColumnBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "seglog.records._columns.ColumnBuilder",
    .tp_basicsize = sizeof(ColumnBuilder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ColumnBuilder(with_headers=False): v2 records into Arrow column buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)builder_init,
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_methods = builder_methods,
    .tp_getset = builder_getset,
};

/* ------------------------------------------------------------------ module */

/* Fills the module with the two types. */
static int
columns_init(PyObject *module)
{
    crc32c_init();
    if (CorruptRecordError == NULL) {
        PyObject *errors = PyImport_ImportModule("seglog.errors");
        if (errors == NULL)
            return -1;
        CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
        Py_DECREF(errors);
        if (CorruptRecordError == NULL)
            return -1;
    }
    if (PyType_Ready(&ColumnBufferType) < 0 || PyType_Ready(&ColumnBuilderType) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "ColumnBuffer", (PyObject *)&ColumnBufferType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "ColumnBuilder", (PyObject *)&ColumnBuilderType);
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "seglog.spark._columns", "v2 records decoded into Arrow column buffers.", -1, NULL,
};

PyMODINIT_FUNC
PyInit__columns(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && columns_init(m) < 0)
        Py_CLEAR(m);
    return m;
}
