/* Kafka's default partitioner in C, beside seglog/partitioner.py (its Python
 * form, and the referee of tests/test_partitioner.py): the partition of every
 * key of an Arrow column in one call, for the Spark sink, which partitions whole
 * Arrow batches without a Python object per row. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "records/_arrow_binary.h"

/* Kafka's murmur2 (Utils.murmur2): seed 0x9747b28c, m 0x5bd1e995, r 24. */
static uint32_t
murmur2(const uint8_t *data, int64_t len)
{
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28c ^ (uint32_t)len;
    int64_t whole = len & ~3;
    for (int64_t i = 0; i < whole; i += 4) {
        uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 | (uint32_t)data[i + 2] << 16 |
                     (uint32_t)data[i + 3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (len & 3) {
    case 3:
        h ^= (uint32_t)data[whole + 2] << 16; /* fall through */
    case 2:
        h ^= (uint32_t)data[whole + 1] << 8; /* fall through */
    case 1:
        h ^= data[whole];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

PyDoc_STRVAR(partitions_for_keys_doc,
             "partitions_for_keys(rows, key, partitions) -> bytearray of int32\n\n"
             "Kafka's default partition of each row's key (murmur2, positive, modulo partitions),\n"
             "-1 for a null key. key is (validity | None, int32 offsets, data, array offset).");

static PyObject *
partitions_for_keys(PyObject *self, PyObject *args)
{
    Py_ssize_t rows, partitions;
    PyObject *key_spec;
    if (!PyArg_ParseTuple(args, "nOn", &rows, &key_spec, &partitions))
        return NULL;
    if (partitions < 1) {
        PyErr_SetString(PyExc_ValueError, "a topic has at least one partition");
        return NULL;
    }
    ArrowBinary key;
    if (arrow_binary(key_spec, &key, rows) < 0)
        return NULL;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, rows * 4);
    if (out != NULL) {
        int32_t *dst = (int32_t *)PyByteArray_AS_STRING(out);
        for (Py_ssize_t i = 0; i < rows; i++) {
            const uint8_t *k = NULL;
            int64_t klen = arrow_value(&key, i, &k);
            dst[i] = klen < 0 ? -1 : (int32_t)((murmur2(k, klen) & 0x7fffffff) % (uint32_t)partitions);
        }
    }
    arrow_release(&key);
    return out;
}

static PyMethodDef methods[] = {
    {"partitions_for_keys", partitions_for_keys, METH_VARARGS, partitions_for_keys_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "seglog._partitioner", "Kafka's default partitioner over Arrow key columns.", -1, methods,
};

PyMODINIT_FUNC
PyInit__partitioner(void)
{
    return PyModule_Create(&module);
}
