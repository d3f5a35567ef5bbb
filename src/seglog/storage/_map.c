/* A memory map of a file that holds no file descriptor: mmap(2) as Python's mmap
 * module calls it, less the dup.
 *
 * Why: Python's mmap.mmap (before 3.13's trackfd=False) keeps a dup of the fd it
 * maps for as long as the map lives, for its size() and resize(). A broker maps two
 * index files of every partition's active segment (offset and time), so 10,000
 * partitions held 20,000 fds for their maps beside the 10,000 of their logs: past
 * a hard limit of 20,000 open files. The kernel needs no fd once a file is mapped
 * (the mapping holds its own reference to the file), and storage/index.py never
 * asks a map its file's size nor resizes one (it maps the file anew): so this map
 * keeps none.
 *
 * A Map is a buffer (struct.pack_into, unpack_from, _scan's searches and appends
 * take it as they took an mmap.mmap), sliced as bytes (m[a:b]), stored into by
 * slice (m[a:b] = buffer of that length), flushed (msync), advised (madvise) and
 * closed; unmapped when closed or when its last holder lets go (a memoryview of it
 * holds it). fd -1 maps anonymous memory (an index rebuilt in memory).
 *
 * Files are mapped through storage/fileio.py (FileHandle.mmap), so that the faults
 * layer sees every map of a file; index.py maps anonymous memory itself. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>

typedef struct {
    PyObject_HEAD
    char *data; /* NULL once closed */
    Py_ssize_t size;
    int writable;
    Py_ssize_t exports; /* buffers handed out and not yet released: no unmap under them */
} Map;

static PyTypeObject MapType;

static int
check_open(Map *self)
{
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "map closed");
        return -1;
    }
    return 0;
}

static PyObject *
map_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"fd", "length", "writable", NULL};
    int fd, writable;
    Py_ssize_t length;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "inp", keywords, &fd, &length, &writable))
        return NULL;
    if (length <= 0) {
        PyErr_Format(PyExc_ValueError, "map length %zd: must be positive", length);
        return NULL;
    }
    if (fd >= 0) {
        /* as Python's mmap: a regular file shorter than the map would SIGBUS past its end */
        struct stat status;
        if (fstat(fd, &status) < 0)
            return PyErr_SetFromErrno(PyExc_OSError);
        if (S_ISREG(status.st_mode) && status.st_size < length) {
            PyErr_SetString(PyExc_ValueError, "mmap length is greater than file size");
            return NULL;
        }
    }
    int protection = writable ? PROT_READ | PROT_WRITE : PROT_READ;
    int flags = fd >= 0 ? MAP_SHARED : MAP_SHARED | MAP_ANONYMOUS;
    void *data;
    Py_BEGIN_ALLOW_THREADS
    data = mmap(NULL, (size_t)length, protection, flags, fd, 0);
    Py_END_ALLOW_THREADS
    if (data == MAP_FAILED)
        return PyErr_SetFromErrno(PyExc_OSError);
    Map *self = (Map *)type->tp_alloc(type, 0);
    if (self == NULL) {
        munmap(data, (size_t)length);
        return NULL;
    }
    self->data = data;
    self->size = length;
    self->writable = writable;
    self->exports = 0;
    return (PyObject *)self;
}

static void
unmap(Map *self)
{
    if (self->data != NULL) {
        munmap(self->data, (size_t)self->size);
        self->data = NULL;
    }
}

static void
map_dealloc(Map *self)
{
    unmap(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
map_close(Map *self, PyObject *Py_UNUSED(ignored))
{
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "cannot close a map while buffers of it are held");
        return NULL;
    }
    unmap(self);
    Py_RETURN_NONE;
}

static PyObject *
map_exit(Map *self, PyObject *Py_UNUSED(args))
{
    return map_close(self, NULL);
}

static PyObject *
map_enter(Map *self, PyObject *Py_UNUSED(ignored))
{
    if (check_open(self) < 0)
        return NULL;
    return Py_NewRef(self);
}

static PyObject *
map_flush(Map *self, PyObject *Py_UNUSED(ignored))
{
    if (check_open(self) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = msync(self->data, (size_t)self->size, MS_SYNC);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *
map_madvise(Map *self, PyObject *arg)
{
    long advice = PyLong_AsLong(arg);
    if (advice == -1 && PyErr_Occurred())
        return NULL;
    if (check_open(self) < 0)
        return NULL;
    if (madvise(self->data, (size_t)self->size, (int)advice) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static Py_ssize_t
map_length(Map *self)
{
    return self->data == NULL ? 0 : self->size;
}

static PyObject *
map_subscript(Map *self, PyObject *item)
{
    if (check_open(self) < 0)
        return NULL;
    if (PyIndex_Check(item)) {
        Py_ssize_t i = PyNumber_AsSsize_t(item, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred())
            return NULL;
        if (i < 0)
            i += self->size;
        if (i < 0 || i >= self->size) {
            PyErr_SetString(PyExc_IndexError, "map index out of range");
            return NULL;
        }
        return PyLong_FromLong((unsigned char)self->data[i]);
    }
    if (!PySlice_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "map indices must be integers or slices");
        return NULL;
    }
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(item, &start, &stop, &step) < 0)
        return NULL;
    Py_ssize_t n = PySlice_AdjustIndices(self->size, &start, &stop, step);
    if (step == 1)
        return PyBytes_FromStringAndSize(self->data + start, n);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL)
        return NULL;
    char *to = PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0, at = start; k < n; k++, at += step)
        to[k] = self->data[at];
    return out;
}

static int
map_ass_subscript(Map *self, PyObject *item, PyObject *value)
{
    if (check_open(self) < 0)
        return -1;
    if (!self->writable) {
        PyErr_SetString(PyExc_TypeError, "map is read-only");
        return -1;
    }
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "a map's bytes cannot be deleted");
        return -1;
    }
    if (!PySlice_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "a map is stored into by slice (m[a:b] = bytes)");
        return -1;
    }
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(item, &start, &stop, &step) < 0)
        return -1;
    Py_ssize_t n = PySlice_AdjustIndices(self->size, &start, &stop, step);
    if (step != 1) {
        PyErr_SetString(PyExc_ValueError, "a map is stored into by a slice of step 1");
        return -1;
    }
    Py_buffer from;
    if (PyObject_GetBuffer(value, &from, PyBUF_SIMPLE) < 0)
        return -1;
    int rc = 0;
    if (from.len != n) {
        PyErr_Format(PyExc_IndexError, "%zd bytes stored into a slice of %zd", from.len, n);
        rc = -1;
    } else {
        memmove(self->data + start, from.buf, (size_t)n);
    }
    PyBuffer_Release(&from);
    return rc;
}

static int
map_getbuffer(Map *self, Py_buffer *view, int flags)
{
    if (check_open(self) < 0)
        return -1;
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, !self->writable, flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void
map_releasebuffer(Map *self, Py_buffer *Py_UNUSED(view))
{
    self->exports--;
}

static PyMethodDef map_methods[] = {
    {"close", (PyCFunction)map_close, METH_NOARGS, "Unmap (refused while buffers of it are held)."},
    {"flush", (PyCFunction)map_flush, METH_NOARGS, "Write the map's dirty pages to its file (msync MS_SYNC)."},
    {"madvise", (PyCFunction)map_madvise, METH_O, "madvise(2) of the whole map, as mmap.MADV_*."},
    {"__enter__", (PyCFunction)map_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)map_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods map_as_mapping = {
    (lenfunc)map_length,
    (binaryfunc)map_subscript,
    (objobjargproc)map_ass_subscript,
};

static PySequenceMethods map_as_sequence = {
    .sq_length = (lenfunc)map_length,
};

static PyBufferProcs map_as_buffer = {
    (getbufferproc)map_getbuffer,
    (releasebufferproc)map_releasebuffer,
};

static PyTypeObject MapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "seglog.storage._map.Map",
    .tp_basicsize = sizeof(Map),
    .tp_dealloc = (destructor)map_dealloc,
    .tp_as_sequence = &map_as_sequence,
    .tp_as_mapping = &map_as_mapping,
    .tp_as_buffer = &map_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Map(fd, length, writable): a memory map of fd's first length bytes, holding no fd.",
    .tp_methods = map_methods,
    .tp_new = map_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "seglog.storage._map", "Memory maps of files that hold no file descriptor.", -1, NULL,
};

PyMODINIT_FUNC
PyInit__map(void)
{
    if (PyType_Ready(&MapType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Map", (PyObject *)&MapType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
