/* An Arrow binary column read in place, for the C that takes columns from pyarrow
 * without a Python object per row: records/_codec.c's encode_columns (the Spark
 * sink's batches) and seglog/_partitioner.c (the partition of each key). Every
 * offset is checked against the buffers before a value is read. */
#ifndef SEGLOG_ARROW_BINARY_H
#define SEGLOG_ARROW_BINARY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* An Arrow binary column as the buffers pyarrow exposes: validity bitmap (or
 * None), int32 offsets, data, and the array's offset into them. */
typedef struct {
    Py_buffer valid, offsets, data;
    int has_valid, present;
    Py_ssize_t base;
} ArrowBinary;

static void
arrow_release(ArrowBinary *c)
{
    if (c->has_valid)
        PyBuffer_Release(&c->valid);
    if (c->present) {
        PyBuffer_Release(&c->offsets);
        PyBuffer_Release(&c->data);
    }
    c->has_valid = c->present = 0;
}

/* Accepts None (a column that is absent: every value null) or
 * (validity | None, offsets, data, array offset). */
static int
arrow_binary(PyObject *spec, ArrowBinary *c, Py_ssize_t rows)
{
    PyObject *valid, *offsets, *data;
    memset(c, 0, sizeof(*c));
    if (spec == Py_None)
        return 0;
    if (!PyArg_ParseTuple(spec, "OOOn", &valid, &offsets, &data, &c->base))
        return -1;
    if (PyObject_GetBuffer(offsets, &c->offsets, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(data, &c->data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&c->offsets);
        return -1;
    }
    c->present = 1;
    if (valid != Py_None) {
        if (PyObject_GetBuffer(valid, &c->valid, PyBUF_SIMPLE) < 0) {
            arrow_release(c);
            return -1;
        }
        c->has_valid = 1;
    }
    /* every offset and validity bit the rows need must be there, and the offsets inside the data */
    Py_ssize_t need = (c->base + rows + 1) * 4;
    if (c->base < 0 || c->offsets.len < need || (c->has_valid && c->valid.len * 8 < c->base + rows)) {
        arrow_release(c);
        PyErr_SetString(PyExc_ValueError, "Arrow column buffers are shorter than the rows they hold");
        return -1;
    }
    const int32_t *o = (const int32_t *)c->offsets.buf + c->base;
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (o[i] < 0 || o[i + 1] < o[i] || o[i + 1] > c->data.len) {
            arrow_release(c);
            PyErr_SetString(PyExc_ValueError, "Arrow column offsets point outside its data");
            return -1;
        }
    }
    return 0;
}

/* Value i of a column: its bytes, or length -1 for null. */
static inline int64_t
arrow_value(const ArrowBinary *c, Py_ssize_t i, const uint8_t **out)
{
    if (!c->present)
        return -1;
    Py_ssize_t at = c->base + i;
    if (c->has_valid && !(((const uint8_t *)c->valid.buf)[at / 8] & (1u << (at % 8))))
        return -1;
    const int32_t *o = (const int32_t *)c->offsets.buf;
    *out = (const uint8_t *)c->data.buf + o[at];
    return o[at + 1] - o[at];
}

#endif
