/* An exposition's lines joined in C.
 *
 * join(heads, values, tail, fallback, style) returns the UTF-8 bytes of
 *     "".join(f"{head}{text(value)}\n" for head, value in zip(heads, values)) + tail
 * where text(value) is prometheus_client's floatToGoString(value): written here for a float,
 * asked of fallback (floatToGoString itself) for anything else; a None value writes its head
 * alone (a family's HELP and TYPE lines, kept as one text). That is
 * kvops.exporter.line_text's Python join, which stays the reference and the fallback
 * (tests/exporter/test_line_text.py compares the two). Python spent ~1 us a line on the
 * f-string, the repr and the join: 2,500 lines per scrape with 16 vLLMs. Whole numbers written
 * here and the output written in place took this join from 468 to 294 us on that exposition
 * (best of 5 x 300, warm).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* The output is written straight into the bytes object returned: sized from the heads before the
 * first line (about 400 KB with 16 vLLMs), so the buffer neither grows by copying nor is copied
 * once more into a bytes object at the end. */
typedef struct {
    PyObject *out; /* a bytes object of `cap` bytes, `len` of them written; NULL after a failure */
    Py_ssize_t len;
    Py_ssize_t cap;
} Buffer;

static int put(Buffer *b, const char *s, Py_ssize_t n) {
    if (n == 0) {
        return 0;
    }
    if (n > PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->len + n > b->cap) { /* past the estimate: a fallback wrote more than 32 bytes */
        Py_ssize_t cap = b->cap; /* at least 1: join() sizes the bytes object first */
        while (cap < b->len + n) {
            cap = cap > PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : cap * 2;
        }
        if (_PyBytes_Resize(&b->out, cap) < 0) {
            return -1; /* b->out is NULL now */
        }
        b->cap = cap;
    }
    memcpy(PyBytes_AS_STRING(b->out) + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

static int put_text(Buffer *b, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "join: expected str, got %.100s", Py_TYPE(text)->tp_name);
        return -1;
    }
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n); /* kept by the str: heads are reused */
    if (utf8 == NULL) {
        return -1;
    }
    return put(b, utf8, n);
}

/* Go's exponent form of a positive float from 1e6 up whose repr() `s` has a dot (below 1e16),
 * as floatToGoString writes it: the repr's digits as one digit, a dot and the rest, trailing
 * zeros and dot stripped (Python's rstrip("0.")), then "e+" and the dot's place less one. The
 * exponent's width is the installed prometheus_client's (`style`, see join). */
static int put_go_exponent(Buffer *b, const char *s, int style) {
    const char *dot = strchr(s, '.');
    char text[64];
    if (dot == NULL) {
        return put(b, s, (Py_ssize_t)strlen(s)); /* not reached: the caller saw a dot */
    }
    size_t digits_before = (size_t)(dot - s), rest = strlen(dot + 1);
    if (digits_before < 7 || digits_before + rest + 8 > sizeof(text)) {
        return put(b, s, (Py_ssize_t)strlen(s)); /* not reached for a repr of 1e6 <= d < 1e16 */
    }
    size_t n = 0;
    text[n++] = s[0];
    text[n++] = '.';
    memcpy(text + n, s + 1, digits_before - 1);
    n += digits_before - 1;
    memcpy(text + n, dot + 1, rest);
    n += rest;
    while (n > 0 && (text[n - 1] == '0' || text[n - 1] == '.')) {
        n--;
    }
    int exponent = (int)digits_before - 1; /* 6 to 15 */
    int written = snprintf(text + n, sizeof(text) - n, style == 1 ? "e+%02d" : "e+0%d", exponent);
    return put(b, text, (Py_ssize_t)n + written);
}

/* Writes `d`'s repr() into `text` (at least 32 bytes) and returns its length: a whole number
 * below 2**53 in magnitude (bucket counts, byte counters: most of an exposition) as its digits
 * and ".0", which is what repr() writes for one (every such integer is a double, so no shorter
 * string rounds to it), without PyOS_double_to_string's shortest-repr search and allocation:
 * 2,085 of 2,256 values with 16 vLLMs; else float.__repr__'s own call (Objects/floatobject.c). */
static Py_ssize_t repr_text(double d, char *text) {
    if (d > -9007199254740992.0 && d < 9007199254740992.0 && d == (double)(long long)d &&
        !(d == 0.0 && signbit(d))) {
        char digits[24];
        long long n = (long long)d;
        unsigned long long u = n < 0 ? (unsigned long long)(-n) : (unsigned long long)n;
        int at = (int)sizeof(digits);
        digits[--at] = '0';
        digits[--at] = '.';
        do {
            digits[--at] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (n < 0) digits[--at] = '-';
        Py_ssize_t len = (Py_ssize_t)sizeof(digits) - at;
        memcpy(text, digits + at, (size_t)len);
        text[len] = '\0';
        return len;
    }
    char *repr = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) return -1;
    size_t len = strlen(repr);
    if (len >= 32) { /* a repr is at most 24 bytes */
        PyMem_Free(repr);
        PyErr_SetString(PyExc_ValueError, "join: a float's repr is longer than expected");
        return -1;
    }
    memcpy(text, repr, len + 1);
    PyMem_Free(repr);
    return (Py_ssize_t)len;
}

/* floatToGoString (prometheus_client/utils.py) of a float: +Inf, -Inf, NaN, else repr(), in
 * Go's exponent form for a positive one from 1e6 up with a dot in its repr. That form's
 * exponent width changed between prometheus_client releases (0.20: "e+010", 0.26: "e+10"):
 * `style` says which the installed one writes (kvops.exporter.line_text probes it), 0 when
 * neither, and then such a value, like anything not a float, is asked of fallback, the
 * installed floatToGoString itself. */
static int put_value(Buffer *b, PyObject *value, PyObject *fallback, int style) {
    if (PyFloat_CheckExact(value)) {
        double d = PyFloat_AS_DOUBLE(value);
        if (isnan(d)) return put(b, "NaN", 3);
        if (isinf(d)) return d > 0 ? put(b, "+Inf", 4) : put(b, "-Inf", 4);
        if (d < 1e6 || style != 0) {
            char text[32];
            Py_ssize_t len = repr_text(d, text);
            if (len < 0) return -1;
            if (d >= 1e6 && strchr(text, '.') != NULL) {
                return put_go_exponent(b, text, style);
            }
            return put(b, text, len);
        }
    }
    PyObject *text = PyObject_CallOneArg(fallback, value);
    if (text == NULL) {
        return -1;
    }
    int rc = put_text(b, text);
    Py_DECREF(text);
    return rc;
}

static PyObject *join(PyObject *self, PyObject *args) {
    PyObject *heads, *values, *tail, *fallback;
    int style = 0;
    if (!PyArg_ParseTuple(args, "O!O!UO|i:join", &PyList_Type, &heads, &PyList_Type, &values, &tail, &fallback,
                          &style)) {
        return NULL;
    }
    if (style < 0 || style > 2) {
        PyErr_SetString(PyExc_ValueError, "join: style is 0, 1 or 2");
        return NULL;
    }
    if (PyList_GET_SIZE(heads) != PyList_GET_SIZE(values)) {
        PyErr_SetString(PyExc_ValueError, "join: heads and values differ in length");
        return NULL;
    }
    /* Sized first: every head's UTF-8 (kept by the str, so asked once either way), 32 bytes a
     * value (a repr is at most 24, a newline), the tail. */
    Py_ssize_t cap = 0, n;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(heads); i++) {
        PyObject *head = PyList_GET_ITEM(heads, i);
        if (PyUnicode_Check(head)) {
            if (PyUnicode_AsUTF8AndSize(head, &n) == NULL) {
                return NULL;
            }
            cap += n + 32;
        }
    }
    if (PyUnicode_AsUTF8AndSize(tail, &n) == NULL) {
        return NULL;
    }
    cap += n;
    Buffer b = {PyBytes_FromStringAndSize(NULL, cap ? cap : 1), 0, cap ? cap : 1};
    if (b.out == NULL) {
        return NULL;
    }
    /* fallback is Python code, which could change either list: sizes are read each line. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(heads) && i < PyList_GET_SIZE(values); i++) {
        PyObject *head = PyList_GET_ITEM(heads, i);
        PyObject *value = PyList_GET_ITEM(values, i);
        Py_INCREF(head);
        Py_INCREF(value);
        int rc = put_text(&b, head);
        if (rc == 0 && value != Py_None) { /* None: the head is a whole text (HELP and TYPE) */
            rc = put_value(&b, value, fallback, style);
            if (rc == 0) {
                rc = put(&b, "\n", 1);
            }
        }
        Py_DECREF(head);
        Py_DECREF(value);
        if (rc != 0) {
            Py_XDECREF(b.out);
            return NULL;
        }
    }
    if (put_text(&b, tail) != 0) {
        Py_XDECREF(b.out);
        return NULL;
    }
    if (_PyBytes_Resize(&b.out, b.len) < 0) {
        return NULL;
    }
    return b.out;
}


/* gather(samples, fields, heads, out_heads, out_values) -> the number of lines added: for each
 * sample in order and each of `fields` (attribute names) in order, the attribute's value; one
 * that is not None is appended to out_values and its head, heads[sample * len(fields) + field],
 * to out_heads. The exporter's walk (kvops.exporter.walk) reads most families this way, ~1,800
 * getattr calls a scrape with 16 vLLMs: one call per family here instead of a Python loop
 * that built and hashed a key per series (kvops.exporter.text_sink). */
static PyObject *gather(PyObject *self, PyObject *args) {
    PyObject *samples, *fields, *heads, *out_heads, *out_values;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:gather", &PyList_Type, &samples, &PyTuple_Type, &fields, &PyList_Type,
                          &heads, &PyList_Type, &out_heads, &PyList_Type, &out_values)) {
        return NULL;
    }
    Py_ssize_t n_fields = PyTuple_GET_SIZE(fields);
    for (Py_ssize_t j = 0; j < n_fields; j++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(fields, j))) {
            PyErr_SetString(PyExc_TypeError, "gather: fields are attribute names");
            return NULL;
        }
    }
    Py_ssize_t added = 0;
    /* getattr may run Python code (a property) that changes a list: sizes are read each time. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(samples); i++) {
        PyObject *sample = PyList_GET_ITEM(samples, i);
        Py_INCREF(sample);
        for (Py_ssize_t j = 0; j < n_fields; j++) {
            PyObject *value = PyObject_GetAttr(sample, PyTuple_GET_ITEM(fields, j));
            if (value == NULL) {
                Py_DECREF(sample);
                return NULL;
            }
            if (value != Py_None) {
                Py_ssize_t at = i * n_fields + j;
                if (at >= PyList_GET_SIZE(heads)) {
                    Py_DECREF(value);
                    Py_DECREF(sample);
                    PyErr_SetString(PyExc_ValueError, "gather: fewer heads than samples times fields");
                    return NULL;
                }
                if (PyList_Append(out_heads, PyList_GET_ITEM(heads, at)) < 0 ||
                    PyList_Append(out_values, value) < 0) {
                    Py_DECREF(value);
                    Py_DECREF(sample);
                    return NULL;
                }
                added++;
            }
            Py_DECREF(value);
        }
        Py_DECREF(sample);
    }
    return PyLong_FromSsize_t(added);
}

/* buckets(buckets, bounds, heads, out_heads, out_values) -> bool: where `buckets` (a histogram's
 * (upper bound, count) pairs) has exactly the upper bounds `bounds`, appends each bucket's count
 * to out_values and its head (heads, one a bound) to out_heads, and returns True; else appends
 * nothing and returns False. The exporter keeps a passed-through histogram series' heads with
 * the bounds they were written for (kvops.exporter.text_sink); finding them by a key holding the
 * bounds hashed and compared ~25 floats a series each scrape, in Python. */
static PyObject *buckets(PyObject *self, PyObject *args) {
    PyObject *pairs, *bounds, *heads, *out_heads, *out_values;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:buckets", &PyTuple_Type, &pairs, &PyTuple_Type, &bounds, &PyList_Type,
                          &heads, &PyList_Type, &out_heads, &PyList_Type, &out_values)) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(pairs);
    if (PyTuple_GET_SIZE(bounds) != n || PyList_GET_SIZE(heads) != n) {
        Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "buckets: each bucket is an (upper bound, count) pair");
            return NULL;
        }
        PyObject *le = PyTuple_GET_ITEM(pair, 0), *bound = PyTuple_GET_ITEM(bounds, i);
        if (le == bound) {
            continue;
        }
        if (PyFloat_CheckExact(le) && PyFloat_CheckExact(bound)) {
            if (PyFloat_AS_DOUBLE(le) != PyFloat_AS_DOUBLE(bound)) Py_RETURN_FALSE;
            continue;
        }
        int same = PyObject_RichCompareBool(le, bound, Py_EQ);
        if (same < 0) return NULL;
        if (!same) Py_RETURN_FALSE;
    }
    /* PyObject_RichCompareBool can run Python code: the sizes are checked again. */
    if (PyTuple_GET_SIZE(pairs) != n || PyList_GET_SIZE(heads) != n) {
        Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_Append(out_heads, PyList_GET_ITEM(heads, i)) < 0 ||
            PyList_Append(out_values, PyTuple_GET_ITEM(PyTuple_GET_ITEM(pairs, i), 1)) < 0) {
            return NULL;
        }
    }
    Py_RETURN_TRUE;
}

/* Where the dict has exactly the keys `keys` (in the order the exposition wants, a head each in
 * `heads`): appends each value that is not None to out_values and its head to out_heads: 1;
 * else appends nothing: 0; -1 with an exception set. */
static int put_keyed(PyObject *by_key, PyObject *keys, PyObject *heads, PyObject *out_heads, PyObject *out_values) {
    if (!PyDict_Check(by_key) || !PyTuple_Check(keys) || !PyList_Check(heads)) {
        PyErr_SetString(PyExc_TypeError, "keyed: a dict, a tuple of keys and a list of heads");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(keys);
    if (PyDict_GET_SIZE(by_key) != n || PyList_GET_SIZE(heads) != n) {
        return 0;
    }
    /* Every value is found (and held) before any is appended: a lookup can run Python code. */
    PyObject **found = PyMem_New(PyObject *, n ? n : 1);
    if (found == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t held = 0;
    int rc = 0;
    for (; held < n; held++) {
        PyObject *value = PyDict_GetItemWithError(by_key, PyTuple_GET_ITEM(keys, held));
        if (value == NULL) {
            rc = PyErr_Occurred() ? -1 : 0;
            goto done;
        }
        Py_INCREF(value);
        found[held] = value;
    }
    if (PyList_GET_SIZE(heads) != n) {
        goto done; /* changed by a key's __eq__ */
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (found[i] == Py_None) {
            continue;
        }
        if (PyList_Append(out_heads, PyList_GET_ITEM(heads, i)) < 0 || PyList_Append(out_values, found[i]) < 0) {
            rc = -1;
            goto done;
        }
    }
    rc = 1;
done:
    for (Py_ssize_t i = 0; i < held; i++) {
        Py_DECREF(found[i]);
    }
    PyMem_Free(found);
    return rc;
}

/* keyed(values_by_key, keys, heads, out_heads, out_values) -> bool: put_keyed. An open split's
 * series (vLLM's prompt tokens by source, requests by reason) are written from kept heads this
 * way while an engine's keys stay the same: the Python path sorted the keys and built and
 * hashed a key per series, each scrape. */
static PyObject *keyed(PyObject *self, PyObject *args) {
    PyObject *by_key, *keys, *heads, *out_heads, *out_values;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:keyed", &PyDict_Type, &by_key, &PyTuple_Type, &keys, &PyList_Type, &heads,
                          &PyList_Type, &out_heads, &PyList_Type, &out_values)) {
        return NULL;
    }
    int rc = put_keyed(by_key, keys, heads, out_heads, out_values);
    if (rc < 0) return NULL;
    return PyBool_FromLong(rc);
}

/* keyed_all(samples, field, plans, start, out_heads, out_values) -> int: from samples[start] on,
 * each sample whose attribute `field` is a dict that is not empty is written with its plan,
 * plans[i] = (keys, heads), by put_keyed. Returns -1 when every sample is written, else the
 * index of the first sample with no plan (None) or one its keys no longer match: the caller
 * makes that plan and calls again from there. One call a family instead of a Python loop over
 * the samples: most open splits are empty on most engines (57 families x 16 vLLMs a scrape). */
static PyObject *keyed_all(PyObject *self, PyObject *args) {
    PyObject *samples, *field, *plans, *out_heads, *out_values;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!UO!nO!O!:keyed_all", &PyList_Type, &samples, &field, &PyList_Type, &plans, &start,
                          &PyList_Type, &out_heads, &PyList_Type, &out_values)) {
        return NULL;
    }
    for (Py_ssize_t i = start < 0 ? 0 : start; i < PyList_GET_SIZE(samples); i++) {
        PyObject *by_key = PyObject_GetAttr(PyList_GET_ITEM(samples, i), field);
        if (by_key == NULL) return NULL;
        if (!PyDict_Check(by_key) || PyDict_GET_SIZE(by_key) == 0) {
            int empty = PyDict_Check(by_key) ? 1 : PyObject_Not(by_key);
            Py_DECREF(by_key);
            if (empty < 0) return NULL;
            if (empty) continue;
            return PyLong_FromSsize_t(i); /* not a dict: the caller's own path */
        }
        PyObject *plan = i < PyList_GET_SIZE(plans) ? PyList_GET_ITEM(plans, i) : Py_None;
        int rc = 0;
        if (PyTuple_Check(plan) && PyTuple_GET_SIZE(plan) == 2) {
            Py_INCREF(plan);
            rc = put_keyed(by_key, PyTuple_GET_ITEM(plan, 0), PyTuple_GET_ITEM(plan, 1), out_heads, out_values);
            Py_DECREF(plan);
        }
        Py_DECREF(by_key);
        if (rc < 0) return NULL;
        if (rc == 0) return PyLong_FromSsize_t(i);
    }
    return PyLong_FromLong(-1);
}

static PyMethodDef methods[] = {
    {"join", join, METH_VARARGS,
     "join(heads, values, tail, fallback, style=0) -> bytes: each head, its value's text and a "
     "newline (a None value: the head alone), then tail, in UTF-8."},
    {"gather", gather, METH_VARARGS,
     "gather(samples, fields, heads, out_heads, out_values) -> int: each sample's present fields, "
     "appended with their heads."},
    {"buckets", buckets, METH_VARARGS,
     "buckets(buckets, bounds, heads, out_heads, out_values) -> bool: the counts and their heads "
     "appended where the buckets' upper bounds are `bounds`."},
    {"keyed_all", keyed_all, METH_VARARGS,
     "keyed_all(samples, field, plans, start, out_heads, out_values) -> int: each sample's dict written "
     "with its plan from start on; -1, or the first sample whose plan is to be made."},
    {"keyed", keyed, METH_VARARGS,
     "keyed(values_by_key, keys, heads, out_heads, out_values) -> bool: the present values and "
     "their heads appended where the dict's keys are `keys`."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lines", "An exposition's lines joined in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__lines(void) { return PyModule_Create(&module); }
