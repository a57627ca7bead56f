/* The wanted lines of a Prometheus text page, found in C.
 *
 * Finder(wanted, families).findall(text) returns what
 * parser._found_lines(wanted).findall("\n" + text) returns: one 6-tuple of str per wanted
 * sample line, # TYPE line of a wanted family, and line that starts with "{", a blank, a tab
 * or "\r" (key, sample, value, rest, type, other; "" for a group that took no part). The
 * regular expression stays the reference and the fallback (tests/sources/test_linescan.py
 * compares the two on every page of the test suite and on generated ones): this does the
 * same work without trying a trie at each of a page's ~700 line starts from Python's re
 * engine. findall returns None for a page it does not read (characters past U+00FF where a
 * wanted name has one too), and the caller uses the regular expression.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A set of byte strings: open addressing. Names are a few hundred at most. */
typedef struct {
    Py_ssize_t len;
    uint64_t hash;
    char *bytes;
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;
    /* A bit for each (length % 64, last byte % 64) a name has: most lines' names are not
     * wanted, and this turns them away before they are hashed (~350 of a vLLM page's ~500
     * sample lines). */
    uint64_t ends[64];
} NameSet;

/* Byte strings' hash for both tables here (wanted names, remembered keys): eight bytes a step,
 * a multiply and a shift each; a key is ~100 bytes, a name ~30. */
static uint64_t bytes_hash(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, (size_t)n);
        h = (h ^ w) * 0x94D049BB133111EBULL;
        h ^= h >> 29;
    }
    return h;
}

static void nameset_free(NameSet *set) {
    if (set->slots == NULL) return;
    for (size_t i = 0; i <= set->mask; i++) PyMem_Free(set->slots[i].bytes);
    PyMem_Free(set->slots);
    set->slots = NULL;
}

static inline int nameset_may_contain(const NameSet *set, const unsigned char *p, Py_ssize_t n) {
    return n > 0 && (set->ends[n & 63] >> (p[n - 1] & 63) & 1);
}

static int nameset_contains(const NameSet *set, const unsigned char *p, Py_ssize_t n) {
    if (!nameset_may_contain(set, p, n)) return 0;
    uint64_t h = bytes_hash(p, n);
    for (size_t i = (size_t)h & set->mask;; i = (i + 1) & set->mask) {
        const Slot *s = &set->slots[i];
        if (s->bytes == NULL) return 0;
        if (s->hash == h && s->len == n && memcmp(s->bytes, p, (size_t)n) == 0) return 1;
    }
}

/* Names whose characters are all below U+0100 are kept as Latin-1 bytes; others are left out
 * (wide_names set), and pages with characters past U+00FF are then not read. A name holding a
 * character that ends a name here (`stops`) could match where this scanner does not look, and
 * one holding NUL could match a page's stand-in for a wider character (page_bytes): ValueError
 * for both (strchr finds the terminating NUL too), and the caller keeps the regular expression. */
static int nameset_fill(NameSet *set, PyObject *names, const char *stops, int *wide_names) {
    Py_ssize_t count = PySet_Check(names) || PyFrozenSet_Check(names) ? PySet_GET_SIZE(names) : -1;
    if (count < 0) {
        PyErr_SetString(PyExc_TypeError, "names must be a set or frozenset of str");
        return -1;
    }
    size_t size = 8;
    while (size < (size_t)count * 2 + 2) size <<= 1;
    set->slots = PyMem_Calloc(size, sizeof(Slot));
    if (set->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    set->mask = size - 1;
    memset(set->ends, 0, sizeof(set->ends));
    PyObject *iter = PyObject_GetIter(names);
    if (iter == NULL) return -1;
    PyObject *name;
    while ((name = PyIter_Next(iter)) != NULL) {
        if (!PyUnicode_Check(name)) {
            Py_DECREF(name);
            Py_DECREF(iter);
            PyErr_SetString(PyExc_TypeError, "names must be str");
            return -1;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(name) < 0) {
            Py_DECREF(name);
            Py_DECREF(iter);
            return -1;
        }
#endif
        Py_ssize_t n = PyUnicode_GET_LENGTH(name);
        if (n == 0 || PyUnicode_KIND(name) != PyUnicode_1BYTE_KIND) {
            Py_DECREF(name);
            if (n == 0) {
                Py_DECREF(iter);
                PyErr_SetString(PyExc_ValueError, "an empty name");
                return -1;
            }
            *wide_names = 1;
            continue;
        }
        const unsigned char *p = PyUnicode_1BYTE_DATA(name);
        for (Py_ssize_t i = 0; i < n; i++) {
            if (strchr(stops, p[i]) != NULL) {
                Py_DECREF(name);
                Py_DECREF(iter);
                PyErr_SetString(PyExc_ValueError, "a name holds a character that ends a name");
                return -1;
            }
        }
        uint64_t h = bytes_hash(p, n);
        set->ends[n & 63] |= (uint64_t)1 << (p[n - 1] & 63);
        size_t i = (size_t)h & set->mask;
        int present = 0;
        for (; set->slots[i].bytes != NULL; i = (i + 1) & set->mask) {
            Slot *s = &set->slots[i];
            if (s->hash == h && s->len == n && memcmp(s->bytes, p, (size_t)n) == 0) {
                present = 1;
                break;
            }
        }
        if (!present) {
            char *copy = PyMem_Malloc((size_t)n);
            if (copy == NULL) {
                Py_DECREF(name);
                Py_DECREF(iter);
                PyErr_NoMemory();
                return -1;
            }
            memcpy(copy, p, (size_t)n);
            set->slots[i].bytes = copy;
            set->slots[i].len = n;
            set->slots[i].hash = h;
        }
        Py_DECREF(name);
    }
    Py_DECREF(iter);
    return PyErr_Occurred() ? -1 : 0;
}

/* read_known's memo of heads: a key's bytes (a sample line's text up to its "}") -> the
 * (name, labels) heads gave for it. heads maps a key to what parsing that key gives, so a
 * remembered entry stays right after heads forgets it; the memo is kept for one heads dict
 * (another empties it) and bounded as heads is. Looking a key up here needs no str made
 * from the page and no siphash of it: 147 of a vLLM page's lines each scrape. */
typedef struct {
    uint64_t hash;
    Py_ssize_t len;
    char *bytes;
    PyObject *known; /* strong */
} MemoSlot;

typedef struct {
    MemoSlot *slots;
    size_t mask, used;
    PyObject *heads; /* strong: the dict the entries came from */
} Memo;

#define MEMO_MAX 8192 /* entries, as parser._HEADS_MAX */


static void memo_clear(Memo *memo) {
    if (memo->slots != NULL) {
        for (size_t i = 0; i <= memo->mask; i++) {
            PyMem_Free(memo->slots[i].bytes);
            Py_XDECREF(memo->slots[i].known);
        }
        PyMem_Free(memo->slots);
    }
    memo->slots = NULL;
    memo->mask = memo->used = 0;
    Py_CLEAR(memo->heads);
}

/* The slot for the key: its entry, or the empty slot where it would go. */
static MemoSlot *memo_slot(const Memo *memo, const unsigned char *p, Py_ssize_t n, uint64_t h) {
    for (size_t i = (size_t)h & memo->mask;; i = (i + 1) & memo->mask) {
        MemoSlot *s = &memo->slots[i];
        if (s->bytes == NULL || (s->hash == h && s->len == n && memcmp(s->bytes, p, (size_t)n) == 0)) return s;
    }
}

/* Remembers key -> known (a new reference taken). -1 only when out of memory. */
static int memo_put(Memo *memo, const unsigned char *p, Py_ssize_t n, uint64_t h, PyObject *known) {
    if (memo->used >= MEMO_MAX) {
        PyObject *heads = Py_NewRef(memo->heads);
        memo_clear(memo);
        memo->heads = heads;
    }
    if (memo->slots == NULL || (memo->used + 1) * 2 > memo->mask + 1) { /* grow, half full at most */
        size_t size = memo->slots == NULL ? 256 : (memo->mask + 1) * 2;
        MemoSlot *slots = PyMem_Calloc(size, sizeof(MemoSlot));
        if (slots == NULL) return -1;
        Memo grown = {slots, size - 1, memo->used, memo->heads};
        if (memo->slots != NULL) {
            for (size_t i = 0; i <= memo->mask; i++) {
                MemoSlot *old = &memo->slots[i];
                if (old->bytes != NULL) *memo_slot(&grown, (const unsigned char *)old->bytes, old->len, old->hash) = *old;
            }
            PyMem_Free(memo->slots);
        }
        memo->slots = slots;
        memo->mask = size - 1;
    }
    char *bytes = PyMem_Malloc((size_t)n + 1);
    if (bytes == NULL) return -1;
    memcpy(bytes, p, (size_t)n);
    MemoSlot *s = memo_slot(memo, p, n, h);
    s->hash = h;
    s->len = n;
    s->bytes = bytes;
    s->known = Py_NewRef(known);
    memo->used++;
    return 0;
}

typedef struct {
    PyObject_HEAD
    NameSet wanted;
    NameSet families;
    int wide_names; /* a name past U+00FF was left out: pages past Latin-1 are not read */
    Memo memo;
} Finder;

static void finder_dealloc(Finder *self) {
    nameset_free(&self->wanted);
    nameset_free(&self->families);
    memo_clear(&self->memo);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int finder_init(Finder *self, PyObject *args, PyObject *kwds) {
    static char *keywords[] = {"wanted", "families", NULL};
    PyObject *wanted, *families;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:Finder", keywords, &wanted, &families)) return -1;
    nameset_free(&self->wanted);
    nameset_free(&self->families);
    memo_clear(&self->memo);
    /* A sample's name ends at "{", a blank, a tab or the line's end (and a "}" in one would
     * read as a label set's end); a family's on a # TYPE line at a blank, a tab, a quote or
     * the line's end. */
    self->wide_names = 0;
    if (nameset_fill(&self->wanted, wanted, "{} \t\n", &self->wide_names) < 0) return -1;
    if (nameset_fill(&self->families, families, "\" \t\n", &self->wide_names) < 0) return -1;
    return 0;
}

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static inline int lower_is(unsigned char c, char want) { return (c | 0x20) == want; }

/* Whether [p, end) is one value in Go's float grammar as the parser's _VALUE spells it:
 * [+-]?(digits[.digits*][exponent] | .digits[exponent] | inf | infinity), or nan unsigned. */
static int is_value(const unsigned char *p, const unsigned char *end) {
    if (end - p == 3 && lower_is(p[0], 'n') && lower_is(p[1], 'a') && lower_is(p[2], 'n')) return 1;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p == end) return 0;
    if (is_digit(*p) || *p == '.') {
        if (is_digit(*p)) {
            while (p < end && is_digit(*p)) p++;
            if (p < end && *p == '.') {
                p++;
                while (p < end && is_digit(*p)) p++;
            }
        } else {
            p++; /* "." needs a digit after it */
            if (p == end || !is_digit(*p)) return 0;
            while (p < end && is_digit(*p)) p++;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
            const unsigned char *q = p + 1;
            if (q < end && (*q == '+' || *q == '-')) q++;
            if (q < end && is_digit(*q)) {
                while (q < end && is_digit(*q)) q++;
                p = q;
            }
        }
        return p == end;
    }
    Py_ssize_t n = end - p;
    if (n != 3 && n != 8) return 0;
    if (!(lower_is(p[0], 'i') && lower_is(p[1], 'n') && lower_is(p[2], 'f'))) return 0;
    return n == 3 || (lower_is(p[3], 'i') && lower_is(p[4], 'n') && lower_is(p[5], 'i') &&
                      lower_is(p[6], 't') && lower_is(p[7], 'y'));
}

/* One found line: the six groups, "" where a group took no part. */
static int append(PyObject *out, PyObject *text, PyObject *empty, Py_ssize_t spans[6][2]) {
    PyObject *tuple = PyTuple_New(6);
    if (tuple == NULL) return -1;
    for (int g = 0; g < 6; g++) {
        PyObject *item;
        if (spans[g][1] > spans[g][0]) {
            item = PyUnicode_Substring(text, spans[g][0], spans[g][1]);
            if (item == NULL) {
                Py_DECREF(tuple);
                return -1;
            }
        } else {
            item = Py_NewRef(empty);
        }
        PyTuple_SET_ITEM(tuple, g, item);
    }
    int failed = PyList_Append(out, tuple);
    Py_DECREF(tuple);
    return failed;
}

enum { KEY, SAMPLE, VALUE, REST, TYPE, OTHER };

/* What one line [line, eol) is to the regular expression: the group it fills last (VALUE for
 * the usual sample line, REST, TYPE, OTHER), or -1 for a line it does not find; spans then
 * hold each group's [start, end) as offsets from base, empty for a group that took no part.
 * *unwanted is the length of the line's sample name where the line was not found for that
 * name alone (any line that starts with that name and then "{", " " or a tab is not found
 * either), else 0. */
static int classify(const Finder *self, const unsigned char *base, const unsigned char *line,
                    const unsigned char *eol, Py_ssize_t spans[6][2], Py_ssize_t *unwanted) {
    memset(spans, 0, sizeof(Py_ssize_t) * 12);
    *unwanted = 0;
    if (line == eol) return -1;
    unsigned char first = *line;
    if (first == '{' || first == ' ' || first == '\t' || first == '\r') {
        spans[OTHER][0] = line - base;
        spans[OTHER][1] = spans[OTHER][0] + 1;
        return OTHER;
    }
    if (first == '#') {
        /* #[ \t]*TYPE[ \t]+"?family"?[ \t] and the rest of the line */
        const unsigned char *p = line + 1;
        while (p < eol && (*p == ' ' || *p == '\t')) p++;
        if (!(eol - p > 4 && memcmp(p, "TYPE", 4) == 0 && (p[4] == ' ' || p[4] == '\t'))) return -1;
        p += 4;
        while (p < eol && (*p == ' ' || *p == '\t')) p++;
        if (p < eol && *p == '"') p++;
        const unsigned char *name = p;
        while (p < eol && *p != '"' && *p != ' ' && *p != '\t') p++;
        if (p == name || !nameset_contains(&self->families, name, p - name)) return -1;
        if (p < eol && *p == '"') p++;
        if (!(p < eol && (*p == ' ' || *p == '\t'))) return -1;
        spans[TYPE][0] = line - base;
        spans[TYPE][1] = eol - base;
        return TYPE;
    }
    const unsigned char *p = line;
    while (p < eol && *p != '{' && *p != ' ' && *p != '\t') p++;
    if (p == eol) return -1;
    if (!nameset_contains(&self->wanted, line, p - line)) {
        *unwanted = p - line;
        return -1;
    }
    const unsigned char *after = p; /* past the key: the name and its label set */
    if (*p == '{') {
        const unsigned char *close = eol;
        while (close > p && *(close - 1) != '}') close--;
        if (close > p + 1) after = close; /* "{" ... the line's last "}" */
    }
    spans[KEY][0] = spans[SAMPLE][0] = line - base;
    spans[SAMPLE][1] = p - base;
    spans[KEY][1] = after - base;
    if (after < eol && *after == ' ' && is_value(after + 1, eol)) {
        spans[VALUE][0] = after + 1 - base;
        spans[VALUE][1] = eol - base;
        return VALUE;
    }
    if (after > p || *after == '{' || *after == ' ' || *after == '\t') {
        spans[REST][0] = after - base; /* may be empty: "}" ends the line */
        spans[REST][1] = eol - base;
        return REST;
    }
    return -1;
}

/* The page as one byte a character: its own Latin-1 data, or, for a page with wider
 * characters (an em dash in a HELP text, say), a copy with NUL standing for each of them,
 * NUL-terminated, set in *copy for the caller to PyMem_Free. NUL decides nothing here as a
 * wider character decides nothing (neither is a character the scanner looks for, nor in a
 * name: names with NUL are refused), so every line is classified alike and the offsets are
 * the page's own. NULL with no exception set: a page this finder does not read (a wider
 * character where a name past U+00FF is wanted). */
static const unsigned char *page_bytes(const Finder *self, PyObject *text, Py_ssize_t *size,
                                       unsigned char **copy) {
    *copy = NULL;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) return NULL; /* a legacy string made ready (3.10, 3.11) */
#endif
    *size = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_1BYTE_KIND) return PyUnicode_1BYTE_DATA(text);
    if (self->wide_names) return NULL;
    const void *data = PyUnicode_DATA(text);
    unsigned char *bytes = PyMem_Malloc((size_t)*size + 1);
    if (bytes == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *size; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        bytes[i] = c > 0xFF ? 0 : (unsigned char)c;
    }
    bytes[*size] = 0;
    *copy = bytes;
    return bytes;
}

static PyObject *finder_findall(Finder *self, PyObject *text) {
    Py_ssize_t size;
    unsigned char *copy;
    const unsigned char *base = page_bytes(self, text, &size, &copy);
    if (base == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    const unsigned char *stop = base + size;
    PyObject *empty = PyUnicode_New(0, 0);
    PyObject *out = PyList_New(0);
    if (empty == NULL || out == NULL) goto fail;
    Py_ssize_t spans[6][2];
    for (const unsigned char *line = base; line <= stop;) {
        const unsigned char *eol = memchr(line, '\n', (size_t)(stop - line));
        if (eol == NULL) eol = stop;
        Py_ssize_t unwanted;
        if (classify(self, base, line, eol, spans, &unwanted) >= 0 && append(out, text, empty, spans) < 0) goto fail;
        line = eol + 1;
    }
    Py_DECREF(empty);
    PyMem_Free(copy);
    return out;
fail:
    Py_XDECREF(empty);
    Py_XDECREF(out);
    PyMem_Free(copy);
    return NULL;
}

/* [+-]?digits[.digits][e[+-]digits] read exactly without strtod where that is exact: at most
 * 19 digits making an integer m <= 2^53 and a power of ten p with |p| <= 22, both exact in a
 * double, so m * 10^p and m / 10^-p are each one correctly rounded operation (Clinger's fast
 * path, as Go's strconv and fast_float take it). A page's values are mostly such (counts,
 * "0.5", "1234.0", "1e+06"). 0 for any other token: the caller then converts it as float()
 * does. strtod's cost here is mostly setting the x87 control word around each call. */
static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int exact_value(const unsigned char *p, const unsigned char *end, double *value) {
    int negative = 0;
    if (p < end && (*p == '+' || *p == '-')) negative = *p++ == '-';
    uint64_t m = 0;
    int digits = 0, seen = 0;
    long power = 0;
    for (; p < end && is_digit(*p); p++, seen++) {
        if (m == 0 && *p == '0') continue; /* leading zeros count for nothing */
        if (++digits > 19) return 0;
        m = m * 10 + (uint64_t)(*p - '0');
    }
    if (p < end && *p == '.') {
        for (p++; p < end && is_digit(*p); p++, seen++) {
            power--;
            if (m == 0 && *p == '0') continue;
            if (++digits > 19) return 0;
            m = m * 10 + (uint64_t)(*p - '0');
        }
    }
    if (seen == 0) return 0; /* "inf", "nan", "." */
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int minus = 0;
        if (p < end && (*p == '+' || *p == '-')) minus = *p++ == '-';
        long e = 0;
        if (p == end || !is_digit(*p)) return 0;
        for (; p < end && is_digit(*p); p++) {
            if (e > 100000) return 0;
            e = e * 10 + (*p - '0');
        }
        power += minus ? -e : e;
    }
    if (p != end) return 0;
    double v;
    if (m == 0) {
        v = 0.0;
    } else {
        if (m > ((uint64_t)1 << 53) || power < -22 || power > 22) return 0;
        v = power >= 0 ? (double)m * POW10[power] : (double)m / POW10[-power];
    }
    *value = negative ? -v : v;
    return 1;
}

/* A value token as float() reads it (PyOS_string_to_double is float()'s own conversion); the
 * token is followed by "\n" or the string's terminating NUL, where the conversion stops. */
static int token_value(const unsigned char *start, const unsigned char *end, double *value) {
#if FLT_EVAL_METHOD == 0
    if (exact_value(start, end, value)) return 0;
#endif
    char *stopped = NULL;
    *value = PyOS_string_to_double((const char *)start, &stopped, NULL);
    if (*value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return (const unsigned char *)stopped == end ? 0 : -1;
}

/* read_known(text, heads, samples, max_found=-1, max_read=-1, known_types=None, types=None):
 * parser._read_found's loop, for a
 * page of which every found line is a usual sample line (name, label set, one blank, a value) whose text up to its "}"
 * is in heads (parser._HEADS: that text -> (name, labels)), or has no label set, or is a
 * wanted family's # TYPE line. Appends (the kept labels dict, shared and read-only, the value) to samples[name] in
 * the page's order and returns (lines read, whether a value may be NaN, ±Inf or -0, the TYPE
 * lines in order, but those put in `types` from `known_types`: see above). None, with samples left part-filled, on any other page: a line not in
 * heads, another form of line, a value out of float's range (1e309), a page page_bytes does
 * not read, more than max_found found lines or max_read sample lines (when not -1): work the caller's
 * readers would stop at (the clock, the sample cap) is not done here either. */
static PyObject *finder_read_known(Finder *self, PyObject *args) {
    PyObject *text, *heads, *samples, *known_types = NULL, *types_out = NULL;
    Py_ssize_t max_found = -1, max_read = -1;
    if (!PyArg_ParseTuple(args, "OO!O!|nnO!O!:read_known", &text, &PyDict_Type, &heads, &PyDict_Type, &samples,
                          &max_found, &max_read, &PyDict_Type, &known_types, &PyDict_Type, &types_out))
        return NULL;
    if ((known_types == NULL) != (types_out == NULL)) {
        PyErr_SetString(PyExc_TypeError, "read_known: known_types and types come together");
        return NULL;
    }
    Py_ssize_t size;
    unsigned char *copy;
    const unsigned char *base = page_bytes(self, text, &size, &copy);
    if (base == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    const unsigned char *stop = base + size;
    Memo *memo = &self->memo;
    if (memo->heads != heads) {
        memo_clear(memo);
        memo->heads = Py_NewRef(heads);
    }
    PyObject *types = PyList_New(0);
    if (types == NULL) {
        PyMem_Free(copy);
        return NULL;
    }
    Py_ssize_t read = 0, found = 0, spans[6][2];
    int unknown = 0;
    /* The last line's sample name where it was not wanted: a histogram's ~20 bucket lines
     * share their name, and a line that starts with it (then "{", " " or a tab) is passed over
     * with one memcmp instead of its name scanned and looked up (most of a vLLM page's lines
     * are buckets of families kvops does not read). */
    const unsigned char *passed = NULL;
    Py_ssize_t passed_len = 0;
    for (const unsigned char *line = base; line <= stop;) {
        const unsigned char *eol = memchr(line, '\n', (size_t)(stop - line));
        if (eol == NULL) eol = stop;
        if (passed != NULL && eol - line > passed_len && memcmp(line, passed, (size_t)passed_len) == 0 &&
            (line[passed_len] == '{' || line[passed_len] == ' ' || line[passed_len] == '\t')) {
            line = eol + 1;
            continue;
        }
        Py_ssize_t unwanted;
        int kind = classify(self, base, line, eol, spans, &unwanted);
        if (unwanted > 0) {
            passed = line;
            passed_len = unwanted;
        }
        line = eol + 1;
        if (kind < 0) continue;
        if (++found > max_found && max_found >= 0) goto give_up; /* the caller's reader stops sooner */
        if (kind == TYPE) {
            PyObject *type_line = PyUnicode_Substring(text, spans[TYPE][0], spans[TYPE][1]);
            if (type_line == NULL) goto fail;
            /* A line read before (known_types: line -> (name, type)) goes into types here, until
             * the first that was not: that one and those after it are the caller's, in order,
             * so that a family typed twice ends with its last line's type. */
            PyObject *was = known_types != NULL && PyList_GET_SIZE(types) == 0
                                ? PyDict_GetItemWithError(known_types, type_line)
                                : NULL; /* borrowed */
            int failed;
            if (was != NULL && PyTuple_CheckExact(was) && PyTuple_GET_SIZE(was) == 2) {
                Py_INCREF(was);
                failed = PyDict_SetItem(types_out, PyTuple_GET_ITEM(was, 0), PyTuple_GET_ITEM(was, 1));
                Py_DECREF(was);
            } else {
                failed = PyErr_Occurred() ? -1 : PyList_Append(types, type_line);
            }
            Py_DECREF(type_line);
            if (failed < 0) goto fail;
            continue;
        }
        if (kind != VALUE || (read == max_read && max_read >= 0)) goto give_up;
        const unsigned char *token = base + spans[VALUE][0], *token_end = base + spans[VALUE][1];
        double value;
        if (token_value(token, token_end, &value) < 0) goto give_up;
        if (strchr("+-iInN", *token) != NULL || value > DBL_MAX) { /* NaN, ±Inf, -0 or 1e309 */
            unsigned char last = *(token_end - 1);
            if (isinf(value) && strchr("fFyY", last) == NULL) goto give_up;
            unknown = 1;
        }
        PyObject *name, *labels;
        if (spans[KEY][1] == spans[SAMPLE][1]) { /* no label set */
            name = PyUnicode_Substring(text, spans[SAMPLE][0], spans[SAMPLE][1]);
            if (name == NULL) goto fail;
            labels = PyDict_New();
            if (labels == NULL) {
                Py_DECREF(name);
                goto fail;
            }
        } else {
            /* A page with characters past Latin-1 has NUL for each of them here: its keys are
             * not told apart by these bytes, so they are not remembered. */
            const unsigned char *key_bytes = base + spans[KEY][0];
            Py_ssize_t key_len = spans[KEY][1] - spans[KEY][0];
            uint64_t h = copy == NULL ? bytes_hash(key_bytes, key_len) : 0;
            MemoSlot *slot = copy == NULL && memo->slots != NULL ? memo_slot(memo, key_bytes, key_len, h) : NULL;
            PyObject *known = slot != NULL ? slot->known : NULL;
            if (known == NULL) {
                PyObject *key = PyUnicode_Substring(text, spans[KEY][0], spans[KEY][1]);
                if (key == NULL) goto fail;
                known = PyDict_GetItemWithError(heads, key);
                Py_DECREF(key);
                if (known == NULL) {
                    if (PyErr_Occurred()) goto fail;
                    goto give_up;
                }
                if (!PyTuple_Check(known) || PyTuple_GET_SIZE(known) != 2 ||
                    !PyDict_Check(PyTuple_GET_ITEM(known, 1)))
                    goto give_up;
                if (copy == NULL && memo_put(memo, key_bytes, key_len, h, known) < 0) {
                    PyErr_NoMemory();
                    goto fail;
                }
            }
            /* The kept dict itself, not a copy: a ParseResult's labels are read-only (parser.py). */
            name = Py_NewRef(PyTuple_GET_ITEM(known, 0));
            labels = Py_NewRef(PyTuple_GET_ITEM(known, 1));
        }
        PyObject *number = PyFloat_FromDouble(value);
        PyObject *pair = number == NULL ? NULL : PyTuple_Pack(2, labels, number);
        Py_XDECREF(number);
        Py_DECREF(labels);
        if (pair == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        PyObject *bucket = PyDict_GetItemWithError(samples, name); /* borrowed */
        int failed;
        if (bucket != NULL && PyList_CheckExact(bucket)) {
            failed = PyList_Append(bucket, pair);
        } else if (bucket == NULL && !PyErr_Occurred()) {
            PyObject *fresh = PyList_New(1);
            failed = fresh == NULL ? -1 : 0;
            if (fresh != NULL) {
                PyList_SET_ITEM(fresh, 0, Py_NewRef(pair));
                failed = PyDict_SetItem(samples, name, fresh);
                Py_DECREF(fresh);
            }
        } else {
            failed = -1;
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "samples must hold lists");
        }
        Py_DECREF(pair);
        Py_DECREF(name);
        if (failed < 0) goto fail;
        read++;
    }
    PyMem_Free(copy);
    return Py_BuildValue("(nNN)", read, PyBool_FromLong(unknown), types);
give_up:
    Py_DECREF(types);
    PyMem_Free(copy);
    Py_RETURN_NONE;
fail:
    Py_DECREF(types);
    PyMem_Free(copy);
    return NULL;
}

static PyMethodDef finder_methods[] = {
    {"findall", (PyCFunction)finder_findall, METH_O,
     "The found lines' groups, as the regular expression's findall over \"\\n\" + text gives them; "
     "None for a page with characters past U+00FF where a wanted name has one too."},
    {"read_known", (PyCFunction)finder_read_known, METH_VARARGS,
     "read_known(text, heads, samples, max_found=-1, max_read=-1, known_types=None, types=None): the page's "
     "samples into samples, "
     "where every found line "
     "is known; (read, maybe_unknown, type_lines), or None for the caller to read it with findall."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FinderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvops.exposition._linescan.Finder",
    .tp_basicsize = sizeof(Finder),
    .tp_dealloc = (destructor)finder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Finds a page's wanted sample lines and wanted families' # TYPE lines.",
    .tp_methods = finder_methods,
    .tp_init = (initproc)finder_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_linescan", "The wanted lines of a Prometheus text page, found in C.", -1, NULL,
};

PyMODINIT_FUNC PyInit__linescan(void) {
    if (PyType_Ready(&FinderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Finder", (PyObject *)&FinderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
