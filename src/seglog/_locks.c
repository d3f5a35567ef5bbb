/* A reentrant lock whose acquire and release parse no arguments, beside
 * seglog/locks.py (which says where it is used and why).
 *
 * threading.RLock's acquire and release are METH_VARARGS | METH_KEYWORDS: every
 * call goes through PyArg_ParseTupleAndKeywords, even with no arguments, and a
 * partition log's append and a broker partition's take the lock once each per
 * produce. Here acquire is METH_FASTCALL (one optional positional `blocking`) and
 * release METH_NOARGS.
 *
 * The owner and the count are read and written only with the GIL held, so they
 * need no atomics; the underlying PyThread lock is taken without releasing the
 * GIL when it is free, and waited on with the GIL released (signal handlers run
 * between waits, as threading.RLock's do) when it is not. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    unsigned long owner; /* the holding thread's ident; meaningful while count > 0 */
    unsigned long count; /* the holder's nesting depth; 0: free */
} RLockObject;

static PyObject *
rlock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "RLock() takes no arguments");
        return NULL;
    }
    RLockObject *self = (RLockObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock");
        return NULL;
    }
    return (PyObject *)self;
}

static void
rlock_dealloc(RLockObject *self)
{
    if (self->lock != NULL) {
        if (self->count > 0) /* (a lock freed while held: released first, as _thread's locks are) */
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Wait for the underlying lock with the GIL released; -1 with an exception set
 * when a signal handler raised while waiting (the lock not taken). */
static int
wait_for(PyThread_type_lock lock)
{
    PyLockStatus status;
    do {
        Py_BEGIN_ALLOW_THREADS
        status = PyThread_acquire_lock_timed(lock, -1, 1);
        Py_END_ALLOW_THREADS
        if (status == PY_LOCK_INTR && Py_MakePendingCalls() < 0)
            return -1;
    } while (status != PY_LOCK_ACQUIRED);
    return 0;
}

/* 1: taken (or taken again by its holder), 0: held by another thread and not
 * `blocking`, -1: an exception. */
static int
take(RLockObject *self, int blocking)
{
    unsigned long me = PyThread_get_thread_ident();
    if (self->count > 0 && self->owner == me) {
        if (self->count == ULONG_MAX) {
            PyErr_SetString(PyExc_OverflowError, "internal lock count overflowed");
            return -1;
        }
        self->count++;
        return 1;
    }
    if (PyThread_acquire_lock_timed(self->lock, 0, 0) != PY_LOCK_ACQUIRED) {
        if (!blocking)
            return 0;
        if (wait_for(self->lock) < 0)
            return -1;
    }
    self->owner = me;
    self->count = 1;
    return 1;
}

PyDoc_STRVAR(acquire_doc, "acquire(blocking=True, /) -> bool\n\n"
                          "Take the lock (again, if this thread holds it); without blocking, False when\n"
                          "another thread holds it.");

static PyObject *
rlock_acquire(RLockObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "acquire() takes at most 1 argument (%zd given)", nargs);
        return NULL;
    }
    int blocking = 1;
    if (nargs == 1 && (blocking = PyObject_IsTrue(args[0])) < 0)
        return NULL;
    int taken = take(self, blocking);
    if (taken < 0)
        return NULL;
    return PyBool_FromLong(taken);
}

PyDoc_STRVAR(release_doc, "release() -> None\n\n"
                          "Release the lock once; RuntimeError when this thread does not hold it.");

static PyObject *
rlock_release(RLockObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->count == 0 || self->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return NULL;
    }
    if (--self->count == 0)
        PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *
rlock_enter(RLockObject *self, PyObject *Py_UNUSED(ignored))
{
    if (take(self, 1) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
rlock_exit(RLockObject *self, PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(nargs))
{
    return rlock_release(self, NULL);
}

static PyObject *
rlock_repr(RLockObject *self)
{
    if (self->count == 0)
        return PyUnicode_FromFormat("<seglog.locks.RLock unlocked at %p>", self);
    return PyUnicode_FromFormat("<seglog.locks.RLock locked by %lu, count %lu at %p>", self->owner, self->count, self);
}

static PyMethodDef rlock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))rlock_acquire, METH_FASTCALL, acquire_doc},
    {"release", (PyCFunction)rlock_release, METH_NOARGS, release_doc},
    {"__enter__", (PyCFunction)rlock_enter, METH_NOARGS, acquire_doc},
    {"__exit__", (PyCFunction)(void (*)(void))rlock_exit, METH_FASTCALL, release_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RLockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "seglog.locks.RLock",
    .tp_basicsize = sizeof(RLockObject),
    .tp_dealloc = (destructor)rlock_dealloc,
    .tp_repr = (reprfunc)rlock_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A reentrant lock (threading.RLock's semantics) whose acquire and release parse no arguments.",
    .tp_methods = rlock_methods,
    .tp_new = rlock_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "seglog._locks", "A reentrant lock with cheap calls, for the append path.", -1, NULL,
};

PyMODINIT_FUNC
PyInit__locks(void)
{
    if (PyType_Ready(&RLockType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "RLock", (PyObject *)&RLockType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
