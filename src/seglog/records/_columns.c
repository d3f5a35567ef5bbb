/* Records straight into columns: the buffers of Arrow arrays, with no Python
 * object per record. The Spark source wraps them with pyarrow; this file
 * knows nothing of pyarrow, only Arrow's memory layout:
 *
 *   fixed-width column  values, little-endian, one per row
 *   binary / string     validity bitmap (bit i set = row i not null; omitted
 *                       when nothing is null), int32 offsets (rows + 1), data
 *   list<struct<key: string, value: binary>>
 *                       int32 list offsets (rows + 1) into a struct column of
 *                       headers, whose children are a string and a binary
 *
 * Columns: offset int64, timestamp int64 in microseconds (Spark's
 * TimestampType), timestampType int32, key, value, headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_record.h"

PyObject *seglog_corrupt(Py_ssize_t batch_position, const char *fmt, ...); /* _codec.c */

typedef struct {
    uint8_t *data;
    Py_ssize_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra)
        cap *= 2;
    uint8_t *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(data + b->cap, 0, cap - b->cap); /* validity bits start cleared */
    b->data = data;
    b->cap = cap;
    return 0;
}

static int
buf_put(Buf *b, const void *src, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static void
buf_free(Buf *b)
{
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* A variable-width Arrow column: bitmap, int32 offsets, data. */
typedef struct {
    Buf valid, offsets, data;
    Py_ssize_t count, nulls;
} VarColumn;

static int
var_init(VarColumn *c)
{
    int32_t zero = 0;
    c->count = c->nulls = 0;
    c->valid.len = c->offsets.len = c->data.len = 0;
    if (c->valid.cap)
        memset(c->valid.data, 0, c->valid.cap);
    return buf_put(&c->offsets, &zero, 4);
}

static int
var_put(VarColumn *c, const uint8_t *data, int64_t len)
{
    Py_ssize_t need = c->count / 8 + 1;
    if (need > c->valid.len) {
        if (buf_reserve(&c->valid, need - c->valid.len) < 0)
            return -1;
        c->valid.len = need;
    }
    if (len >= 0) {
        if (c->data.len + len > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "column data past 2 GiB: finish() the columns sooner");
            return -1;
        }
        if (buf_put(&c->data, data, len) < 0)
            return -1;
        c->valid.data[c->count / 8] |= (uint8_t)(1u << (c->count % 8));
    } else {
        c->nulls++;
    }
    c->count++;
    int32_t end = (int32_t)c->data.len;
    return buf_put(&c->offsets, &end, 4);
}

static void
var_free(VarColumn *c)
{
    buf_free(&c->valid);
    buf_free(&c->offsets);
    buf_free(&c->data);
}

typedef struct {
    PyObject_HEAD
    int with_headers;
    Py_ssize_t rows;
    Buf offsets, timestamps, timestamp_types, header_offsets;
    VarColumn key, value, header_key, header_value;
} ColumnBuilder;

static int
builder_reset(ColumnBuilder *self)
{
    int32_t zero = 0;
    self->rows = 0;
    self->offsets.len = self->timestamps.len = self->timestamp_types.len = self->header_offsets.len = 0;
    if (var_init(&self->key) < 0 || var_init(&self->value) < 0 || var_init(&self->header_key) < 0 ||
        var_init(&self->header_value) < 0)
        return -1;
    return buf_put(&self->header_offsets, &zero, 4);
}

static int
builder_init(ColumnBuilder *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"with_headers", NULL};
    int with_headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p", names, &with_headers))
        return -1;
    self->with_headers = with_headers;
    return builder_reset(self);
}

static void
builder_dealloc(ColumnBuilder *self)
{
    buf_free(&self->offsets);
    buf_free(&self->timestamps);
    buf_free(&self->timestamp_types);
    buf_free(&self->header_offsets);
    var_free(&self->key);
    var_free(&self->value);
    var_free(&self->header_key);
    var_free(&self->header_value);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
append_row(ColumnBuilder *self, const RawRecord *r, int64_t offset, int64_t timestamp, int32_t ts_type)
{
    int64_t micros = timestamp * 1000;
    if (buf_put(&self->offsets, &offset, 8) < 0 || buf_put(&self->timestamps, &micros, 8) < 0 ||
        buf_put(&self->timestamp_types, &ts_type, 4) < 0 || var_put(&self->key, r->key, r->key_len) < 0 ||
        var_put(&self->value, r->value, r->value_len) < 0)
        return -1;
    if (self->with_headers) {
        const uint8_t *p = r->headers;
        for (int64_t h = 0; h < r->header_count; h++) {
            const uint8_t *k, *v;
            int64_t klen, vlen;
            next_header(&p, &k, &klen, &v, &vlen);
            if (var_put(&self->header_key, k, klen) < 0 || var_put(&self->header_value, v, vlen) < 0)
                return -1;
        }
        int32_t end = (int32_t)self->header_key.count;
        if (buf_put(&self->header_offsets, &end, 4) < 0)
            return -1;
    }
    self->rows++;
    return 0;
}

PyDoc_STRVAR(append_doc,
             "append(records, count, base_offset, base_timestamp, log_append_time, max_timestamp,\n"
             "       timestamp_type, batch_position, min_offset, end_offset) -> rows appended\n\n"
             "Decode the records section of one v2 batch into the columns, keeping the rows whose\n"
             "offset lies in [min_offset, end_offset). Corrupt records raise CorruptRecordError.");

static PyObject *
builder_append(ColumnBuilder *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t count, batch_position;
    long long base_offset, base_timestamp, max_timestamp, min_offset, end_offset;
    int log_append_time, ts_type;
    if (!PyArg_ParseTuple(args, "y*nLLpLinLL", &buf, &count, &base_offset, &base_timestamp, &log_append_time,
                          &max_timestamp, &ts_type, &batch_position, &min_offset, &end_offset))
        return NULL;
    const uint8_t *start = buf.buf, *p = start, *end = start + buf.len;
    Py_ssize_t before = self->rows;
    PyObject *result = NULL;
    if (count < 0 || count > buf.len / 7) {
        seglog_corrupt(batch_position, "record count %zd does not fit in %zd bytes of records", count, buf.len);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        RawRecord r;
        ParseResult res = parse_record(&p, end, &r);
        if (res.fault) {
            seglog_corrupt(batch_position, "record %zd: %s at byte %zd of the records", i, res.fault,
                           (Py_ssize_t)(res.at - start));
            goto done;
        }
        int64_t offset = base_offset + r.off_delta;
        if (offset < min_offset || offset >= end_offset)
            continue;
        int64_t ts = log_append_time ? max_timestamp : base_timestamp + r.ts_delta;
        if (append_row(self, &r, offset, ts, (int32_t)ts_type) < 0)
            goto done;
    }
    if (p != end) {
        seglog_corrupt(batch_position, "record count %zd disagrees with the batch: %zd bytes follow the last record",
                       count, (Py_ssize_t)(end - p));
        goto done;
    }
    result = PyLong_FromSsize_t(self->rows - before);
done:
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *
bytes_of(Buf *b)
{
    return PyBytes_FromStringAndSize((const char *)b->data, b->len);
}

/* (validity or None, offsets, data, null count) */
static PyObject *
var_tuple(VarColumn *c)
{
    PyObject *valid = c->nulls ? PyBytes_FromStringAndSize((const char *)c->valid.data, c->valid.len) : Py_NewRef(Py_None);
    return Py_BuildValue("(NNNn)", valid, bytes_of(&c->offsets), bytes_of(&c->data), c->nulls);
}

PyDoc_STRVAR(finish_doc,
             "finish() -> dict\n\n"
             "The columns built so far, as Arrow buffers (bytes), and a reset builder:\n"
             "rows, offset, timestamp, timestampType, key and value as (validity|None, offsets, data,\n"
             "nulls), and with headers: headers as (list offsets, key column, value column).");

static PyObject *
builder_finish(ColumnBuilder *self, PyObject *unused)
{
    PyObject *out = Py_BuildValue("{s:n,s:N,s:N,s:N,s:N,s:N}", "rows", self->rows, "offset", bytes_of(&self->offsets),
                                  "timestamp", bytes_of(&self->timestamps), "timestampType",
                                  bytes_of(&self->timestamp_types), "key", var_tuple(&self->key), "value",
                                  var_tuple(&self->value));
    if (out != NULL && self->with_headers) {
        PyObject *headers = Py_BuildValue("(NNN)", bytes_of(&self->header_offsets), var_tuple(&self->header_key),
                                          var_tuple(&self->header_value));
        if (headers == NULL || PyDict_SetItemString(out, "headers", headers) < 0)
            Py_CLEAR(out);
        Py_XDECREF(headers);
    }
    if (out != NULL && builder_reset(self) < 0)
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

static PyMethodDef builder_methods[] = {
    {"append", (PyCFunction)builder_append, METH_VARARGS, append_doc},
    {"finish", (PyCFunction)builder_finish, METH_NOARGS, finish_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef builder_getset[] = {
    {"rows", (getter)builder_rows, NULL, "rows appended since the last finish()", NULL},
    {"data_bytes", (getter)builder_data_bytes, NULL, "bytes of keys, values and headers held", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ColumnBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "seglog.records._codec.ColumnBuilder",
    .tp_basicsize = sizeof(ColumnBuilder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ColumnBuilder(with_headers=False): v2 records into Arrow column buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)builder_init,
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_methods = builder_methods,
    .tp_getset = builder_getset,
};

int
seglog_columns_init(PyObject *module)
{
    if (PyType_Ready(&ColumnBuilderType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "ColumnBuilder", (PyObject *)&ColumnBuilderType);
}
