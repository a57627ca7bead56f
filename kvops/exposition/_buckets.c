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
 *
 * series(buckets, sums, counts, les, le_of) goes on to what histograms() makes of the groups:
 * for each series whose bounds, sorted, end at +Inf, (labels, buckets as a tuple, the _sum line
 * with the same label items in the same order or None, the _count line's likewise or the +Inf
 * bucket's count). histograms() looks for a _sum line in another label order itself, and keeps
 * its Python reading as the reference (tests/sources/test_buckets.py). The Python loop over the
 * groups cost as much as the grouping: dicts of the _sum and _count lines by tuples of their
 * items, a sort, a tuple.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    Py_hash_t hash;
    PyObject *first;   /* the series' first line's label dict, or its shared series dict (held) */
    PyObject *buckets; /* its list of (bound, count) (held) */
    int shared;        /* first is the series' dict of labels but `le` (Known.series) */
} Series;

typedef struct {
    Series *items; /* in the order each series first appears */
    size_t n, cap;
} SeriesList;

static PyObject *le_name; /* "le", interned */
static PyObject *infinity; /* float("inf") */

static int is_le(PyObject *key) {
    return key == le_name || (PyUnicode_Check(key) && PyUnicode_Compare(key, le_name) == 0);
}

/* Order-sensitive, as a tuple of the items is; `le` left out where skip_le. -1 with an
 * exception on an unhashable value. A bucket line without its `le` hashes as its _sum line. */
static Py_hash_t items_hash(PyObject *labels, int skip_le) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    Py_uhash_t h = 0x345678UL;
    while (PyDict_Next(labels, &pos, &key, &value)) {
        if (skip_le && is_le(key)) continue;
        Py_hash_t hk = PyObject_Hash(key), hv = hk == -1 ? -1 : PyObject_Hash(value);
        if (hv == -1) return -1;
        h = (h ^ (Py_uhash_t)hk) * 1000003UL;
        h = (h ^ (Py_uhash_t)hv) * 1000003UL;
    }
    Py_hash_t out = (Py_hash_t)h;
    return out == -1 ? -2 : out;
}

/* 1 when a and b hold the same items in the same order (`le` left out of a side whose skip
 * flag is set), 0 when not, -1 on an error. */
static int same_items(PyObject *a, int skip_a, PyObject *b, int skip_b) {
    Py_ssize_t i = 0, j = 0;
    PyObject *ka, *va, *kb, *vb;
    for (;;) {
        int more_a, more_b;
        while ((more_a = PyDict_Next(a, &i, &ka, &va)) && skip_a && is_le(ka)) {
        }
        while ((more_b = PyDict_Next(b, &j, &kb, &vb)) && skip_b && is_le(kb)) {
        }
        if (!more_a || !more_b) return more_a == more_b;
        Py_INCREF(ka), Py_INCREF(va), Py_INCREF(kb), Py_INCREF(vb);
        int same = PyObject_RichCompareBool(ka, kb, Py_EQ);
        if (same > 0) same = PyObject_RichCompareBool(va, vb, Py_EQ);
        Py_DECREF(ka), Py_DECREF(va), Py_DECREF(kb), Py_DECREF(vb);
        if (same <= 0) return same;
    }
}

/* Lines seen before, by their labels dict's identity. The parser hands out the same dict for a
 * label set it has read before (kvops/exposition/parser.py, ParseResult: read-only), so a bucket
 * line's bound, its series' hash and its series' labels without `le` are worked out once, not on
 * every scrape: a line is then one pointer lookup. Each entry holds its dict, so an address is
 * never another dict's while it is here. Only dicts of exact str keys and values are kept (their
 * hashes and compares run no Python code). Bounded: full, it starts over. */
typedef struct {
    PyObject *labels; /* held; NULL: an empty slot */
    PyObject *le;     /* the bound (held): only lines with a float bound are kept */
    PyObject *series; /* the labels but `le` (held): one dict for every line of a series */
    Py_hash_t hash;   /* items_hash(labels, skip le) */
} Known;

#define KNOWN_MAX 16384 /* entries; the table has twice as many slots */
static Known *known;    /* KNOWN_MAX * 2 slots, or NULL before the first use */
static size_t known_used;
/* The series dicts handed out, by items_hash: a series' lines share one. Same bound. */
static PyObject **series_dicts; /* KNOWN_MAX * 2 slots (held) */
static Py_hash_t *series_hashes;

static size_t pointer_slot(PyObject *p) {
    return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL) & (2 * KNOWN_MAX - 1);
}

static void known_clear(void) {
    if (known == NULL) return;
    for (size_t k = 0; k < 2 * KNOWN_MAX; k++) {
        Known *slot = &known[k];
        if (slot->labels == NULL) continue;
        PyObject *labels = slot->labels, *le = slot->le, *series = slot->series;
        *slot = (Known){NULL, NULL, NULL, 0};
        Py_DECREF(labels);
        Py_DECREF(le);
        Py_DECREF(series);
    }
    for (size_t k = 0; k < 2 * KNOWN_MAX; k++) Py_CLEAR(series_dicts[k]);
    known_used = 0;
}

/* The entry of `labels`, or NULL. */
static Known *known_find(PyObject *labels) {
    if (known == NULL) return NULL;
    for (size_t at = pointer_slot(labels);; at = (at + 1) & (2 * KNOWN_MAX - 1)) {
        if (known[at].labels == labels) return &known[at];
        if (known[at].labels == NULL) return NULL;
    }
}

/* 1 when every key and value is an exact str. */
static int all_str(PyObject *labels) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(labels, &pos, &k, &v))
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v)) return 0;
    return 1;
}

static PyObject *labels_without_le(PyObject *first, PyObject **key_out);

/* Remembers `labels` (a line of float bound `le` and series hash h): its entry,
 * or NULL when it is not kept (not all str, or no memory: the caller reads the line itself).
 * -1 in *error with an exception set on a failure. Python code (a collection freeing objects)
 * may run while the series dict is made: the tables are looked at only after it. */
static Known *known_add(PyObject *labels, PyObject *le, Py_hash_t h, int *error) {
    *error = 0;
    if (!all_str(labels)) return NULL;
    PyObject *fresh = labels_without_le(labels, NULL);
    if (fresh == NULL) {
        *error = -1;
        return NULL;
    }
    if (known == NULL) {
        known = PyMem_Calloc(2 * KNOWN_MAX, sizeof(Known));
        series_dicts = PyMem_Calloc(2 * KNOWN_MAX, sizeof(PyObject *));
        series_hashes = PyMem_Calloc(2 * KNOWN_MAX, sizeof(Py_hash_t));
        if (known == NULL || series_dicts == NULL || series_hashes == NULL) {
            PyMem_Free(known), PyMem_Free(series_dicts), PyMem_Free(series_hashes);
            known = NULL, series_dicts = NULL, series_hashes = NULL;
            Py_DECREF(fresh);
            return NULL;
        }
    }
    if (known_used >= KNOWN_MAX) known_clear(); /* frees dicts of str: no Python code */
    /* From here to the end nothing allocates an object or runs Python code: exact str compares. */
    PyObject *series = NULL;
    size_t at = (size_t)h & (2 * KNOWN_MAX - 1);
    for (; series_dicts[at] != NULL; at = (at + 1) & (2 * KNOWN_MAX - 1)) {
        if (series_hashes[at] != h) continue;
        int same = same_items(fresh, 0, series_dicts[at], 0);
        if (same < 0) {
            Py_DECREF(fresh);
            *error = -1;
            return NULL;
        }
        if (same) {
            series = series_dicts[at];
            break;
        }
    }
    if (series == NULL) {
        series_dicts[at] = series = Py_NewRef(fresh);
        series_hashes[at] = h;
    }
    size_t slot = pointer_slot(labels);
    while (known[slot].labels != NULL) slot = (slot + 1) & (2 * KNOWN_MAX - 1);
    known[slot] = (Known){Py_NewRef(labels), Py_NewRef(le), Py_NewRef(series), h};
    known_used++;
    Py_DECREF(fresh);
    return &known[slot];
}

static void series_free(SeriesList *s) {
    for (size_t k = 0; k < s->n; k++) {
        Py_DECREF(s->items[k].first);
        Py_DECREF(s->items[k].buckets);
    }
    PyMem_Free(s->items);
    s->items = NULL;
    s->n = s->cap = 0;
}

/* The bucket samples grouped into s, each series' (bound, count)s in page order. 0, or -1
 * with an exception (s then holds nothing). */
static int collect(PyObject *samples, PyObject *les, PyObject *le_of, SeriesList *s) {
    Py_ssize_t n = PyList_GET_SIZE(samples);
    size_t cap = 8;
    while (cap < 2 * (size_t)n) cap <<= 1;
    size_t mask = cap - 1;
    /* slot -> index in s->items + 1 (0: empty) */
    size_t *table = PyMem_Calloc(cap, sizeof(size_t));
    s->n = 0;
    s->cap = (size_t)n > 0 ? (size_t)n : 1;
    s->items = PyMem_Malloc(s->cap * sizeof(Series));
    if (table == NULL || s->items == NULL) {
        PyMem_Free(table);
        PyMem_Free(s->items);
        s->items = NULL;
        PyErr_NoMemory();
        return -1;
    }
    /* le_of is Python code, which could change the list: its size is read each time. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(samples); i++) {
        PyObject *item = PyList_GET_ITEM(samples, i), *le = NULL;
        /* A kept series dict, held while this line uses it: an allocation below may run the
         * collector, whose finalizers may let another thread start the kept lines over. */
        PyObject *held = NULL;
        Py_INCREF(item);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyDict_Check(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, "samples must be (labels dict, value) pairs");
            goto fail_item;
        }
        PyObject *labels = PyTuple_GET_ITEM(item, 0), *value = PyTuple_GET_ITEM(item, 1);
        PyObject *key = labels; /* what the series is found by: the line's dict, or its series' */
        Py_hash_t h;
        int shared = 0;
        Known *seen = known_find(labels);
        if (seen != NULL) { /* a line read on an earlier scrape: no lookup, no hash */
            le = Py_NewRef(seen->le);
            h = seen->hash;
            key = held = Py_NewRef(seen->series);
            shared = 1;
        } else {
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
            h = items_hash(labels, 1);
            if (h == -1) goto fail_item;
            if (PyFloat_CheckExact(le)) { /* kept for the next scrape (le_of may give other types) */
                int error;
                Known *added = known_add(labels, le, h, &error);
                if (error < 0) goto fail_item;
                if (added != NULL) {
                    key = held = Py_NewRef(added->series);
                    shared = 1;
                }
            }
        }
        size_t at = (size_t)h & mask;
        PyObject *buckets = NULL;
        while (table[at] != 0) {
            Series *known_series = &s->items[table[at] - 1];
            if (known_series->hash == h) {
                int same = known_series->first == key ? 1 : same_items(key, 1, known_series->first, 1);
                if (same < 0) goto fail_item;
                if (same) {
                    buckets = known_series->buckets;
                    break;
                }
            }
            at = (at + 1) & mask;
        }
        if (buckets == NULL) {
            if (s->n + 1 > cap / 2 || s->n >= s->cap) {
                PyErr_SetString(PyExc_RuntimeError, "the list grew under it");
                goto fail_item;
            }
            buckets = PyList_New(0);
            if (buckets == NULL) goto fail_item;
            s->items[s->n] = (Series){h, Py_NewRef(key), buckets, shared};
            table[at] = ++s->n;
        }
        PyObject *bucket = PyTuple_Pack(2, le, value);
        int failed = bucket == NULL ? -1 : PyList_Append(buckets, bucket);
        Py_XDECREF(bucket);
        Py_DECREF(le);
        Py_XDECREF(held);
        Py_DECREF(item);
        if (failed < 0) goto fail;
        continue;
    fail_item:
        Py_XDECREF(le);
        Py_XDECREF(held);
        Py_DECREF(item);
        goto fail;
    }
    PyMem_Free(table);
    return 0;
fail:
    PyMem_Free(table);
    series_free(s);
    return -1;
}

/* A new dict of the first line's labels but `le`; with key_out, also their (name, value) tuple. */
static PyObject *labels_without_le(PyObject *first, PyObject **key_out) {
    PyObject *copy = PyDict_New(), *items = key_out ? PyList_New(0) : NULL;
    if (copy == NULL || (key_out && items == NULL)) goto fail;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(first, &pos, &k, &v)) {
        if (is_le(k)) continue;
        if (PyDict_SetItem(copy, k, v) < 0) goto fail;
        if (items != NULL) {
            PyObject *item = PyTuple_Pack(2, k, v);
            int failed = item == NULL ? -1 : PyList_Append(items, item);
            Py_XDECREF(item);
            if (failed < 0) goto fail;
        }
    }
    if (key_out) {
        *key_out = PyList_AsTuple(items);
        Py_DECREF(items);
        if (*key_out == NULL) {
            Py_DECREF(copy);
            return NULL;
        }
    }
    return copy;
fail:
    Py_XDECREF(copy);
    Py_XDECREF(items);
    return NULL;
}

static PyObject *group(PyObject *self, PyObject *args) {
    PyObject *samples, *les, *le_of;
    if (!PyArg_ParseTuple(args, "O!O!O:group", &PyList_Type, &samples, &PyDict_Type, &les, &le_of)) return NULL;
    SeriesList s;
    if (collect(samples, les, le_of, &s) < 0) return NULL;
    PyObject *out = PyDict_New();
    if (out == NULL) goto fail;
    for (size_t k = 0; k < s.n; k++) {
        PyObject *key, *labels = labels_without_le(s.items[k].first, &key);
        if (labels == NULL) goto fail;
        PyObject *pair = PyTuple_Pack(2, labels, s.items[k].buckets);
        Py_DECREF(labels);
        int failed = pair == NULL ? -1 : PyDict_SetItem(out, key, pair);
        Py_DECREF(key);
        Py_XDECREF(pair);
        if (failed < 0) goto fail;
    }
    series_free(&s);
    return out;
fail:
    series_free(&s);
    Py_XDECREF(out);
    return NULL;
}

/* A _sum or _count family's lines by their label items in order, the last line of a label set
 * winning (as a dict built from them in page order): open addressing over the lines. */
typedef struct {
    Py_hash_t hash;
    PyObject *labels; /* held */
    PyObject *value;  /* held */
} Line;

typedef struct {
    Line *slots;
    size_t mask;
} Lines;

static void lines_free(Lines *t) {
    if (t->slots == NULL) return;
    for (size_t k = 0; k <= t->mask; k++) {
        Py_XDECREF(t->slots[k].labels);
        Py_XDECREF(t->slots[k].value);
    }
    PyMem_Free(t->slots);
    t->slots = NULL;
}

static int lines_build(PyObject *samples, Lines *t) {
    size_t cap = 8;
    while (cap < 2 * (size_t)PyList_GET_SIZE(samples)) cap <<= 1;
    t->mask = cap - 1;
    t->slots = PyMem_Calloc(cap, sizeof(Line));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(samples); /* no Python code runs below that could grow it... */
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(samples); i++) { /* ...but a compare could */
        PyObject *item = PyList_GET_ITEM(samples, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyDict_Check(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, "samples must be (labels dict, value) pairs");
            goto fail;
        }
        Py_INCREF(item);
        PyObject *labels = PyTuple_GET_ITEM(item, 0), *value = PyTuple_GET_ITEM(item, 1);
        Py_hash_t h = items_hash(labels, 0);
        if (h == -1) {
            Py_DECREF(item);
            goto fail;
        }
        size_t at = (size_t)h & t->mask;
        for (;;) {
            Line *slot = &t->slots[at];
            if (slot->labels == NULL) {
                *slot = (Line){h, Py_NewRef(labels), Py_NewRef(value)};
                break;
            }
            if (slot->hash == h) {
                int same = same_items(labels, 0, slot->labels, 0);
                if (same < 0) {
                    Py_DECREF(item);
                    goto fail;
                }
                if (same) {
                    Py_SETREF(slot->value, Py_NewRef(value));
                    break;
                }
            }
            at = (at + 1) & t->mask;
        }
        Py_DECREF(item);
    }
    return 0;
fail:
    lines_free(t);
    return -1;
}

/* The value of the line whose items are `first`'s but `le`, in order (borrowed), or NULL:
 * with an exception set on an error. */
static PyObject *lines_find(Lines *t, Py_hash_t h, PyObject *first) {
    for (size_t at = (size_t)h & t->mask; t->slots[at].labels != NULL; at = (at + 1) & t->mask) {
        if (t->slots[at].hash != h) continue;
        int same = same_items(first, 1, t->slots[at].labels, 0);
        if (same < 0) return NULL;
        if (same) return t->slots[at].value;
    }
    return NULL;
}

/* 1 when the bounds ascend strictly (the page's order: nothing to sort), 0 when not. */
static int ascending(PyObject *buckets) {
    Py_ssize_t n = PyList_GET_SIZE(buckets);
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(PyList_GET_ITEM(buckets, i - 1), 0);
        PyObject *b = PyTuple_GET_ITEM(PyList_GET_ITEM(buckets, i), 0);
        if (!PyFloat_CheckExact(a) || !PyFloat_CheckExact(b) || !(PyFloat_AS_DOUBLE(a) < PyFloat_AS_DOUBLE(b)))
            return 0;
    }
    return 1;
}

static PyObject *series(PyObject *self, PyObject *args) {
    PyObject *samples, *sums, *counts, *les, *le_of;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O:series", &PyList_Type, &samples, &PyList_Type, &sums, &PyList_Type,
                          &counts, &PyDict_Type, &les, &le_of))
        return NULL;
    SeriesList s;
    Lines sum_lines = {NULL, 0}, count_lines = {NULL, 0};
    PyObject *out = NULL;
    if (collect(samples, les, le_of, &s) < 0) return NULL;
    if (lines_build(sums, &sum_lines) < 0 || lines_build(counts, &count_lines) < 0) goto fail;
    out = PyList_New(0);
    if (out == NULL) goto fail;
    for (size_t k = 0; k < s.n; k++) {
        Series *one = &s.items[k];
        if (!ascending(one->buckets) && PyList_Sort(one->buckets) < 0) goto fail;
        PyObject *last = PyList_GET_ITEM(one->buckets, PyList_GET_SIZE(one->buckets) - 1);
        int inf = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 0), infinity, Py_EQ);
        if (inf < 0) goto fail;
        if (!inf) continue; /* a series cut before its +Inf bucket is not kept */
        PyObject *total = lines_find(&sum_lines, one->hash, one->first);
        if (total == NULL && PyErr_Occurred()) goto fail;
        PyObject *count = lines_find(&count_lines, one->hash, one->first);
        if (count == NULL && PyErr_Occurred()) goto fail;
        /* The shared series dict (read-only, as the parser's labels are), else a new one. */
        PyObject *labels = one->shared ? Py_NewRef(one->first) : labels_without_le(one->first, NULL);
        PyObject *bounds = labels == NULL ? NULL : PyList_AsTuple(one->buckets);
        PyObject *row = bounds == NULL ? NULL
                                       : PyTuple_Pack(4, labels, bounds, total ? total : Py_None,
                                                      count ? count : PyTuple_GET_ITEM(last, 1));
        Py_XDECREF(labels);
        Py_XDECREF(bounds);
        int failed = row == NULL ? -1 : PyList_Append(out, row);
        Py_XDECREF(row);
        if (failed < 0) goto fail;
    }
    series_free(&s);
    lines_free(&sum_lines);
    lines_free(&count_lines);
    return out;
fail:
    series_free(&s);
    lines_free(&sum_lines);
    lines_free(&count_lines);
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"group", group, METH_VARARGS,
     "group(samples, les, le_of) -> {label items without le: (labels, [(bound, count), ...])}"},
    {"series", series, METH_VARARGS,
     "series(buckets, sums, counts, les, le_of) -> [(labels, ((bound, count), ...), sum or None, count)]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_buckets", "A histogram family's bucket samples grouped into series, in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__buckets(void) {
    le_name = PyUnicode_InternFromString("le");
    infinity = PyFloat_FromDouble(Py_HUGE_VAL);
    if (le_name == NULL || infinity == NULL) return NULL;
    return PyModule_Create(&module);
}
