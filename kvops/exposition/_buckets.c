/* A histogram family's bucket samples grouped into series, in C.
 *
 * group(samples, les, le_of) returns what kvops.exposition.histograms._group returns: a dict
 * from each series' label items without `le` (a tuple of (name, value) pairs, in the order the
 * line gave them) to (those labels as a dict, [(bound, count), ...] in page order). `les` is the
 * bound cache (bound text -> float or None) and le_of(text) what fills it; a sample without
 * `le`, or whose bound is None, is no bucket. _group stays the reference and the fallback
 * (tests/sources/test_buckets.py compares the two). Python built a tuple of every line's
 * label items and hashed it twice; here a line is hashed from its strings' kept hashes and
 * compared with its series' first line, and a series' tuple is built once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    Py_hash_t hash;
    PyObject *labels;  /* the series' first line's label dict (held) */
    PyObject *buckets; /* its list of (bound, count) (held) */
} Entry;

static PyObject *le_name; /* "le", interned */

static int is_le(PyObject *key) {
    return key == le_name || (PyUnicode_Check(key) && PyUnicode_Compare(key, le_name) == 0);
}

/* Order-sensitive, as the tuple of items is: -1 with an exception on an unhashable value. */
static Py_hash_t series_hash(PyObject *labels) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    Py_uhash_t h = 0x345678UL;
    while (PyDict_Next(labels, &pos, &key, &value)) {
        if (is_le(key)) continue;
        Py_hash_t hk = PyObject_Hash(key), hv = hk == -1 ? -1 : PyObject_Hash(value);
        if (hv == -1) return -1;
        h = (h ^ (Py_uhash_t)hk) * 1000003UL;
        h = (h ^ (Py_uhash_t)hv) * 1000003UL;
    }
    Py_hash_t out = (Py_hash_t)h;
    return out == -1 ? -2 : out;
}

/* 1 when a and b hold the same items but `le`, in the same order; -1 on an error. */
static int same_series(PyObject *a, PyObject *b) {
    Py_ssize_t i = 0, j = 0;
    PyObject *ka, *va, *kb, *vb;
    for (;;) {
        int more_a, more_b;
        while ((more_a = PyDict_Next(a, &i, &ka, &va)) && is_le(ka)) {
        }
        while ((more_b = PyDict_Next(b, &j, &kb, &vb)) && is_le(kb)) {
        }
        if (!more_a || !more_b) return more_a == more_b;
        Py_INCREF(ka), Py_INCREF(va), Py_INCREF(kb), Py_INCREF(vb);
        int same = PyObject_RichCompareBool(ka, kb, Py_EQ);
        if (same > 0) same = PyObject_RichCompareBool(va, vb, Py_EQ);
        Py_DECREF(ka), Py_DECREF(va), Py_DECREF(kb), Py_DECREF(vb);
        if (same <= 0) return same;
    }
}

/* (key tuple, (labels dict, [])) for a new series, put in out; its list in *buckets (borrowed). */
static int new_series(PyObject *out, PyObject *labels, PyObject **buckets) {
    PyObject *items = PyList_New(0), *copy = PyDict_New();
    PyObject *key = NULL, *pair = NULL;
    int rc = -1;
    if (items == NULL || copy == NULL) goto done;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(labels, &pos, &k, &v)) {
        if (is_le(k)) continue;
        PyObject *item = PyTuple_Pack(2, k, v);
        if (item == NULL) goto done;
        int failed = PyList_Append(items, item);
        Py_DECREF(item);
        if (failed < 0 || PyDict_SetItem(copy, k, v) < 0) goto done;
    }
    key = PyList_AsTuple(items);
    if (key == NULL) goto done;
    *buckets = PyList_New(0);
    if (*buckets == NULL) goto done;
    pair = PyTuple_Pack(2, copy, *buckets);
    Py_DECREF(*buckets); /* held by pair, then by out */
    if (pair == NULL) goto done;
    rc = PyDict_SetItem(out, key, pair);
done:
    Py_XDECREF(items);
    Py_XDECREF(copy);
    Py_XDECREF(key);
    Py_XDECREF(pair);
    return rc;
}

static PyObject *group(PyObject *self, PyObject *args) {
    PyObject *samples, *les, *le_of;
    if (!PyArg_ParseTuple(args, "O!O!O:group", &PyList_Type, &samples, &PyDict_Type, &les, &le_of)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(samples);
    size_t cap = 8;
    while (cap < 2 * (size_t)n) cap <<= 1;
    size_t mask = cap - 1;
    Entry *table = PyMem_Calloc(cap, sizeof(Entry));
    PyObject *out = PyDict_New();
    if (table == NULL || out == NULL) {
        PyMem_Free(table);
        Py_XDECREF(out);
        return PyErr_NoMemory();
    }
    size_t used = 0;
    /* le_of is Python code, which could change the list: its size is read each time. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(samples); i++) {
        PyObject *item = PyList_GET_ITEM(samples, i), *le = NULL;
        Py_INCREF(item);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyDict_Check(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, "group: samples must be (labels dict, value) pairs");
            goto fail_item;
        }
        PyObject *labels = PyTuple_GET_ITEM(item, 0), *value = PyTuple_GET_ITEM(item, 1);
        PyObject *raw = PyDict_GetItemWithError(labels, le_name); /* borrowed */
        if (raw == NULL) {
            if (PyErr_Occurred()) goto fail_item;
            Py_DECREF(item);
            continue;
        }
        Py_INCREF(raw);
        le = PyDict_GetItemWithError(les, raw);
        if (le != NULL) {
            Py_INCREF(le);
        } else if (!PyErr_Occurred()) {
            le = PyObject_CallOneArg(le_of, raw);
        }
        Py_DECREF(raw);
        if (le == NULL) goto fail_item;
        if (le == Py_None) { /* a bucket without a usable bound is not one */
            Py_DECREF(le);
            Py_DECREF(item);
            continue;
        }
        Py_hash_t h = series_hash(labels);
        if (h == -1) goto fail_item;
        size_t at = (size_t)h & mask;
        PyObject *buckets = NULL;
        while (table[at].labels != NULL) {
            if (table[at].hash == h) {
                int same = same_series(labels, table[at].labels);
                if (same < 0) goto fail_item;
                if (same) {
                    buckets = table[at].buckets;
                    break;
                }
            }
            at = (at + 1) & mask;
        }
        if (buckets == NULL) {
            if (used + 1 > cap / 2 || new_series(out, labels, &buckets) < 0) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "group: the list grew under it");
                goto fail_item;
            }
            table[at].hash = h;
            table[at].labels = Py_NewRef(labels);
            table[at].buckets = Py_NewRef(buckets);
            used++;
        }
        PyObject *bucket = PyTuple_Pack(2, le, value);
        int failed = bucket == NULL ? -1 : PyList_Append(buckets, bucket);
        Py_XDECREF(bucket);
        Py_DECREF(le);
        Py_DECREF(item);
        if (failed < 0) goto fail;
        continue;
    fail_item:
        Py_XDECREF(le);
        Py_DECREF(item);
        goto fail;
    }
    for (size_t k = 0; k < cap; k++) {
        Py_XDECREF(table[k].labels);
        Py_XDECREF(table[k].buckets);
    }
    PyMem_Free(table);
    return out;
fail:
    for (size_t k = 0; k < cap; k++) {
        Py_XDECREF(table[k].labels);
        Py_XDECREF(table[k].buckets);
    }
    PyMem_Free(table);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"group", group, METH_VARARGS,
     "group(samples, les, le_of) -> {label items without le: (labels, [(bound, count), ...])}"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_buckets", "A histogram family's bucket samples grouped into series, in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__buckets(void) {
    le_name = PyUnicode_InternFromString("le");
    if (le_name == NULL) return NULL;
    return PyModule_Create(&module);
}
