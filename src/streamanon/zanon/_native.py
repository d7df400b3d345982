"""z-anonymity's window counts as a C extension, built on first use and cached.

:func:`streamanon.zanon.operator._window_counts_numpy` answers with sorts and searches over
whole arrays (about ten passes); this is the same function as one pass in stream order,
about three times faster: per value, a queue of its rows in stream order (the rows leave it
once they are more than Δt old) and a count of the users whose latest row is still in it;
per (value, user) pair, its latest row, in a hash table. A row's count is its value's count
once its own row is in. The tests hold the two equal on random and real traces.
:func:`load` builds it with :mod:`streamanon._cbuild`; ``None`` (the reason in
:data:`unavailable`) means the numpy version serves.

Design: docs/design/zanon.md
"""

from __future__ import annotations

from types import ModuleType

from streamanon import _cbuild

#: why the C kernel is not in use (``None``: not tried yet or loaded)
unavailable: str | None = None

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SUPERSEDED 1 /* a later row of the same (value, user) pair came */
#define EXPIRED 2    /* more than delta_t older than a later row of its value */

static int vec(PyObject *o, int type, npy_intp n, const char *name)
{
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != type
            || PyArray_NDIM((PyArrayObject *)o) != 1
            || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)
            || (n >= 0 && PyArray_DIM((PyArrayObject *)o, 0) != n)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous %s vector of the rows' "
                     "length", name, type == NPY_FLOAT64 ? "float64" : "int64");
        return 0;
    }
    return 1;
}

/* window_counts(vc, uc, t, delta_t, now) -> (counts, keep): see the module docstring */
static PyObject *window_counts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "window_counts takes 5 arguments");
        return NULL;
    }
    if (!vec(args[0], NPY_INT64, -1, "vc"))
        return NULL;
    npy_intp r = PyArray_DIM((PyArrayObject *)args[0], 0);
    if (!vec(args[1], NPY_INT64, r, "uc") || !vec(args[2], NPY_FLOAT64, r, "t"))
        return NULL;
    double dt = PyFloat_AsDouble(args[3]);
    if (dt == -1.0 && PyErr_Occurred())
        return NULL;
    double now = PyFloat_AsDouble(args[4]);
    if (now == -1.0 && PyErr_Occurred())
        return NULL;
    const int64_t *vc = (const int64_t *)PyArray_DATA((PyArrayObject *)args[0]);
    const int64_t *uc = (const int64_t *)PyArray_DATA((PyArrayObject *)args[1]);
    const double *t = (const double *)PyArray_DATA((PyArrayObject *)args[2]);
    int64_t nv = 0, nu = 0;
    for (npy_intp i = 0; i < r; i++) {
        if (vc[i] < 0 || uc[i] < 0 || vc[i] >= INT32_MAX || uc[i] >= INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "window_counts: codes must be in [0, 2**31 - 1)");
            return NULL;
        }
        if (vc[i] >= nv)
            nv = vc[i] + 1;
        if (uc[i] >= nu)
            nu = uc[i] + 1;
    }
    npy_intp dims[1] = {r};
    PyObject *o_counts = PyArray_SimpleNew(1, dims, NPY_INT64);
    if (o_counts == NULL)
        return NULL;
    int64_t *counts = (int64_t *)PyArray_DATA((PyArrayObject *)o_counts);
    /* the hash table of pairs (key, latest row), grown to keep it at most half full: compact
       (32-bit keys and rows, 8 bytes a slot) whenever the codes allow, which halves the cache
       misses of its random probes */
    int compact = (uint64_t)nv * (uint64_t)nu < UINT32_MAX && r < INT32_MAX;
    uint64_t cap = 1 << 16;
    int shift = 48;
    size_t rows = r ? (size_t)r : 1;
    int64_t *front = malloc(sizeof(int64_t) * (size_t)(nv ? nv : 1));
    int64_t *back = malloc(sizeof(int64_t) * (size_t)(nv ? nv : 1));
    int64_t *count = calloc((size_t)(nv ? nv : 1), sizeof(int64_t));
    int64_t *next = malloc(sizeof(int64_t) * rows);
    uint8_t *flags = calloc(rows, 1);
    void *table = malloc((compact ? 8 : 16) * cap);
    if (!front || !back || !count || !next || !flags || !table) {
        free(front); free(back); free(count); free(next); free(flags); free(table);
        Py_DECREF(o_counts);
        return PyErr_NoMemory();
    }
    npy_intp kept = 0;
    int failed = 0;
    uint64_t used = 0;
    Py_BEGIN_ALLOW_THREADS
    memset(front, 0xff, sizeof(int64_t) * (size_t)(nv ? nv : 1));
    memset(back, 0xff, sizeof(int64_t) * (size_t)(nv ? nv : 1));
    memset(table, 0xff, (compact ? 8 : 16) * cap);
    for (npy_intp i = 0; i < r; i++) {
        int64_t v = vc[i];
        double ti = t[i];
        /* the value's rows more than delta_t older leave its queue (stream order: a prefix) */
        int64_t j = front[v];
        while (j >= 0 && ti - t[j] > dt) {
            if (!(flags[j] & SUPERSEDED))
                count[v]--;
            flags[j] |= EXPIRED;
            j = next[j];
        }
        front[v] = j;
        /* the pair's latest row is now this one */
        uint64_t key = (uint64_t)(v * nu + uc[i]);
        uint64_t h = (key * 0x9E3779B97F4A7C15ULL) >> shift;
        int64_t prev = -1;
        if (compact) {
            uint32_t *slot = (uint32_t *)table;
            while (slot[2 * h] != UINT32_MAX && slot[2 * h] != (uint32_t)key)
                h = (h + 1) & (cap - 1);
            if (slot[2 * h] == (uint32_t)key)
                prev = (int64_t)slot[2 * h + 1];
            else {
                slot[2 * h] = (uint32_t)key;
                used++;
            }
            slot[2 * h + 1] = (uint32_t)i;
        } else {
            int64_t *slot = (int64_t *)table;
            while (slot[2 * h] != -1 && slot[2 * h] != (int64_t)key)
                h = (h + 1) & (cap - 1);
            if (slot[2 * h] == (int64_t)key)
                prev = slot[2 * h + 1];
            else {
                slot[2 * h] = (int64_t)key;
                used++;
            }
            slot[2 * h + 1] = i;
        }
        count[v]++;
        if (prev >= 0 && !(flags[prev] & EXPIRED)) {
            flags[prev] |= SUPERSEDED;
            count[v]--;
        }
        next[i] = -1;
        if (front[v] >= 0)
            next[back[v]] = i;
        else
            front[v] = i;
        back[v] = i;
        counts[i] = count[v];
        if (2 * used > cap) { /* grow: rehash every pair into twice the slots */
            uint64_t ncap = cap * 2;
            int nshift = shift - 1;
            void *bigger = malloc((compact ? 8 : 16) * ncap);
            if (bigger == NULL) {
                failed = 1;
                break;
            }
            memset(bigger, 0xff, (compact ? 8 : 16) * ncap);
            for (uint64_t s = 0; s < cap; s++) {
                if (compact) {
                    uint32_t *from = (uint32_t *)table, *to = (uint32_t *)bigger;
                    if (from[2 * s] == UINT32_MAX)
                        continue;
                    uint64_t g = ((uint64_t)from[2 * s] * 0x9E3779B97F4A7C15ULL) >> nshift;
                    while (to[2 * g] != UINT32_MAX)
                        g = (g + 1) & (ncap - 1);
                    to[2 * g] = from[2 * s];
                    to[2 * g + 1] = from[2 * s + 1];
                } else {
                    int64_t *from = (int64_t *)table, *to = (int64_t *)bigger;
                    if (from[2 * s] == -1)
                        continue;
                    uint64_t g = ((uint64_t)from[2 * s] * 0x9E3779B97F4A7C15ULL) >> nshift;
                    while (to[2 * g] != -1)
                        g = (g + 1) & (ncap - 1);
                    to[2 * g] = from[2 * s];
                    to[2 * g + 1] = from[2 * s + 1];
                }
            }
            free(table);
            table = bigger;
            cap = ncap;
            shift = nshift;
        }
    }
    for (npy_intp i = 0; i < r; i++)
        if (!(flags[i] & SUPERSEDED) && now - t[i] <= dt)
            kept++;
    Py_END_ALLOW_THREADS
    if (failed) {
        free(front); free(back); free(count); free(next); free(flags); free(table);
        Py_DECREF(o_counts);
        return PyErr_NoMemory();
    }
    dims[0] = kept;
    PyObject *o_keep = PyArray_SimpleNew(1, dims, NPY_INT64);
    if (o_keep != NULL) {
        int64_t *keep = (int64_t *)PyArray_DATA((PyArrayObject *)o_keep);
        npy_intp k = 0;
        for (npy_intp i = 0; i < r; i++)
            if (!(flags[i] & SUPERSEDED) && now - t[i] <= dt)
                keep[k++] = i;
    }
    free(front); free(back); free(count); free(next); free(flags); free(table);
    if (o_keep == NULL) {
        Py_DECREF(o_counts);
        return NULL;
    }
    return Py_BuildValue("(NN)", o_counts, o_keep);
}

static PyMethodDef methods[] = {
    {"window_counts", (PyCFunction)(void (*)(void))window_counts, METH_FASTCALL,
     "Distinct users per row's value within delta_t (as streamanon.zanon.operator's)."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_zanon_native", "z-anonymity's compiled window counts.", -1,
    methods
};

PyMODINIT_FUNC PyInit__zanon_native(void)
{
    import_array();
    return PyModule_Create(&moduledef);
}
"""


def load() -> ModuleType | None:
    """The compiled module (built first when the cache does not hold it), or ``None`` with
    the reason in :data:`unavailable` (see :func:`streamanon._cbuild.load`)."""
    global unavailable
    module, unavailable = _cbuild.load("zanon", "_zanon_native", SOURCE)
    return module
