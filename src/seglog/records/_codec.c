/* The per-record hot loops of the v2 record format, in C.
 *
 * A v2 record (Kafka's DefaultRecord), every integer a zigzag varint:
 *
 *   length          varint   bytes after this field
 *   attributes      int8     unused
 *   timestampDelta  varlong  timestamp - batch baseTimestamp
 *   offsetDelta     varint   offset - batch baseOffset
 *   keyLength       varint   -1 = null key
 *   key             bytes
 *   valueLength     varint   -1 = null value (a tombstone)
 *   value           bytes
 *   headerCount     varint
 *   headers         headerKeyLength varint, key utf-8,
 *                   headerValueLength varint (-1 = null), value
 *
 * Everything else (batch headers, compression) stays in Python: it is per
 * batch, not per record, but for lz4 compression as the Java client does it
 * (_lz4.h), which storage's cleaner also does in C. crc32c is here too: the batch's checksum, records'
 * public crc32c, the same code (_crc32c.h) that storage's C walks include.
 * Decoding never trusts a length field for an allocation: every length is
 * checked against the bytes actually present.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <string.h>

#include "_arrow_binary.h"
#include "_crc32c.h"
#include "_lz4.h"
#include "_record.h"

static PyObject *CorruptRecordError; /* seglog.errors.CorruptRecordError */

/* Sets CorruptRecordError(message, position=batch_position); returns NULL. */
static PyObject *
corrupt(Py_ssize_t batch_position, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, args);
    va_end(args);
    if (msg == NULL)
        return NULL;
    PyObject *kwargs = Py_BuildValue("{s:n}", "position", batch_position);
    PyObject *argv = PyTuple_Pack(1, msg);
    Py_DECREF(msg);
    if (kwargs && argv) {
        PyObject *exc = PyObject_Call(CorruptRecordError, argv, kwargs);
        if (exc) {
            PyErr_SetObject(CorruptRecordError, exc);
            Py_DECREF(exc);
        }
    }
    Py_XDECREF(kwargs);
    Py_XDECREF(argv);
    return NULL;
}

/* Java's long arithmetic wraps, and so does a timestamp or offset read back from a
 * hostile batch here; C's signed overflow would be undefined, so go through unsigned. */
static inline long long
wrap_add(long long a, long long b)
{
    return (long long)((unsigned long long)a + (unsigned long long)b);
}

static inline long long
wrap_sub(long long a, long long b)
{
    return (long long)((unsigned long long)a - (unsigned long long)b);
}

/* ------------------------------------------------------------------ decode */

static PyObject *
record_fault(Py_ssize_t batch_position, Py_ssize_t index, ParseResult res, const uint8_t *start)
{
    return corrupt(batch_position, "record %zd: %s at byte %zd of the records", index, res.fault,
                   (Py_ssize_t)(res.at - start));
}

/* A length-prefixed field as bytes (or str for header keys); -1 means null. */
static PyObject *
field(const uint8_t *data, int64_t len, int as_text)
{
    if (len < 0)
        Py_RETURN_NONE;
    if (as_text)
        return PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)len, "surrogateescape");
    return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
}

static PyObject *
headers_tuple(const RawRecord *r)
{
    PyObject *headers = PyTuple_New((Py_ssize_t)r->header_count);
    if (headers == NULL)
        return NULL;
    const uint8_t *p = r->headers;
    for (Py_ssize_t h = 0; h < r->header_count; h++) {
        const uint8_t *k, *v;
        int64_t klen, vlen;
        next_header(&p, &k, &klen, &v, &vlen);
        PyObject *pair = Py_BuildValue("(NN)", field(k, klen, 1), field(v, vlen, 0));
        if (pair == NULL) {
            Py_DECREF(headers);
            return NULL;
        }
        PyTuple_SET_ITEM(headers, h, pair);
    }
    return headers;
}

/* One record as an instance of the tuple subclass `type`: (key, value, timestamp, headers, offset). */
static PyObject *
record_object(PyTypeObject *type, const RawRecord *r, long long timestamp, long long offset)
{
    PyObject *rec = type->tp_alloc(type, 5);
    if (rec == NULL)
        return NULL;
    PyObject *items[5] = {field(r->key, r->key_len, 0), field(r->value, r->value_len, 0),
                          PyLong_FromLongLong(timestamp), headers_tuple(r), PyLong_FromLongLong(offset)};
    for (int i = 0; i < 5; i++) {
        if (items[i] == NULL) {
            for (int j = 0; j < 5; j++)
                Py_XDECREF(items[j]);
            Py_DECREF(rec);
            return NULL;
        }
        PyTuple_SET_ITEM(rec, i, items[i]);
    }
    return rec;
}

/* A record count is checked against the bytes present (a record takes at least
 * 7 bytes) before anything is sized by it. */
static int
check_count(Py_ssize_t count, Py_ssize_t len, Py_ssize_t batch_position)
{
    if (count >= 0 && count <= len / 7)
        return 0;
    corrupt(batch_position, "record count %zd does not fit in %zd bytes of records", count, len);
    return -1;
}

static PyObject *
trailing_bytes(Py_ssize_t batch_position, Py_ssize_t count, const uint8_t *p, const uint8_t *end)
{
    return corrupt(batch_position, "record count %zd disagrees with the batch: %zd bytes follow the last record",
                   count, (Py_ssize_t)(end - p));
}

/* The records ended cleanly, after `found` of them, before the count did: the count is wrong
 * (a record cut short inside its bytes is a truncated record, told by parse_record). */
static PyObject *
missing_records(Py_ssize_t batch_position, Py_ssize_t count, Py_ssize_t found)
{
    return corrupt(batch_position, "record count %zd disagrees with the batch: its records end after %zd", count,
                   found);
}

PyDoc_STRVAR(decode_records_doc,
             "decode_records(records, count, base_offset, base_timestamp, log_append_time, max_timestamp, "
             "record_type, batch_position) -> list\n\n"
             "Decode `count` v2 records from the (decompressed) records section of a batch.\n"
             "In a LogAppendTime batch every record's timestamp is max_timestamp.");

static PyObject *
decode_records(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t count, batch_position;
    long long base_offset, base_timestamp, max_timestamp;
    int log_append_time;
    PyObject *type;
    if (!PyArg_ParseTuple(args, "y*nLLpLO!n", &buf, &count, &base_offset, &base_timestamp, &log_append_time,
                          &max_timestamp, &PyType_Type, &type, &batch_position))
        return NULL;
    PyObject *out = NULL;
    const uint8_t *start = buf.buf, *p = start, *end = start + buf.len;
    if (!PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass");
        goto done;
    }
    if (check_count(count, buf.len, batch_position) < 0 || (out = PyList_New(count)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        RawRecord r;
        if (p == end) {
            Py_CLEAR(out);
            missing_records(batch_position, count, i);
            goto done;
        }
        ParseResult res = parse_record(&p, end, &r);
        PyObject *rec = res.fault ? record_fault(batch_position, i, res, start)
                                  : record_object((PyTypeObject *)type, &r,
                                                  log_append_time ? max_timestamp
                                                                  : wrap_add(base_timestamp, r.ts_delta),
                                                  wrap_add(base_offset, r.off_delta));
        if (rec == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, rec);
    }
    if (p != end) {
        Py_CLEAR(out);
        trailing_bytes(batch_position, count, p, end);
    }
done:
    PyBuffer_Release(&buf);
    return out;
}

/* ------------------------------------------------------------------ encode */

typedef struct {
    PyObject *array; /* bytearray being filled */
    Py_ssize_t len;
} Out;

static uint8_t *
out_reserve(Out *o, Py_ssize_t extra)
{
    Py_ssize_t cap = PyByteArray_GET_SIZE(o->array);
    if (o->len + extra > cap) {
        Py_ssize_t want = cap * 2 > o->len + extra ? cap * 2 : o->len + extra;
        if (PyByteArray_Resize(o->array, want) < 0)
            return NULL;
    }
    return (uint8_t *)PyByteArray_AS_STRING(o->array) + o->len;
}

typedef struct {
    Py_buffer key, value;
    int has_key, has_value;
} KV;

static int
get_optional_buffer(PyObject *obj, Py_buffer *view, int *present, const char *what)
{
    *present = 0;
    if (obj == Py_None)
        return 0;
    if (PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "record %s must be bytes or None, not str", what);
        return -1;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    *present = 1;
    return 0;
}

/* The utf-8 bytes of a header key (str, or bytes as given). New reference. */
static PyObject *
header_key_bytes(PyObject *key)
{
    if (PyUnicode_Check(key))
        return PyUnicode_AsEncodedString(key, "utf-8", "surrogateescape");
    if (PyBytes_Check(key)) {
        Py_INCREF(key);
        return key;
    }
    PyErr_SetString(PyExc_TypeError, "header key must be str");
    return NULL;
}

/* Size of the headers section, or -1 on error. Leaves the encoded keys in keys. */
static Py_ssize_t
headers_size(PyObject *headers, PyObject **seq_out, PyObject **keys_out)
{
    *seq_out = NULL;
    *keys_out = NULL;
    if (headers == Py_None)
        return varint_size(0);
    PyObject *seq = PySequence_Fast(headers, "record headers must be a sequence of (key, value) pairs");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *keys = PyList_New(n);
    if (keys == NULL) {
        Py_DECREF(seq);
        return -1;
    }
    Py_ssize_t size = varint_size(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "a record header must be a (key, value) tuple");
            goto fail;
        }
        PyObject *kb = header_key_bytes(PyTuple_GET_ITEM(pair, 0));
        if (kb == NULL)
            goto fail;
        PyList_SET_ITEM(keys, i, kb);
        Py_ssize_t klen = PyBytes_GET_SIZE(kb);
        size += varint_size(klen) + klen;
        PyObject *v = PyTuple_GET_ITEM(pair, 1);
        if (v == Py_None) {
            size += varint_size(-1);
        } else {
            Py_buffer vb;
            if (PyUnicode_Check(v) || PyObject_GetBuffer(v, &vb, PyBUF_SIMPLE) < 0) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "header value must be bytes or None");
                goto fail;
            }
            size += varint_size(vb.len) + vb.len;
            PyBuffer_Release(&vb);
        }
    }
    *seq_out = seq;
    *keys_out = keys;
    return size;
fail:
    Py_DECREF(seq);
    Py_DECREF(keys);
    return -1;
}

static uint8_t *
write_bytes(uint8_t *p, const void *data, Py_ssize_t len)
{
    p = varint_write(p, len);
    memcpy(p, data, len);
    return p + len;
}

static int
write_headers(uint8_t *p, PyObject *seq, PyObject *keys)
{
    if (seq == NULL) {
        varint_write(p, 0);
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    p = varint_write(p, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kb = PyList_GET_ITEM(keys, i);
        p = write_bytes(p, PyBytes_AS_STRING(kb), PyBytes_GET_SIZE(kb));
        PyObject *v = PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(seq, i), 1);
        if (v == Py_None) {
            p = varint_write(p, -1);
        } else {
            Py_buffer vb;
            if (PyObject_GetBuffer(v, &vb, PyBUF_SIMPLE) < 0)
                return -1;
            p = write_bytes(p, vb.buf, vb.len);
            PyBuffer_Release(&vb);
        }
    }
    return 0;
}

static int
get_timestamp(PyObject *obj, long long fallback, long long *out)
{
    if (obj == Py_None) {
        *out = fallback;
        return 0;
    }
    *out = PyLong_AsLongLong(obj);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Appends one record; returns its timestamp through ts_out. */
static int
encode_one(Out *o, PyObject *rec, Py_ssize_t index, long long base_offset, long long *base_timestamp,
           int *has_base, long long default_ts, int keep_offsets, long long *ts_out, long long *delta_out)
{
    PyObject *fields = PySequence_Fast(rec, "a record must be a Record or a tuple");
    if (fields == NULL)
        return -1;
    int rc = -1;
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(fields);
    if (nf < 2 || (keep_offsets && nf < 5)) {
        PyErr_SetString(PyExc_TypeError, "a record needs (key, value[, timestamp, headers, offset])");
        Py_DECREF(fields);
        return -1;
    }
    PyObject **f = PySequence_Fast_ITEMS(fields);
    KV kv;
    PyObject *hseq = NULL, *hkeys = NULL;
    long long ts, off_delta = index;
    if (get_timestamp(nf > 2 ? f[2] : Py_None, default_ts, &ts) < 0)
        goto out;
    if (!*has_base) { /* the first record's timestamp, whatever its value */
        *base_timestamp = ts;
        *has_base = 1;
    }
    if (keep_offsets) {
        long long off = PyLong_AsLongLong(f[4]);
        if (off == -1 && PyErr_Occurred())
            goto out;
        if (__builtin_sub_overflow(off, base_offset, &off_delta) || off_delta < *delta_out ||
            off_delta > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "record offset %lld does not follow the batch's offsets", off);
            goto out;
        }
    }
    if (get_optional_buffer(f[0], &kv.key, &kv.has_key, "key") < 0)
        goto out;
    if (get_optional_buffer(f[1], &kv.value, &kv.has_value, "value") < 0)
        goto out_key;
    Py_ssize_t hsize = headers_size(nf > 3 ? f[3] : Py_None, &hseq, &hkeys);
    if (hsize < 0)
        goto out_value;
    long long ts_delta = wrap_sub(ts, *base_timestamp); /* wraps, as Java's does */
    Py_ssize_t klen = kv.has_key ? kv.key.len : -1, vlen = kv.has_value ? kv.value.len : -1;
    Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size(off_delta) + varint_size(klen) +
                      (klen > 0 ? klen : 0) + varint_size(vlen) + (vlen > 0 ? vlen : 0) + hsize;
    uint8_t *p = out_reserve(o, body + 5);
    if (p == NULL)
        goto out_headers;
    uint8_t *start = p;
    p = varint_write(p, body);
    *p++ = 0;
    p = varint_write(p, ts_delta);
    p = varint_write(p, off_delta);
    p = kv.has_key ? write_bytes(p, kv.key.buf, klen) : varint_write(p, -1);
    p = kv.has_value ? write_bytes(p, kv.value.buf, vlen) : varint_write(p, -1);
    if (write_headers(p, hseq, hkeys) < 0)
        goto out_headers;
    o->len += (p - start) + hsize;
    *ts_out = ts;
    *delta_out = off_delta;
    rc = 0;
out_headers:
    Py_XDECREF(hseq);
    Py_XDECREF(hkeys);
out_value:
    if (kv.has_value)
        PyBuffer_Release(&kv.value);
out_key:
    if (kv.has_key)
        PyBuffer_Release(&kv.key);
out:
    Py_DECREF(fields);
    return rc;
}

PyDoc_STRVAR(encode_records_doc,
             "encode_records(records, base_offset, base_timestamp, default_timestamp, keep_offsets, "
             "header_room) -> (bytearray, count, base_timestamp, max_timestamp, last_offset_delta)\n\n"
             "Encode records as the records section of a v2 batch, after header_room zero bytes.\n"
             "A record is a sequence (key, value[, timestamp, headers, offset]); a timestamp of\n"
             "None takes default_timestamp, a base_timestamp of None the first record's.\n"
             "With keep_offsets, offset deltas come from each record's offset.");

static PyObject *
encode_records(PyObject *self, PyObject *args)
{
    PyObject *records, *base_ts_obj;
    long long base_offset, default_ts;
    int keep_offsets;
    Py_ssize_t header_room;
    if (!PyArg_ParseTuple(args, "OLOLpn", &records, &base_offset, &base_ts_obj, &default_ts, &keep_offsets,
                          &header_room))
        return NULL;
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    long long base_ts = -1;
    int has_base = base_ts_obj != Py_None;
    if (has_base && get_timestamp(base_ts_obj, 0, &base_ts) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    Out o = {PyByteArray_FromStringAndSize(NULL, header_room + 64 + n * 24), header_room};
    if (o.array == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    memset(PyByteArray_AS_STRING(o.array), 0, header_room);
    long long max_ts = -1, delta = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long ts;
        if (keep_offsets && i > 0)
            delta += 1; /* offsets must strictly increase */
        if (encode_one(&o, PySequence_Fast_GET_ITEM(seq, i), i, base_offset, &base_ts, &has_base, default_ts,
                       keep_offsets, &ts, &delta) < 0) {
            Py_DECREF(seq);
            Py_DECREF(o.array);
            return NULL;
        }
        if (ts > max_ts)
            max_ts = ts;
    }
    Py_DECREF(seq);
    if (PyByteArray_Resize(o.array, o.len) < 0) {
        Py_DECREF(o.array);
        return NULL;
    }
    return Py_BuildValue("NnLLL", o.array, n, base_ts, max_ts, n ? delta : -1LL);
}

/* ------------------------------------------------------------------ check */

PyDoc_STRVAR(check_records_doc,
             "check_records(records, count, batch_position) -> (min_ts_delta, max_ts_delta, "
             "first_bad_offset_delta, first_null_key)\n\n"
             "Walk the records of a batch without building objects, as a broker validates an append:\n"
             "structure errors raise CorruptRecordError; the index of the first record whose offset\n"
             "delta is not its index, and of the first null key, come back (-1 for none).");

static PyObject *
check_records(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t count, batch_position;
    if (!PyArg_ParseTuple(args, "y*nn", &buf, &count, &batch_position))
        return NULL;
    const uint8_t *start = buf.buf, *p = start, *end = start + buf.len;
    PyObject *result = NULL;
    int64_t min_ts = 0, max_ts = 0;
    Py_ssize_t bad_offset = -1, null_key = -1;
    if (check_count(count, buf.len, batch_position) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        RawRecord r;
        if (p == end) {
            missing_records(batch_position, count, i);
            goto done;
        }
        ParseResult res = parse_record(&p, end, &r);
        if (res.fault) {
            record_fault(batch_position, i, res, start);
            goto done;
        }
        if (i == 0 || r.ts_delta < min_ts)
            min_ts = r.ts_delta;
        if (i == 0 || r.ts_delta > max_ts)
            max_ts = r.ts_delta;
        if (bad_offset < 0 && r.off_delta != i)
            bad_offset = i;
        if (null_key < 0 && r.key_len < 0)
            null_key = i;
    }
    if (p != end) {
        trailing_bytes(batch_position, count, p, end);
        goto done;
    }
    result = Py_BuildValue("LLnn", (long long)min_ts, (long long)max_ts, bad_offset, null_key);
done:
    PyBuffer_Release(&buf);
    return result;
}

/* ------------------------------------------------------------- from columns */

/* The headers of the rows (Spark's array<struct<key: string, value: binary>> column, flattened):
 * how many each row has, then every row's header keys and values one after another. */
typedef struct {
    Py_buffer counts;
    ArrowBinary keys, values;
    int present;
    Py_ssize_t total, next; /* headers in all; the first of the row being encoded */
} ColumnHeaders;

static void
column_headers_release(ColumnHeaders *h)
{
    if (h->present) {
        PyBuffer_Release(&h->counts);
        arrow_release(&h->keys);
        arrow_release(&h->values);
    }
    h->present = 0;
}

static int
column_headers_open(PyObject *spec, ColumnHeaders *h, Py_ssize_t rows)
{
    PyObject *counts, *keys, *values;
    memset(h, 0, sizeof(*h));
    if (spec == Py_None)
        return 0;
    if (!PyArg_ParseTuple(spec, "OnOO", &counts, &h->total, &keys, &values))
        return -1;
    if (PyObject_GetBuffer(counts, &h->counts, PyBUF_SIMPLE) < 0)
        return -1;
    if (h->total < 0 || h->counts.len < rows * 4 || arrow_binary(keys, &h->keys, h->total) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "header counts are shorter than the rows they hold");
        PyBuffer_Release(&h->counts);
        return -1;
    }
    if (arrow_binary(values, &h->values, h->total) < 0) {
        PyBuffer_Release(&h->counts);
        arrow_release(&h->keys);
        return -1;
    }
    h->present = 1;
    return 0;
}

/* How many headers row i has (advancing past them), or -1 with ValueError when the counts
 * run past the headers given or a header has no key (Kafka's header key is a string). */
static Py_ssize_t
column_headers_of_row(ColumnHeaders *h, Py_ssize_t i)
{
    if (!h->present)
        return 0;
    int32_t n = ((const int32_t *)h->counts.buf)[i];
    if (n < 0 || n > h->total - h->next) {
        PyErr_Format(PyExc_ValueError, "row %zd: header count %d runs past the %zd headers given", i, (int)n,
                     h->total);
        return -1;
    }
    for (Py_ssize_t j = h->next; j < h->next + n; j++) {
        const uint8_t *unused;
        if (arrow_value(&h->keys, j, &unused) < 0) {
            PyErr_Format(PyExc_ValueError, "row %zd: a header has no key (a header key is a string)", i);
            return -1;
        }
    }
    h->next += n;
    return n;
}

static Py_ssize_t
column_headers_size(const ColumnHeaders *h, Py_ssize_t first, Py_ssize_t n)
{
    Py_ssize_t size = varint_size(n);
    for (Py_ssize_t j = first; j < first + n; j++) {
        const uint8_t *b;
        int64_t klen = arrow_value(&h->keys, j, &b), vlen = arrow_value(&h->values, j, &b);
        size += varint_size(klen) + klen + varint_size(vlen) + (vlen > 0 ? vlen : 0);
    }
    return size;
}

static uint8_t *
column_headers_write(const ColumnHeaders *h, Py_ssize_t first, Py_ssize_t n, uint8_t *p)
{
    p = varint_write(p, n);
    for (Py_ssize_t j = first; j < first + n; j++) {
        const uint8_t *k, *v = NULL;
        int64_t klen = arrow_value(&h->keys, j, &k), vlen = arrow_value(&h->values, j, &v);
        p = write_bytes(p, k, klen);
        p = vlen >= 0 ? write_bytes(p, v, vlen) : varint_write(p, -1);
    }
    return p;
}

static PyObject *
close_chunk(Out *o, Py_ssize_t count, long long base_ts, long long max_ts)
{
    if (PyByteArray_Resize(o->array, o->len) < 0)
        return NULL;
    return Py_BuildValue("(OnLLn)", o->array, count, base_ts, max_ts, count - 1);
}

PyDoc_STRVAR(encode_columns_doc,
             "encode_columns(rows, key, value, timestamps, default_timestamp, max_bytes, header_room)\n"
             "    -> [(bytearray, count, base_timestamp, max_timestamp, last_offset_delta), ...]\n\n"
             "Encode rows of Arrow columns as records sections of v2 batches of about max_bytes each,\n"
             "each after header_room zero bytes. key and value are None or (validity | None, int32\n"
             "offsets, data, array offset); timestamps is None or (validity | None, int64 ms values,\n"
             "array offset), a null timestamp taking default_timestamp. headers is None (none) or\n"
             "(int32 counts, one a row; header keys; header values), the keys and values as key and\n"
             "value are, the headers of every row one after another (a header key may not be null).");

static PyObject *
encode_columns(PyObject *self, PyObject *args)
{
    Py_ssize_t rows, max_bytes, header_room;
    PyObject *key_spec, *value_spec, *ts_spec, *headers_spec = Py_None;
    long long default_ts;
    if (!PyArg_ParseTuple(args, "nOOOLnn|O", &rows, &key_spec, &value_spec, &ts_spec, &default_ts, &max_bytes,
                          &header_room, &headers_spec))
        return NULL;
    ArrowBinary key, value;
    ColumnHeaders headers;
    Py_buffer ts_valid = {0}, ts_values = {0};
    int has_ts = 0, has_ts_valid = 0;
    Py_ssize_t ts_base = 0;
    PyObject *chunks = NULL;
    Out o = {NULL, 0};
    if (arrow_binary(key_spec, &key, rows) < 0)
        return NULL;
    if (arrow_binary(value_spec, &value, rows) < 0) {
        arrow_release(&key);
        return NULL;
    }
    if (column_headers_open(headers_spec, &headers, rows) < 0) {
        arrow_release(&key);
        arrow_release(&value);
        return NULL;
    }
    if (ts_spec != Py_None) {
        PyObject *tv, *tvals;
        if (!PyArg_ParseTuple(ts_spec, "OOn", &tv, &tvals, &ts_base) ||
            PyObject_GetBuffer(tvals, &ts_values, PyBUF_SIMPLE) < 0)
            goto done;
        has_ts = 1;
        if (tv != Py_None) {
            if (PyObject_GetBuffer(tv, &ts_valid, PyBUF_SIMPLE) < 0)
                goto done;
            has_ts_valid = 1;
        }
        if (ts_base < 0 || ts_values.len < (ts_base + rows) * 8 || (has_ts_valid && ts_valid.len * 8 < ts_base + rows)) {
            PyErr_SetString(PyExc_ValueError, "timestamp buffers are shorter than the rows they hold");
            goto done;
        }
    }
    if ((chunks = PyList_New(0)) == NULL)
        goto done;
    Py_ssize_t count = 0;
    long long base_ts = 0, max_ts = -1;
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (o.array == NULL) {
            o.array = PyByteArray_FromStringAndSize(NULL, header_room + max_bytes + 64);
            if (o.array == NULL)
                goto fail;
            memset(PyByteArray_AS_STRING(o.array), 0, header_room);
            o.len = header_room;
            count = 0;
            max_ts = -1;
        }
        long long ts = default_ts;
        if (has_ts) {
            Py_ssize_t at = ts_base + i;
            if (!has_ts_valid || (((const uint8_t *)ts_valid.buf)[at / 8] & (1u << (at % 8))))
                ts = ((const int64_t *)ts_values.buf)[at] / 1000; /* Spark's microseconds */
        }
        if (count == 0)
            base_ts = ts;
        const uint8_t *k = NULL, *v = NULL;
        int64_t klen = arrow_value(&key, i, &k), vlen = arrow_value(&value, i, &v);
        int64_t ts_delta = wrap_sub(ts, base_ts); /* wraps, as Java's does */
        Py_ssize_t first = headers.next, nh = column_headers_of_row(&headers, i);
        if (nh < 0)
            goto fail;
        Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size(count) + varint_size(klen) + (klen > 0 ? klen : 0) +
                          varint_size(vlen) + (vlen > 0 ? vlen : 0) + column_headers_size(&headers, first, nh);
        uint8_t *p = out_reserve(&o, body + 5);
        if (p == NULL)
            goto fail;
        uint8_t *start = p;
        p = varint_write(p, body);
        *p++ = 0;
        p = varint_write(p, ts_delta);
        p = varint_write(p, count);
        p = klen >= 0 ? write_bytes(p, k, klen) : varint_write(p, -1);
        p = vlen >= 0 ? write_bytes(p, v, vlen) : varint_write(p, -1);
        p = column_headers_write(&headers, first, nh, p);
        o.len += p - start;
        count++;
        if (ts > max_ts)
            max_ts = ts;
        if (o.len - header_room >= max_bytes || i == rows - 1) {
            PyObject *chunk = close_chunk(&o, count, base_ts, max_ts);
            if (chunk == NULL || PyList_Append(chunks, chunk) < 0) {
                Py_XDECREF(chunk);
                goto fail;
            }
            Py_DECREF(chunk);
            Py_CLEAR(o.array);
        }
    }
    goto done;
fail:
    Py_CLEAR(chunks);
    Py_CLEAR(o.array);
done:
    arrow_release(&key);
    arrow_release(&value);
    column_headers_release(&headers);
    if (has_ts)
        PyBuffer_Release(&ts_values);
    if (has_ts_valid)
        PyBuffer_Release(&ts_valid);
    return chunks;
}

/* ------------------------------------------------------------------ crc */

PyDoc_STRVAR(crc32c_doc, "crc32c(data, hardware=True) -> int\n\n"
                         "CRC32C of data, the checksum of a v2 batch (the CPU's instruction where it has one;\n"
                         "hardware=False: the portable tables, as a machine without SSE 4.2 computes it).");

static PyObject *
crc32c(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"data", "hardware", NULL};
    Py_buffer buf;
    int hardware = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p:crc32c", names, &buf, &hardware))
        return NULL;
    uint32_t value;
    if (hardware)
        value = crc32c_of(buf.buf, (size_t)buf.len);
    else
        value = ~crc_soft(~0u, buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(value);
}

PyDoc_STRVAR(lz4_frame_doc, "lz4_frame(data) -> bytes\n\n"
                             "data compressed into an lz4 frame as Kafka's Java client writes it (_lz4.h).");

static PyObject *
lz4_frame(PyObject *self, PyObject *arg)
{
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)lz4_frame_bound((size_t)buf.len));
    if (out != NULL) {
        size_t size = lz4_frame_compress(buf.buf, (size_t)buf.len, (uint8_t *)PyBytes_AS_STRING(out));
        _PyBytes_Resize(&out, (Py_ssize_t)size);
    }
    PyBuffer_Release(&buf);
    return out;
}

static PyMethodDef methods[] = {
    {"lz4_frame", lz4_frame, METH_O, lz4_frame_doc},
    {"decode_records", decode_records, METH_VARARGS, decode_records_doc},
    {"encode_records", encode_records, METH_VARARGS, encode_records_doc},
    {"check_records", check_records, METH_VARARGS, check_records_doc},
    {"encode_columns", encode_columns, METH_VARARGS, encode_columns_doc},
    {"crc32c", (PyCFunction)(void (*)(void))crc32c, METH_VARARGS | METH_KEYWORDS, crc32c_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "seglog.records._codec", "The per-record loops of the v2 record format.", -1, methods,
};

PyMODINIT_FUNC
PyInit__codec(void)
{
    PyObject *errors = PyImport_ImportModule("seglog.errors");
    if (errors == NULL)
        return NULL;
    CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (CorruptRecordError == NULL)
        return NULL;
    if (lz4_init() < 0)
        return NULL;
    int hardware = crc32c_init();
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "HARDWARE_CRC", hardware) < 0)
        Py_CLEAR(m);
    return m;
}
