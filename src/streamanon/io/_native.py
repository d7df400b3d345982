"""The clean ``t,u,a`` lane's parser and writer as a C extension, built on first use and cached.

For three fields a line, one pass does what Arrow's CSV reader does in a general engine (split
lines and fields, parse each time, give users and values codes in order of first appearance)
at a fraction of the cost, or answers ``None`` when a line is not of its strict form (three
non-empty fields, none over ``max_len`` bytes, a time ``-?digits[.digits]``); a time is
``float(text)`` exactly (Clinger's fast path: digits that fit 53 bits over a power of ten up
to 10**22, one correctly rounded division; else Python's own parser). Its writer writes a
published row as its line up to the value, then the value. :func:`load` builds it with
:mod:`streamanon._cbuild`; ``None`` (the reason in :data:`unavailable`) means Arrow's lane
serves. Where it is used: :mod:`streamanon.io.lane`.

Design: docs/design/pipeline.md
"""

from __future__ import annotations

from types import ModuleType

from streamanon import _cbuild

#: why the C parser is not in use (``None``: not tried yet or loaded)
unavailable: str | None = None

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
    1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* the distinct texts of one column: an open-addressing table of slots, and the texts
   themselves copied into a pool (comparisons then stay in the cache, not in the chunk) */
typedef struct {
    uint64_t hash;
    int64_t at; /* the text's offset in the pool */
    int32_t len;
    int32_t code; /* -1: empty slot */
} Slot;

typedef struct {
    Slot *slots;
    int64_t cap, n;
    char *pool;
    int64_t pool_len, pool_cap;
    int64_t *first; /* per code, its text's offset in the pool */
    int32_t *first_len;
} Names;

static int names_init(Names *t, int64_t cap)
{
    t->cap = cap;
    t->n = 0;
    t->pool_len = 0;
    t->pool_cap = cap * 16;
    t->slots = malloc(sizeof(Slot) * t->cap);
    t->pool = malloc((size_t)t->pool_cap);
    t->first = malloc(sizeof(int64_t) * t->cap / 2);
    t->first_len = malloc(sizeof(int32_t) * t->cap / 2);
    if (!t->slots || !t->pool || !t->first || !t->first_len)
        return 0;
    for (int64_t s = 0; s < t->cap; s++)
        t->slots[s].code = -1;
    return 1;
}

static void names_free(Names *t)
{
    free(t->slots); free(t->pool); free(t->first); free(t->first_len);
}

static int names_grow(Names *t)
{
    int64_t cap = t->cap * 2;
    Slot *slots = malloc(sizeof(Slot) * cap);
    int64_t *first = realloc(t->first, sizeof(int64_t) * cap / 2);
    if (first != NULL)
        t->first = first;
    int32_t *first_len = realloc(t->first_len, sizeof(int32_t) * cap / 2);
    if (first_len != NULL)
        t->first_len = first_len;
    if (!slots || !first || !first_len) {
        free(slots);
        return 0;
    }
    for (int64_t s = 0; s < cap; s++)
        slots[s].code = -1;
    for (int64_t s = 0; s < t->cap; s++) {
        if (t->slots[s].code < 0)
            continue;
        uint64_t h = t->slots[s].hash & (uint64_t)(cap - 1);
        while (slots[h].code >= 0)
            h = (h + 1) & (uint64_t)(cap - 1);
        slots[h] = t->slots[s];
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 1;
}

#define FNV_START 1469598103934665603ULL
#define FNV_STEP(h, ch) (((h) ^ (unsigned char)(ch)) * 1099511628211ULL)

/* the code of p[0:len], whose FNV-1a hash is h (a new code at its first appearance); -1: out
   of memory */
static int32_t names_code(Names *t, const char *p, int32_t len, uint64_t h)
{
    h ^= h >> 29;
    uint64_t s = h & (uint64_t)(t->cap - 1);
    Slot *slots = t->slots;
    while (slots[s].code >= 0) {
        if (slots[s].hash == h && slots[s].len == len
                && memcmp(t->pool + slots[s].at, p, (size_t)len) == 0)
            return slots[s].code;
        s = (s + 1) & (uint64_t)(t->cap - 1);
    }
    if (t->pool_len + len > t->pool_cap) {
        int64_t cap = t->pool_cap;
        while (t->pool_len + len > cap)
            cap *= 2;
        char *pool = realloc(t->pool, (size_t)cap);
        if (pool == NULL)
            return -1;
        t->pool = pool;
        t->pool_cap = cap;
    }
    memcpy(t->pool + t->pool_len, p, (size_t)len);
    int32_t c = (int32_t)t->n;
    slots[s].hash = h;
    slots[s].at = t->pool_len;
    slots[s].len = len;
    slots[s].code = c;
    t->first[c] = t->pool_len;
    t->first_len[c] = len;
    t->pool_len += len;
    t->n++;
    if (2 * t->n >= t->cap && !names_grow(t))
        return -1;
    return c;
}

static PyObject *names_list(Names *t)
{
    PyObject *out = PyList_New((Py_ssize_t)t->n);
    if (out == NULL)
        return NULL;
    for (int64_t c = 0; c < t->n; c++) {
        PyObject *s = PyUnicode_DecodeUTF8(t->pool + t->first[c], t->first_len[c], "strict");
        if (s == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)c, s);
    }
    return out;
}

/* float(text) for text = -?digits[.digits] (at least one digit); 0 when not of that form */
static int parse_number(const char *p, int64_t len, double *out)
{
    int64_t i = 0;
    int neg = 0;
    if (len > 0 && p[0] == '-') {
        neg = 1;
        i = 1;
    }
    uint64_t m = 0;
    int sig = 0, frac = 0, digits = 0, dot = 0;
    for (; i < len; i++) {
        char ch = p[i];
        if (ch >= '0' && ch <= '9') {
            digits++;
            if (dot)
                frac++;
            if (m == 0 && ch == '0')
                continue;
            if (++sig <= 19)
                m = m * 10 + (uint64_t)(ch - '0');
        } else if (ch == '.' && !dot) {
            dot = 1;
        } else {
            return 0;
        }
    }
    if (digits == 0)
        return 0;
    if (sig <= 15 && frac <= 22) {
        double v = (double)m / POW10[frac];
        *out = neg ? -v : v;
        return 1;
    }
    char buf[80];
    if (len >= (int64_t)sizeof buf)
        return 0;
    memcpy(buf, p, (size_t)len);
    buf[len] = 0;
    double v = PyOS_string_to_double(buf, NULL, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

/* parse_tua(data, delimiter, max_len) -> None | (t, t_offsets, t_chars, u_codes, u_names,
   a_codes, a_names, line_starts, value_starts): see the module docstring */
static PyObject *parse_tua(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "parse_tua takes 3 arguments");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) != 0)
        return NULL;
    long delim = PyLong_AsLong(args[1]), max_len = PyLong_AsLong(args[2]);
    PyObject *result = NULL, *o_t = NULL, *o_toff = NULL, *o_tchars = NULL, *o_u = NULL,
             *o_a = NULL, *o_un = NULL, *o_an = NULL, *o_ls = NULL, *o_as = NULL;
    Names un, an;
    int names_ok = names_init(&un, 1024) & names_init(&an, 1024);
    const char *data = (const char *)view.buf;
    int64_t size = (int64_t)view.len;
    if (PyErr_Occurred() || !names_ok)
        goto done;
    if (size == 0 || size >= INT32_MAX || data[size - 1] == '\n' || delim < 0 || delim > 127
            || delim == '\n' || max_len < 1) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    npy_intp n = 1;
    for (const char *q = data; (q = memchr(q, '\n', (size_t)(data + size - q))) != NULL; q++)
        n++;
    npy_intp dims[1] = {n}, dims1[1] = {n + 1};
    o_t = PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    o_toff = PyArray_SimpleNew(1, dims1, NPY_INT32);
    o_u = PyArray_SimpleNew(1, dims, NPY_INT32);
    o_a = PyArray_SimpleNew(1, dims, NPY_INT32);
    o_ls = PyArray_SimpleNew(1, dims, NPY_INT32);
    o_as = PyArray_SimpleNew(1, dims, NPY_INT32);
    char *tchars = malloc((size_t)size);
    if (!o_t || !o_toff || !o_u || !o_a || !o_ls || !o_as || !tchars) {
        free(tchars);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    double *t = (double *)PyArray_DATA((PyArrayObject *)o_t);
    int32_t *toff = (int32_t *)PyArray_DATA((PyArrayObject *)o_toff);
    int32_t *uc = (int32_t *)PyArray_DATA((PyArrayObject *)o_u);
    int32_t *ac = (int32_t *)PyArray_DATA((PyArrayObject *)o_a);
    int32_t *ls = (int32_t *)PyArray_DATA((PyArrayObject *)o_ls);
    int32_t *as = (int32_t *)PyArray_DATA((PyArrayObject *)o_as);
    int64_t tlen = 0;
    int clean = 1;
    char d = (char)delim;
    toff[0] = 0;
    const char *eod = data + size;
    const char *p = data;
    for (npy_intp row = 0; row < n && clean; row++) {
        /* one pass over the line: the time's digits, then each name with its hash */
        const char *line = p;
        uint64_t m = 0;
        int sig = 0, frac = 0, digits = 0, dot = 0, neg = 0;
        if (p < eod && *p == '-') {
            neg = 1;
            p++;
        }
        for (; p < eod && *p != d; p++) {
            char ch = *p;
            if (ch >= '0' && ch <= '9') {
                digits++;
                frac += dot;
                if (m == 0 && ch == '0')
                    continue;
                if (++sig <= 19)
                    m = m * 10 + (uint64_t)(ch - '0');
            } else if (ch == '.' && !dot) {
                dot = 1;
            } else {
                clean = 0;
                break;
            }
        }
        if (!clean || p == eod || digits == 0) {
            clean = 0;
            break;
        }
        int64_t l0 = p - line;
        if (sig <= 15 && frac <= 22) {
            double v = (double)m / POW10[frac];
            t[row] = neg ? -v : v;
        } else if (!parse_number(line, l0, &t[row])) {
            clean = 0;
            break;
        }
        const char *f1 = ++p;
        uint64_t h1 = FNV_START;
        for (; p < eod && *p != d; p++) {
            if (*p == '\n') {
                clean = 0;
                break;
            }
            h1 = FNV_STEP(h1, *p);
        }
        if (!clean || p == eod) {
            clean = 0;
            break;
        }
        int64_t l1 = p - f1;
        const char *f2 = ++p;
        uint64_t h2 = FNV_START;
        for (; p < eod && *p != '\n'; p++) {
            if (*p == d) {
                clean = 0;
                break;
            }
            h2 = FNV_STEP(h2, *p);
        }
        int64_t l2 = p - f2;
        if (!clean || l1 < 1 || l2 < 1 || l1 > max_len || l2 > max_len) {
            clean = 0;
            break;
        }
        memcpy(tchars + tlen, line, (size_t)l0);
        tlen += l0;
        toff[row + 1] = (int32_t)tlen;
        int32_t cu = names_code(&un, f1, (int32_t)l1, h1);
        int32_t ca = names_code(&an, f2, (int32_t)l2, h2);
        if (cu < 0 || ca < 0) {
            free(tchars);
            PyErr_NoMemory();
            goto done;
        }
        uc[row] = cu;
        ac[row] = ca;
        ls[row] = (int32_t)(line - data);
        as[row] = (int32_t)(f2 - data);
        p++; /* past the newline (or the end) */
    }
    if (!clean) {
        free(tchars);
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    o_tchars = PyBytes_FromStringAndSize(tchars, (Py_ssize_t)tlen);
    free(tchars);
    if (o_tchars == NULL)
        goto done;
    o_un = names_list(&un);
    o_an = o_un ? names_list(&an) : NULL;
    if (o_un == NULL || o_an == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {  /* not UTF-8: not clean */
            PyErr_Clear();
            result = Py_None;
            Py_INCREF(result);
        }
        goto done;
    }
    result = PyTuple_Pack(9, o_t, o_toff, o_tchars, o_u, o_un, o_a, o_an, o_ls, o_as);
done:
    Py_XDECREF(o_t); Py_XDECREF(o_toff); Py_XDECREF(o_tchars); Py_XDECREF(o_u);
    Py_XDECREF(o_a); Py_XDECREF(o_un); Py_XDECREF(o_an); Py_XDECREF(o_ls); Py_XDECREF(o_as);
    names_free(&un);
    names_free(&an);
    PyBuffer_Release(&view);
    return result;
}

/* parse_rows(data, delimiter, numeric, max_line) -> None | (starts, columns): the lines of
   data (no final newline), each of len(numeric) fields; a column whose byte in numeric is
   nonzero as float64 numbers (the strict form of the time above), any other as (int32 codes,
   names); starts: where each line starts (int64). None when a line is blank or longer than
   max_line bytes, has another number of fields, a number not of that form or a name not UTF-8
   (Arrow's reader then tries). */
static PyObject *parse_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "parse_rows takes 4 arguments");
        return NULL;
    }
    Py_buffer view, kinds;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) != 0)
        return NULL;
    if (PyObject_GetBuffer(args[2], &kinds, PyBUF_SIMPLE) != 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    long delim = PyLong_AsLong(args[1]), max_line = PyLong_AsLong(args[3]);
    const char *data = (const char *)view.buf, *numeric = (const char *)kinds.buf;
    int64_t size = (int64_t)view.len, ncols = (int64_t)kinds.len;
    PyObject *result = NULL, *o_starts = NULL, *columns = NULL;
    Names *names = NULL;
    PyObject **arrays = NULL;
    if (PyErr_Occurred())
        goto done;
    if (size == 0 || data[size - 1] == '\n' || delim < 0 || delim > 127 || delim == '\n'
            || ncols < 1 || ncols > 65536 || max_line < 1) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    npy_intp n = 1;
    for (const char *q = data; (q = memchr(q, '\n', (size_t)(data + size - q))) != NULL; q++)
        n++;
    npy_intp dims[1] = {n};
    o_starts = PyArray_SimpleNew(1, dims, NPY_INT64);
    names = calloc((size_t)ncols, sizeof(Names));
    arrays = calloc((size_t)ncols, sizeof(PyObject *));
    if (o_starts == NULL || names == NULL || arrays == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    for (int64_t c = 0; c < ncols; c++) {
        arrays[c] = PyArray_SimpleNew(1, dims, numeric[c] ? NPY_FLOAT64 : NPY_INT32);
        if (arrays[c] == NULL || (!numeric[c] && !names_init(&names[c], 64))) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            goto done;
        }
    }
    int64_t *starts = (int64_t *)PyArray_DATA((PyArrayObject *)o_starts);
    const char *p = data, *eod = data + size;
    char d = (char)delim;
    int clean = 1;
    for (npy_intp row = 0; row < n && clean; row++) {
        const char *line = p;
        starts[row] = line - data;
        for (int64_t c = 0; c < ncols; c++) {
            const char *f = p;
            uint64_t h = FNV_START;
            if (numeric[c]) {
                while (p < eod && *p != d && *p != '\n')
                    p++;
            } else {
                while (p < eod && *p != d && *p != '\n') {
                    h = FNV_STEP(h, *p);
                    p++;
                }
            }
            int last = c == ncols - 1;
            /* a field ends at the delimiter (not the last) or at the line's end (the last) */
            if (last ? (p < eod && *p == d) : (p == eod || *p != d)) {
                clean = 0;
                break;
            }
            int64_t len = p - f;
            if (numeric[c]) {
                double *x = (double *)PyArray_DATA((PyArrayObject *)arrays[c]);
                if (len < 1 || !parse_number(f, len, &x[row])) {
                    clean = 0;
                    break;
                }
            } else {
                int32_t *codes = (int32_t *)PyArray_DATA((PyArrayObject *)arrays[c]);
                int32_t code = names_code(&names[c], f, (int32_t)len, h);
                if (code < 0) {
                    PyErr_NoMemory();
                    goto done;
                }
                codes[row] = code;
            }
            p++; /* past the delimiter, the newline or the end */
        }
        if (clean && (p - 1 - line < 1 || p - 1 - line > max_line))
            clean = 0;
    }
    if (!clean) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    columns = PyList_New((Py_ssize_t)ncols);
    if (columns == NULL)
        goto done;
    for (int64_t c = 0; c < ncols; c++) {
        PyObject *col;
        if (numeric[c]) {
            col = arrays[c];
            Py_INCREF(col);
        } else {
            PyObject *list = names_list(&names[c]);
            if (list == NULL) {
                if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {  /* not clean */
                    PyErr_Clear();
                    result = Py_None;
                    Py_INCREF(result);
                }
                goto done;
            }
            col = PyTuple_Pack(2, arrays[c], list);
            Py_DECREF(list);
            if (col == NULL)
                goto done;
        }
        PyList_SET_ITEM(columns, (Py_ssize_t)c, col);
    }
    result = PyTuple_Pack(2, o_starts, columns);
done:
    Py_XDECREF(o_starts);
    Py_XDECREF(columns);
    if (arrays != NULL) {
        for (int64_t c = 0; c < ncols; c++)
            Py_XDECREF(arrays[c]);
        free(arrays);
    }
    if (names != NULL) {
        for (int64_t c = 0; c < ncols; c++)
            if (!numeric[c])
                names_free(&names[c]);
        free(names);
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&kinds);
    return result;
}

static int vec(PyObject *o, int type, const char *name)
{
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != type
            || PyArray_NDIM((PyArrayObject *)o) != 1
            || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous vector of %s", name,
                     type == NPY_INT32 ? "int32" : "int64");
        return 0;
    }
    return 1;
}

/* write_rows(data, line_starts, value_starts, idx, codes, names, name_offsets) -> bytes:
   per row i = idx[j], the line's bytes up to its value (data[line_starts[i]:value_starts[i]])
   then the published value names[name_offsets[codes[j]]:name_offsets[codes[j] + 1]] and a
   newline */
static PyObject *write_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "write_rows takes 7 arguments");
        return NULL;
    }
    if (!vec(args[1], NPY_INT32, "line_starts") || !vec(args[2], NPY_INT32, "value_starts")
            || !vec(args[3], NPY_INT64, "idx") || !vec(args[4], NPY_INT64, "codes")
            || !vec(args[6], NPY_INT64, "name_offsets"))
        return NULL;
    Py_buffer data, names;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) != 0)
        return NULL;
    if (PyObject_GetBuffer(args[5], &names, PyBUF_SIMPLE) != 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *out = NULL;
    npy_intp n = PyArray_DIM((PyArrayObject *)args[1], 0);
    npy_intp k = PyArray_DIM((PyArrayObject *)args[3], 0);
    npy_intp m = PyArray_DIM((PyArrayObject *)args[6], 0) - 1;
    const int32_t *ls = (const int32_t *)PyArray_DATA((PyArrayObject *)args[1]);
    const int32_t *vs = (const int32_t *)PyArray_DATA((PyArrayObject *)args[2]);
    const int64_t *idx = (const int64_t *)PyArray_DATA((PyArrayObject *)args[3]);
    const int64_t *codes = (const int64_t *)PyArray_DATA((PyArrayObject *)args[4]);
    const int64_t *off = (const int64_t *)PyArray_DATA((PyArrayObject *)args[6]);
    const char *src = (const char *)data.buf, *blob = (const char *)names.buf;
    int64_t total = 0;
    if (PyArray_DIM((PyArrayObject *)args[2], 0) != n
            || PyArray_DIM((PyArrayObject *)args[4], 0) != k || m < 0
            || off[m] > (int64_t)names.len) {
        PyErr_SetString(PyExc_ValueError, "write_rows: arrays of inconsistent shapes");
        goto done;
    }
    for (npy_intp j = 0; j < k; j++) {
        int64_t i = idx[j], c = codes[j];
        if (i < 0 || i >= n || c < 0 || c >= m || ls[i] < 0 || vs[i] < ls[i]
                || vs[i] > (int64_t)data.len || off[c] < 0 || off[c] > off[c + 1]
                || off[c + 1] > (int64_t)names.len) {
            PyErr_SetString(PyExc_ValueError, "write_rows: a row or code out of range");
            goto done;
        }
        total += (int64_t)(vs[i] - ls[i]) + (off[c + 1] - off[c]) + 1;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL)
        goto done;
    char *w = PyBytes_AS_STRING(out);
    for (npy_intp j = 0; j < k; j++) {
        int64_t i = idx[j], c = codes[j];
        size_t head = (size_t)(vs[i] - ls[i]), tail = (size_t)(off[c + 1] - off[c]);
        memcpy(w, src + ls[i], head);
        w += head;
        memcpy(w, blob + off[c], tail);
        w += tail;
        *w++ = '\n';
    }
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&names);
    return out;
}

/* the bytes of a plain field (compact ASCII str, no comma, quote or line break), or NULL */
static const char *plain_field(PyObject *o, Py_ssize_t *len)
{
    if (!PyUnicode_CheckExact(o) || !PyUnicode_IS_COMPACT_ASCII(o))
        return NULL;
    const char *p = (const char *)PyUnicode_1BYTE_DATA(o);
    Py_ssize_t n = PyUnicode_GET_LENGTH(o);
    for (Py_ssize_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == ',' || ch == '"' || ch == '\n' || ch == '\r')
            return NULL;
    }
    *len = n;
    return p;
}

/* class_lines(rows, picks, pieces) -> str | None: per row (a tuple of fields), pieces[0],
   row[picks[0]], pieces[1], ..., row[picks[k-1]], pieces[k] and a newline; None when a
   picked field is not plain ASCII text without comma, quote or line break, or a piece is
   not ASCII (the caller then writes the rows another way) */
static PyObject *class_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])
            || !PyTuple_CheckExact(args[2])
            || PyTuple_GET_SIZE(args[2]) != PyTuple_GET_SIZE(args[1]) + 1) {
        PyErr_SetString(PyExc_TypeError,
                        "class_lines takes a list of tuples, k ints and k + 1 strs");
        return NULL;
    }
    PyObject *rows = args[0], *picks = args[1], *pieces = args[2];
    Py_ssize_t n = PyList_GET_SIZE(rows), k = PyTuple_GET_SIZE(picks);
    Py_ssize_t at[64];
    if (k > 64)
        Py_RETURN_NONE;
    Py_ssize_t fixed = 1;  /* the newline */
    for (Py_ssize_t j = 0; j <= k; j++) {
        PyObject *piece = PyTuple_GET_ITEM(pieces, j);
        if (!PyUnicode_CheckExact(piece) || !PyUnicode_IS_COMPACT_ASCII(piece))
            Py_RETURN_NONE;
        fixed += PyUnicode_GET_LENGTH(piece);
        if (j < k) {
            at[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(picks, j));
            if (at[j] < 0) {
                if (PyErr_Occurred())
                    return NULL;
                Py_RETURN_NONE;
            }
        }
    }
    Py_ssize_t total = 0, len;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(row))
            Py_RETURN_NONE;
        total += fixed;
        for (Py_ssize_t j = 0; j < k; j++) {
            if (at[j] >= PyTuple_GET_SIZE(row)
                    || plain_field(PyTuple_GET_ITEM(row, at[j]), &len) == NULL)
                Py_RETURN_NONE;
            total += len;
        }
    }
    PyObject *out = PyUnicode_New(total, 127);
    if (out == NULL)
        return NULL;
    char *w = (char *)PyUnicode_1BYTE_DATA(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        for (Py_ssize_t j = 0; j <= k; j++) {
            PyObject *piece = PyTuple_GET_ITEM(pieces, j);
            len = PyUnicode_GET_LENGTH(piece);
            memcpy(w, PyUnicode_1BYTE_DATA(piece), (size_t)len);
            w += len;
            if (j < k) {
                PyObject *f = PyTuple_GET_ITEM(row, at[j]);
                len = PyUnicode_GET_LENGTH(f);
                memcpy(w, PyUnicode_1BYTE_DATA(f), (size_t)len);
                w += len;
            }
        }
        *w++ = '\n';
    }
    return out;
}

static PyMethodDef methods[] = {
    {"parse_tua", (PyCFunction)(void (*)(void))parse_tua, METH_FASTCALL,
     "A clean chunk of t,u,a lines as columns, or None (see streamanon.io._native)."},
    {"parse_rows", (PyCFunction)(void (*)(void))parse_rows, METH_FASTCALL,
     "A clean block of general CSV rows as columns, or None (see streamanon.io._native)."},
    {"write_rows", (PyCFunction)(void (*)(void))write_rows, METH_FASTCALL,
     "Chosen rows of a parsed chunk, each with its published value, as CSV lines."},
    {"class_lines", (PyCFunction)(void (*)(void))class_lines, METH_FASTCALL,
     "A released class's rows as CSV lines: picked plain fields between fixed pieces."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_io_native", "The clean t,u,a lane's parser.", -1, methods
};

PyMODINIT_FUNC PyInit__io_native(void)
{
    import_array();
    return PyModule_Create(&moduledef);
}
"""


def load() -> ModuleType | None:
    """The compiled module (built first when the cache does not hold it), or ``None`` with
    the reason in :data:`unavailable` (see :func:`streamanon._cbuild.load`)."""
    global unavailable
    module, unavailable = _cbuild.load("io", "_io_native", SOURCE)
    return module
