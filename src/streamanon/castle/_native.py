"""CASTLE's compiled loops as a C extension, built on first use and cached: the best
selection and merged rows (the same loops as :mod:`streamanon.castle._kernel`) and the window
release's loops (fit test, ranking, a cluster's state, dropped rows, median cuts: the same as
:mod:`streamanon.castle._window_kernel`), written in C.

Loading them costs a few milliseconds, where numba's import and the load of its cache cost
~0.4-0.8 s CPU per process. :func:`load` compiles the source below once per machine
(:mod:`streamanon._cbuild`: IEEE arithmetic, no contraction into fused multiply-adds, as
numba compiles without fastmath) and returns the module, or ``None`` (the reason in
:data:`unavailable`) when it cannot be built or loaded: the callers then use numba
(:func:`window_kernels` picks for the window release). ``STREAMANON_NATIVE=0`` turns it off.
tests/castle/test_native.py compares both builds on random cases, answer for answer.

Design: docs/design/castle.md
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from streamanon import _cbuild

#: why the C kernels are not in use (``None``: not tried yet or loaded)
unavailable: str | None = None

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <stdint.h>

#define OPEN (-1)
#define OUTSIDE (-2)
#define TIED (-3)
#define HEAD 4
#define SCREEN_FROM 32
static const double EPS52 = 2.220446049250313e-16;

/* a C-contiguous array of ndim dimensions and the given type (else a TypeError) */
static int arr(PyObject *o, int type, int ndim, int writable, const char *name)
{
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != type
            || PyArray_NDIM((PyArrayObject *)o) != ndim
            || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)o)
            || (writable && !PyArray_ISWRITEABLE((PyArrayObject *)o))) {
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous%s %s array of %d "
                     "dimension(s)", name, writable ? " writable" : "",
                     type == NPY_FLOAT64 ? "float64" : type == NPY_INT32 ? "int32" : "int64",
                     ndim);
        return 0;
    }
    return 1;
}

#define DATA(o, t) ((t *)PyArray_DATA((PyArrayObject *)(o)))
#define DIM(o, k) ((long)PyArray_DIMS((PyArrayObject *)(o))[k])

static int must_open(const double *lh, long lhc, const int64_t *nodes, long ndc, long n,
                     const double *x, long d, const int64_t *cat, long nh, double tau,
                     const double *fl, const int64_t *it)
{
    double hmax = fl[3];
    if (hmax < 0.0)
        return 0;
    long inv = HEAD, dlo = HEAD + 2 * d, dhi = dlo + d, hloss = dhi + d;
    double total = hmax;
    for (long c = 0; c < d; c++) {
        double w = fl[inv + c];
        if (!(w >= 0.0 && fl[inv + d + c] == w))
            return 0;
        double a = fabs(fl[dlo + c]), b = fabs(fl[dhi + c]);
        total += 2.0 * w * ((b > a) ? b : a);
    }
    double bound = tau + fl[1];
    double limit = (bound + 2.0 * (double)(2 * d + nh + 2) * EPS52 * total) * (1.0 + 1e-6);
    if (!(limit < INFINITY))
        return 0;
    for (long i = 0; i < n; i++) {
        const double *row = lh + i * lhc;
        int ruled_out = 0;
        for (long c = 0; c < d; c++) {
            double w = fl[inv + c];
            if (w > 0.0) {
                double a = row[c], b = -x[c];
                double lo_part = a >= b ? a : b;
                a = row[d + c];
                b = x[c];
                double hi_part = a >= b ? a : b;
                if ((lo_part + hi_part) * w > limit) {
                    ruled_out = 1;
                    break;
                }
            }
        }
        if (ruled_out)
            continue;
        double nw = 0.0;
        for (long c = 0; c < d; c++) {
            double a = row[c], b = -x[c];
            nw += (a >= b ? a : b) * fl[inv + c];
        }
        for (long c = 0; c < d; c++) {
            double a = row[d + c], b = x[c];
            nw += (a >= b ? a : b) * fl[inv + d + c];
        }
        for (long j = 0; j < nh; j++) {
            long base = hloss + (long)it[j];
            long size = (long)it[nh + j];
            nw += fl[base + (long)cat[j] * size + (long)nodes[i * ndc + j]];
        }
        if (nw <= bound)
            return 0;
    }
    return 1;
}

static void grow(double *lh, long lhc, int64_t *nodes, long ndc, long i, const double *x,
                 long d, const int64_t *cat, long nh, const int64_t *it)
{
    double *row = lh + i * lhc;
    for (long c = 0; c < d; c++) {
        if (-x[c] > row[c])
            row[c] = -x[c];
        if (x[c] > row[d + c])
            row[d + c] = x[c];
    }
    for (long j = 0; j < nh; j++)
        nodes[i * ndc + j] = it[2 * nh + (long)it[j] + (long)cat[j] * (long)it[nh + j]
                                + (long)nodes[i * ndc + j]];
}

static PyObject *best_selection(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "best_selection takes 10 arguments");
        return NULL;
    }
    PyObject *o_lh = args[0], *o_nodes = args[1], *o_x = args[3], *o_cat = args[4],
             *o_fl = args[6], *o_it = args[7], *o_work = args[8], *o_picks = args[9];
    if (!arr(o_lh, NPY_FLOAT64, 2, 1, "lh") || !arr(o_nodes, NPY_INT64, 2, 1, "nodes")
            || !arr(o_x, NPY_FLOAT64, 1, 0, "x") || !arr(o_cat, NPY_INT64, 1, 0, "cat")
            || !arr(o_fl, NPY_FLOAT64, 1, 0, "fl") || !arr(o_it, NPY_INT64, 1, 0, "it")
            || !arr(o_work, NPY_FLOAT64, 2, 1, "work")
            || !arr(o_picks, NPY_INT64, 1, 1, "picks"))
        return NULL;
    long n = PyLong_AsLong(args[2]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    double tau = PyFloat_AsDouble(args[5]);
    if (tau == -1.0 && PyErr_Occurred())
        return NULL;
    long d = DIM(o_x, 0), nh = DIM(o_cat, 0), lhc = DIM(o_lh, 1), ndc = DIM(o_nodes, 1);
    long wc = DIM(o_work, 1);
    if (n < 1 || DIM(o_lh, 0) < n || lhc != 2 * d || DIM(o_nodes, 0) < n || ndc != nh
            || DIM(o_work, 0) != 4 || wc < n || DIM(o_picks, 0) < n
            || DIM(o_fl, 0) < HEAD + 4 * d || DIM(o_it, 0) < 2 * nh) {
        PyErr_SetString(PyExc_ValueError, "best_selection: arrays of inconsistent shapes");
        return NULL;
    }
    double *lh = DATA(o_lh, double), *work = DATA(o_work, double);
    int64_t *nodes = DATA(o_nodes, int64_t), *picks = DATA(o_picks, int64_t);
    const double *x = DATA(o_x, double), *fl = DATA(o_fl, double);
    const int64_t *cat = DATA(o_cat, int64_t), *it = DATA(o_it, int64_t);

    double beta = fl[0], eps = fl[1];
    int plug = fl[2] != 0.0;
    long inv = HEAD, dlo = HEAD + 2 * d, dhi = dlo + d, hloss = dhi + d;
    for (long c = 0; c < d; c++)
        if (x[c] < fl[dlo + c] || x[c] > fl[dhi + c])
            return PyLong_FromLong(OUTSIDE);
    if (n >= SCREEN_FROM && (double)n < beta && !plug
            && must_open(lh, lhc, nodes, ndc, n, x, d, cat, nh, tau, fl, it))
        return PyLong_FromLong(OPEN);
    double *cur = work, *nw = work + wc;
    for (long i = 0; i < n; i++) {
        cur[i] = 0.0;
        nw[i] = 0.0;
    }
    for (long c = 0; c < d; c++) {
        double b = -x[c], w = fl[inv + c];
        for (long i = 0; i < n; i++) {
            double a = lh[i * lhc + c];
            cur[i] += a * w;
            nw[i] += (a >= b ? a : b) * w;
        }
    }
    for (long c = 0; c < d; c++) {
        double b = x[c], w = fl[inv + d + c];
        for (long i = 0; i < n; i++) {
            double a = lh[i * lhc + d + c];
            cur[i] += a * w;
            nw[i] += (a >= b ? a : b) * w;
        }
    }
    for (long j = 0; j < nh; j++) {
        long base = hloss + (long)it[j];
        long size = (long)it[nh + j];
        long row = base + (long)cat[j] * size;
        for (long i = 0; i < n; i++) {
            long node = (long)nodes[i * ndc + j];
            cur[i] += fl[base + node * size + node];
            nw[i] += fl[row + node];
        }
    }
    if (plug) {
        for (long i = 0; i < n; i++) {
            cur[i] += work[2 * wc + i];
            nw[i] += work[3 * wc + i];
        }
    }
    long best = 0;
    double emin = nw[0] - cur[0];
    if (emin == emin) {
        for (long i = 1; i < n; i++) {
            double e = nw[i] - cur[i];
            if (e != e) {
                best = i;
                emin = e;
                break;
            }
            if (e < emin) {
                best = i;
                emin = e;
            }
        }
    }
    double limit = emin + eps;
    long m = 0;
    for (long i = 0; i < n; i++)
        if (nw[i] - cur[i] <= limit)
            picks[m++] = i;
    double bound = tau + eps;
    if (m == 1) {
        if (nw[best] <= bound || (double)n >= beta) {
            grow(lh, lhc, nodes, ndc, best, x, d, cat, nh, it);
            return PyLong_FromLong(best);
        }
        return PyLong_FromLong(OPEN);
    }
    long ok = 0;
    for (long q = 0; q < m; q++)
        if (nw[picks[q]] <= bound)
            picks[ok++] = picks[q];
    if (ok == 0) {
        if ((double)n < beta)
            return PyLong_FromLong(OPEN);
        ok = m;
    }
    if (ok == 1) {
        grow(lh, lhc, nodes, ndc, (long)picks[0], x, d, cat, nh, it);
        return PyLong_FromLong((long)picks[0]);
    }
    return PyLong_FromLong(TIED - ok);
}

static PyObject *merged_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "merged_rows takes 4 arguments");
        return NULL;
    }
    PyObject *o_lh = args[0], *o_out = args[3];
    if (!arr(o_lh, NPY_FLOAT64, 2, 0, "lh") || !arr(o_out, NPY_FLOAT64, 2, 1, "out"))
        return NULL;
    long n = PyLong_AsLong(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    long i = PyLong_AsLong(args[2]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    long m = DIM(o_lh, 1);
    if (n < 0 || i < 0 || DIM(o_lh, 0) < n || i >= DIM(o_lh, 0) || DIM(o_out, 0) < n
            || DIM(o_out, 1) != m) {
        PyErr_SetString(PyExc_ValueError, "merged_rows: arrays of inconsistent shapes");
        return NULL;
    }
    const double *lh = DATA(o_lh, double);
    double *out = DATA(o_out, double);
    const double *other = lh + i * m;
    for (long r = 0; r < n; r++) {
        for (long c = 0; c < m; c++) {
            double a = lh[r * m + c], b = other[c];
            out[r * m + c] = (a >= b || a != a) ? a : b;
        }
    }
    Py_RETURN_NONE;
}

/* ---- the window release's loops (as streamanon.castle._window_kernel, bit for bit) ---- */

#define GET_LONG(var, o) long var = PyLong_AsLong(o); \
    if (var == -1 && PyErr_Occurred()) return NULL;
#define GET_DOUBLE(var, o) double var = PyFloat_AsDouble(o); \
    if (var == -1.0 && PyErr_Occurred()) return NULL;

static PyObject *shape_error(const char *name)
{
    PyErr_Format(PyExc_ValueError, "%s: arrays of inconsistent shapes", name);
    return NULL;
}

static PyObject *best_fits(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "best_fits takes 11 arguments");
        return NULL;
    }
    PyObject *o_lo = args[0], *o_hi = args[1], *o_order = args[2], *o_ranked = args[3],
             *o_x = args[5], *o_nodes = args[6], *o_at = args[7], *o_tables = args[8],
             *o_off = args[9], *o_out = args[10];
    if (!arr(o_lo, NPY_FLOAT64, 2, 0, "lo") || !arr(o_hi, NPY_FLOAT64, 2, 0, "hi")
            || !arr(o_order, NPY_INT64, 1, 0, "order")
            || !arr(o_ranked, NPY_FLOAT64, 1, 0, "ranked")
            || !arr(o_x, NPY_FLOAT64, 2, 0, "x") || !arr(o_nodes, NPY_INT64, 2, 0, "nodes")
            || !arr(o_at, NPY_INT64, 2, 0, "at") || !arr(o_tables, NPY_INT32, 1, 0, "tables")
            || !arr(o_off, NPY_INT64, 1, 0, "offsets") || !arr(o_out, NPY_INT64, 1, 1, "out"))
        return NULL;
    GET_DOUBLE(below, args[4])
    long d = DIM(o_lo, 0), size = DIM(o_lo, 1), m = DIM(o_x, 0), h = DIM(o_at, 1);
    long norder = DIM(o_order, 0);
    if (DIM(o_hi, 0) != d || DIM(o_hi, 1) != size || DIM(o_x, 1) != d || DIM(o_at, 0) != m
            || DIM(o_nodes, 1) != h || DIM(o_out, 0) < m || DIM(o_ranked, 0) < norder
            || DIM(o_off, 0) < 2 * h || (h && DIM(o_nodes, 0) < size))
        return shape_error("best_fits");
    const double *lo = DATA(o_lo, double), *hi = DATA(o_hi, double);
    const double *ranked = DATA(o_ranked, double), *x = DATA(o_x, double);
    const int64_t *order = DATA(o_order, int64_t), *nodes = DATA(o_nodes, int64_t);
    const int64_t *at = DATA(o_at, int64_t), *off = DATA(o_off, int64_t);
    const int32_t *tables = DATA(o_tables, int32_t);
    int64_t *out = DATA(o_out, int64_t);
    long n = 0;
    while (n < norder && ranked[n] < below)
        n++;
    for (long p = 0; p < n; p++)
        if (order[p] < 0 || order[p] >= size)
            return shape_error("best_fits (a slot outside the classes)");
    if (m > 1 && n > 8) {
        /* narrow the classes to those that can hold one of the tuples (ranges meeting the
           tuples' bounds, nodes on a line with their lowest common node), an attribute at a
           time over the survivors (one row of lo/hi at a time), keeping the order; then copy
           the survivors' ranges and nodes side by side, so that each tuple's scan reads them
           in order */
        double *bmin = malloc(sizeof(double) * (2 * d + 1));
        int64_t *top = malloc(sizeof(int64_t) * (h + 1));
        int64_t *keep = malloc(sizeof(int64_t) * n);
        if (bmin == NULL || top == NULL || keep == NULL) {
            free(bmin); free(top); free(keep);
            return PyErr_NoMemory();
        }
        double *bmax = bmin + d;
        for (long j = 0; j < d; j++) {
            bmin[j] = INFINITY;
            bmax[j] = -INFINITY;
        }
        for (long i = 0; i < m; i++)
            for (long j = 0; j < d; j++) {
                double v = x[i * d + j];
                if (v < bmin[j])
                    bmin[j] = v;
                if (v > bmax[j])
                    bmax[j] = v;
            }
        for (long j = 0; j < h; j++) {
            int64_t node = at[j];
            for (long i = 1; i < m; i++)
                node = tables[off[j] + node * off[h + j] + at[i * h + j]];
            top[j] = node;
        }
        memcpy(keep, order, sizeof(int64_t) * n);
        long kept = n;
        for (long j = 0; j < d && kept; j++) {
            const double *lj = lo + j * size, *hj = hi + j * size;
            long w = 0;
            for (long p = 0; p < kept; p++) {
                int64_t c = keep[p];
                if (lj[c] <= bmax[j] && hj[c] >= bmin[j])
                    keep[w++] = c;
            }
            kept = w;
        }
        for (long j = 0; j < h && kept; j++) {
            long w = 0;
            for (long p = 0; p < kept; p++) {
                int64_t c = keep[p];
                int64_t node = nodes[c * h + j];
                int64_t meet = tables[off[j] + node * off[h + j] + top[j]];
                if (meet == node || meet == top[j])
                    keep[w++] = c;
            }
            kept = w;
        }
        free(bmin);
        free(top);
        double *box = malloc(sizeof(double) * (2 * d * kept + 1));
        int64_t *kn = malloc(sizeof(int64_t) * (h * kept + 1));
        if (box == NULL || kn == NULL) {
            free(box); free(kn); free(keep);
            return PyErr_NoMemory();
        }
        for (long p = 0; p < kept; p++) {
            int64_t c = keep[p];
            for (long j = 0; j < d; j++) {
                box[p * 2 * d + 2 * j] = lo[j * size + c];
                box[p * 2 * d + 2 * j + 1] = hi[j * size + c];
            }
            for (long j = 0; j < h; j++)
                kn[p * h + j] = nodes[c * h + j];
        }
        for (long i = 0; i < m; i++) {
            int64_t best = -1;
            const double *xi = x + i * d;
            for (long p = 0; p < kept; p++) {
                const double *b = box + p * 2 * d;
                int ok = 1;
                for (long j = 0; j < d; j++)
                    if (!(b[2 * j] <= xi[j] && xi[j] <= b[2 * j + 1])) {
                        ok = 0;
                        break;
                    }
                if (ok)
                    for (long j = 0; j < h; j++) {
                        int64_t node = kn[p * h + j];
                        if (tables[off[j] + node * off[h + j] + at[i * h + j]] != node) {
                            ok = 0;
                            break;
                        }
                    }
                if (ok) {
                    best = keep[p];
                    break;
                }
            }
            out[i] = best;
        }
        free(box);
        free(kn);
        free(keep);
        Py_RETURN_NONE;
    }
    for (long i = 0; i < m; i++) {
        int64_t best = -1;
        for (long p = 0; p < n; p++) {
            int64_t c = order[p];
            int ok = 1;
            for (long j = 0; j < d; j++) {
                double v = x[i * d + j];
                if (!(lo[j * size + c] <= v && v <= hi[j * size + c])) {
                    ok = 0;
                    break;
                }
            }
            if (ok)
                for (long j = 0; j < h; j++) {
                    int64_t node = nodes[c * h + j];
                    if (tables[off[j] + node * off[h + j] + at[i * h + j]] != node) {
                        ok = 0;
                        break;
                    }
                }
            if (ok) {
                best = c;
                break;
            }
        }
        out[i] = best;
    }
    Py_RETURN_NONE;
}

static long rank_at(const int64_t *order, const double *ranked, long n, double loss, long slot)
{
    long a = 0, b = n;
    while (a < b) {
        long mid = (a + b) / 2;
        if (ranked[mid] < loss || (ranked[mid] == loss && order[mid] < slot))
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

static PyObject *rank_replace(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "rank_replace takes 7 arguments");
        return NULL;
    }
    PyObject *o_order = args[0], *o_ranked = args[1];
    if (!arr(o_order, NPY_INT64, 1, 1, "order") || !arr(o_ranked, NPY_FLOAT64, 1, 1, "ranked"))
        return NULL;
    GET_LONG(n, args[2])
    int drop = PyObject_IsTrue(args[3]);
    if (drop < 0)
        return NULL;
    GET_DOUBLE(old_loss, args[4])
    GET_LONG(slot, args[5])
    GET_DOUBLE(loss, args[6])
    long cap = DIM(o_order, 0);
    if (n < 0 || DIM(o_ranked, 0) != cap || n - (drop ? 1 : 0) + 1 > cap || (drop && n < 1))
        return shape_error("rank_replace");
    int64_t *order = DATA(o_order, int64_t);
    double *ranked = DATA(o_ranked, double);
    if (drop) {
        long at = rank_at(order, ranked, n, old_loss, slot);
        for (long p = at; p < n - 1; p++) {
            order[p] = order[p + 1];
            ranked[p] = ranked[p + 1];
        }
        n -= 1;
    }
    long at = rank_at(order, ranked, n, loss, slot);
    for (long p = n; p > at; p--) {
        order[p] = order[p - 1];
        ranked[p] = ranked[p - 1];
    }
    order[at] = slot;
    ranked[at] = loss;
    return PyLong_FromLong(n + 1);
}

/* the tables of a tuple: int32 C-contiguous square-enough matrices; fills ptrs and cols */
static int lca_tables(PyObject *o, long h, const int32_t **ptrs, long *cols)
{
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) < h) {
        PyErr_SetString(PyExc_TypeError, "tables: expected a tuple of one table per hierarchy");
        return 0;
    }
    for (long j = 0; j < h; j++) {
        PyObject *t = PyTuple_GET_ITEM(o, j);
        if (!arr(t, NPY_INT32, 2, 0, "tables[j]"))
            return 0;
        ptrs[j] = DATA(t, int32_t);
        cols[j] = DIM(t, 1);
    }
    return 1;
}

/* part_states(x, at, starts, tables, h, lo, hi, nodes): as _window_kernel.part_states */
static PyObject *part_states(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "part_states takes 8 arguments");
        return NULL;
    }
    PyObject *o_x = args[0], *o_at = args[1], *o_s = args[2], *o_lo = args[5],
             *o_hi = args[6], *o_n = args[7];
    if (!arr(o_x, NPY_FLOAT64, 2, 0, "x") || !arr(o_at, NPY_INT64, 2, 0, "at")
            || !arr(o_s, NPY_INT64, 1, 0, "starts") || !arr(o_lo, NPY_FLOAT64, 2, 1, "lo")
            || !arr(o_hi, NPY_FLOAT64, 2, 1, "hi") || !arr(o_n, NPY_INT64, 2, 1, "nodes"))
        return NULL;
    GET_LONG(h, args[4])
    long n = DIM(o_x, 0), d = DIM(o_x, 1), np_ = DIM(o_s, 0) - 1;
    if (np_ < 0 || h < 0 || h > 64 || DIM(o_at, 0) != n || DIM(o_at, 1) != h
            || DIM(o_lo, 0) < np_ || DIM(o_lo, 1) != d || DIM(o_hi, 0) < np_
            || DIM(o_hi, 1) != d || DIM(o_n, 0) < np_ || DIM(o_n, 1) != h)
        return shape_error("part_states");
    const int64_t *starts = DATA(o_s, int64_t);
    if (starts[0] != 0 || starts[np_] != n)
        return shape_error("part_states (the classes do not cover the rows)");
    for (long p = 0; p < np_; p++)
        if (starts[p + 1] <= starts[p])
            return shape_error("part_states (an empty class)");
    const int32_t *tables[64];
    long cols[64];
    if (!lca_tables(args[3], h, tables, cols))
        return NULL;
    const double *x = DATA(o_x, double);
    const int64_t *at = DATA(o_at, int64_t);
    double *lo = DATA(o_lo, double), *hi = DATA(o_hi, double);
    int64_t *nodes = DATA(o_n, int64_t);
    for (long p = 0; p < np_; p++) {
        long a = starts[p], b = starts[p + 1];
        for (long q = 0; q < d; q++) {
            double mn = x[a * d + q], mx = mn;
            for (long i = a + 1; i < b; i++) {
                double v = x[i * d + q];
                if (v < mn)
                    mn = v;
                if (v > mx)
                    mx = v;
            }
            lo[p * d + q] = mn;
            hi[p * d + q] = mx;
        }
        for (long j = 0; j < h; j++) {
            int64_t node = at[a * h + j];
            for (long i = a + 1; i < b; i++) {
                int64_t v = at[i * h + j];
                if (v != node)  /* lca(a, a) = a: no look-up */
                    node = tables[j][node * cols[j] + v];
            }
            nodes[p * h + j] = node;
        }
    }
    Py_RETURN_NONE;
}

static int distinct_enough(const int64_t *codes, const int64_t *idx, long m, int64_t *seen,
                           int64_t stamp, long enough)
{
    long c = 0;
    for (long t = 0; t < m; t++) {
        int64_t v = codes[idx[t]];
        if (seen[v] != stamp) {
            seen[v] = stamp;
            c++;
            if (c >= enough)
                return 1;
        }
    }
    return c >= enough;
}

/* ascending sort of finite doubles, in place: quicksort (median of three) down to runs of 16,
   then one insertion pass; no callback per comparison as qsort's (the cuts sort each
   attribute of each class: qsort's calls were most of their time) */
static void sort_doubles(double *v, long n)
{
    while (n > 16) {
        long mid = n / 2;
        double a = v[0], b = v[mid], c = v[n - 1];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        long i = 0, j = n - 1;
        for (;;) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i >= j)
                break;
            double t = v[i];
            v[i] = v[j];
            v[j] = t;
            i++;
            j--;
        }
        /* v[0..j] <= pivot <= v[j+1..n-1]: recurse into the smaller side, loop on the other */
        long left = j + 1;
        if (left < n - left) {
            sort_doubles(v, left);
            v += left;
            n -= left;
        } else {
            sort_doubles(v + left, n - left);
            n = left;
        }
    }
    for (long i = 1; i < n; i++) {
        double x = v[i];
        long j = i - 1;
        while (j >= 0 && v[j] > x) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = x;
    }
}

typedef struct {
    long start, len;
    int64_t first;
} seg_t;

static int cmp_first(const void *a, const void *b)
{
    int64_t x = ((const seg_t *)a)->first, y = ((const seg_t *)b)->first;
    return (x > y) - (x < y);
}

/* the parameters of median_cuts a half's cost reads */
typedef struct {
    const double *x, *inv, *w_hier, *losses, *reuse;
    const int64_t *nodes, *tables, *toff, *noff;
    long d, h, nreuse;
    double *lows, *highs;  /* scratch: d each */
} cost_t;

static double half_cost(const cost_t *q, const int64_t *half, long hm)
{
    double acc = 0.0;
    long d = q->d, h = q->h;
    double *restrict mn = q->lows, *restrict mx = q->highs;
    for (long c = 0; c < d; c++) {
        mn[c] = INFINITY;
        mx[c] = -INFINITY;
    }
    const double *restrict xs = q->x;
    for (long t = 0; t < hm; t++) {  /* row by row: each column's values in the same order */
        const double *restrict row = xs + half[t] * d;
        for (long c = 0; c < d; c++) {  /* the first of equal values stays, as with if (<) */
            double v = row[c];
            mn[c] = v < mn[c] ? v : mn[c];
            mx[c] = v > mx[c] ? v : mx[c];
        }
    }
    for (long c = 0; c < d; c++)
        acc += -mn[c] * q->inv[c] + mx[c] * q->inv[d + c];
    for (long g = 0; g < h; g++) {
        int64_t top = q->nodes[half[0] * h + g];
        for (long t = 0; t < hm; t++)
            top = q->tables[q->toff[g] + top * q->toff[h + g] + q->nodes[half[t] * h + g]];
        acc += q->w_hier[g] * q->losses[q->noff[g] + top];
    }
    if (q->nreuse) {
        double part_cost = 0.0;
        long n_full = 0;
        for (long t = 0; t < hm; t++) {
            double r = q->reuse[half[t]];
            if (r < acc)
                part_cost += r;
            else
                n_full++;
        }
        return part_cost + (double)n_full * acc;
    }
    return (double)hm * acc;
}

static PyObject *median_cuts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 19) {
        PyErr_SetString(PyExc_TypeError, "median_cuts takes 19 arguments");
        return NULL;
    }
    PyObject *o_x = args[0], *o_nodes = args[1], *o_ind = args[2], *o_sens = args[3],
             *o_inv = args[7], *o_wh = args[8], *o_tables = args[9], *o_toff = args[10],
             *o_ranks = args[11], *o_parents = args[12], *o_losses = args[13],
             *o_noff = args[14], *o_fracs = args[15], *o_out = args[17], *o_reuse = args[18];
    if (!arr(o_x, NPY_FLOAT64, 2, 0, "x") || !arr(o_nodes, NPY_INT64, 2, 0, "nodes")
            || !arr(o_ind, NPY_INT64, 1, 0, "ind") || !arr(o_sens, NPY_INT64, 2, 0, "sens")
            || !arr(o_inv, NPY_FLOAT64, 1, 0, "inv") || !arr(o_wh, NPY_FLOAT64, 1, 0, "w_hier")
            || !arr(o_tables, NPY_INT64, 1, 0, "tables") || !arr(o_toff, NPY_INT64, 1, 0, "toff")
            || !arr(o_ranks, NPY_FLOAT64, 1, 0, "ranks")
            || !arr(o_parents, NPY_INT64, 1, 0, "parents")
            || !arr(o_losses, NPY_FLOAT64, 1, 0, "losses")
            || !arr(o_noff, NPY_INT64, 1, 0, "noff") || !arr(o_fracs, NPY_FLOAT64, 1, 0, "fracs")
            || !arr(o_out, NPY_INT64, 1, 1, "out") || !arr(o_reuse, NPY_FLOAT64, 1, 0, "reuse"))
        return NULL;
    GET_LONG(k, args[4])
    GET_LONG(l, args[5])
    int small = PyObject_IsTrue(args[6]);
    int ends = PyObject_IsTrue(args[16]);
    if (small < 0 || ends < 0)
        return NULL;
    long n = DIM(o_x, 0), d = DIM(o_x, 1), h = DIM(o_nodes, 1), n_sens = DIM(o_sens, 0);
    long nfr = DIM(o_fracs, 0), nreuse = DIM(o_reuse, 0);
    if (k < 1 || DIM(o_nodes, 0) != n || DIM(o_ind, 0) != n || DIM(o_sens, 1) != n
            || DIM(o_out, 0) < n || (nreuse && nreuse != n) || (d && DIM(o_inv, 0) < 2 * d)
            || DIM(o_wh, 0) < h || DIM(o_toff, 0) < 2 * h || DIM(o_noff, 0) < h)
        return shape_error("median_cuts");
    if (n == 0)
        return PyLong_FromLong(0);
    const int64_t *ind = DATA(o_ind, int64_t), *sens = DATA(o_sens, int64_t);
    const int64_t *nodes = DATA(o_nodes, int64_t), *tables = DATA(o_tables, int64_t);
    const int64_t *toff = DATA(o_toff, int64_t), *parents = DATA(o_parents, int64_t);
    const int64_t *noff = DATA(o_noff, int64_t);
    const double *x = DATA(o_x, double), *ranks = DATA(o_ranks, double);
    const double *fracs = DATA(o_fracs, double);
    int64_t *out = DATA(o_out, int64_t);
    cost_t q = {x, DATA(o_inv, double), DATA(o_wh, double), DATA(o_losses, double),
                DATA(o_reuse, double), nodes, tables, toff, noff, d, h, nreuse, NULL, NULL};
    long n_ind = 1, n_codes = 1;
    for (long i = 0; i < n; i++) {
        if (ind[i] < 0)
            return shape_error("median_cuts (a negative individual code)");
        if (ind[i] + 1 > n_ind)
            n_ind = ind[i] + 1;
    }
    for (long i = 0; i < n_sens * n; i++) {
        if (sens[i] < 0)
            return shape_error("median_cuts (a negative sensitive code)");
        if (sens[i] + 1 > n_codes)
            n_codes = sens[i] + 1;
    }
    long ntries = (d + h) * (nfr + 3) + 1;
    int64_t *seen = calloc(n_ind, sizeof(int64_t));
    int64_t *seen_s = calloc(n_codes, sizeof(int64_t));
    int64_t *perm = malloc(sizeof(int64_t) * n);
    int64_t *a = malloc(sizeof(int64_t) * n);
    int64_t *b = malloc(sizeof(int64_t) * n);
    double *col = malloc(sizeof(double) * n);
    double *srt = malloc(sizeof(double) * n);
    char *tried = malloc((size_t)ntries * n);
    char *best_left = malloc(n);
    long *tried_left = malloc(sizeof(long) * ntries);
    double *bounds = malloc(sizeof(double) * (2 * d + 1));
    q.lows = bounds;
    q.highs = bounds ? bounds + d : NULL;
    seg_t *stack = malloc(sizeof(seg_t) * (n + 1));
    seg_t *done = malloc(sizeof(seg_t) * (n + 1));
    PyObject *result = NULL;
    if (!seen || !seen_s || !perm || !a || !b || !col || !srt || !tried || !best_left
            || !tried_left || !bounds || !stack || !done) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (long i = 0; i < n; i++)
        perm[i] = i;
    int64_t stamp = 0;
    long nstack = 0, ndone = 0;
    stack[nstack++] = (seg_t){0, n, 0};
    while (nstack) {
        seg_t sg = stack[--nstack];
        int64_t *part = perm + sg.start;
        long m = sg.len;
        if (m < 2 * k) {
            done[ndone++] = sg;
            continue;
        }
        if (!small) {
            stamp++;
            if (!distinct_enough(ind, part, m, seen, stamp, 2 * k)) {
                done[ndone++] = sg;
                continue;
            }
        }
        double best_cost = INFINITY;
        int found = 0;
        long ntried = 0, best_na = 0;
        for (long j = 0; j < d + h; j++) {
            if (j < d) {
                for (long t = 0; t < m; t++)
                    col[t] = x[part[t] * d + j];
            } else {
                long g = j - d;
                int64_t top = nodes[part[0] * h + g];
                for (long t = 0; t < m; t++)
                    top = tables[toff[g] + top * toff[h + g] + nodes[part[t] * h + g]];
                long base = noff[g];
                for (long t = 0; t < m; t++) {
                    int64_t node = nodes[part[t] * h + g];
                    while (node != top && parents[base + node] != top
                           && parents[base + node] >= 0)
                        node = parents[base + node];
                    col[t] = ranks[base + node];
                }
            }
            double lo = col[0], hi = col[0];
            for (long t = 1; t < m; t++) {
                if (col[t] < lo)
                    lo = col[t];
                if (col[t] > hi)
                    hi = col[t];
            }
            if (lo == hi)
                continue;
            memcpy(srt, col, sizeof(double) * m);
            sort_doubles(srt, m);
            for (long f = 0; f < nfr + 3; f++) {
                double med;
                if (f == 0) {
                    long half = m / 2;
                    med = (m % 2) ? srt[half] : (srt[half - 1] + srt[half]) / 2;
                } else if (f <= nfr) {
                    med = srt[(long)(fracs[f - 1] * (double)(m - 1))];
                } else {
                    long r = (f == nfr + 1) ? k - 1 : m - k - 1;
                    if (!ends || r < 0 || r >= m)
                        continue;
                    med = srt[r];
                }
                char *left = tried + ntried * n;
                long nleft = 0;
                if (med < hi)
                    for (long t = 0; t < m; t++)
                        nleft += (left[t] = col[t] <= med);
                else
                    for (long t = 0; t < m; t++)
                        nleft += (left[t] = col[t] < med);
                int same = 0;
                for (long p = 0; p < ntried; p++)  /* halves of other sizes differ */
                    if (tried_left[p] == nleft && memcmp(tried + p * n, left, m) == 0) {
                        same = 1;
                        break;
                    }
                if (same)
                    continue;
                tried_left[ntried] = nleft;
                ntried++;
                long na = 0, nb = 0;
                for (long t = 0; t < m; t++) {
                    if (left[t])
                        a[na++] = part[t];
                    else
                        b[nb++] = part[t];
                }
                int ok = 1;
                for (int side = 0; side < 2 && ok; side++) {
                    const int64_t *half = side ? b : a;
                    long hm = side ? nb : na;
                    stamp++;
                    if (!distinct_enough(ind, half, hm, seen, stamp, k)) {
                        ok = 0;
                        break;
                    }
                    for (long s = 0; s < n_sens; s++) {
                        stamp++;
                        if (!distinct_enough(sens + s * n, half, hm, seen_s, stamp, l)) {
                            ok = 0;
                            break;
                        }
                    }
                }
                if (!ok)
                    continue;
                double cost = 0.0;
                cost += half_cost(&q, a, na);
                cost += half_cost(&q, b, nb);
                if (!found || cost < best_cost) {
                    found = 1;
                    best_cost = cost;
                    memcpy(best_left, left, m);
                    best_na = na;
                }
            }
        }
        if (!found) {
            done[ndone++] = sg;
            continue;
        }
        long na = 0, nb = 0;
        for (long t = 0; t < m; t++) {
            if (best_left[t])
                a[na++] = part[t];
            else
                b[nb++] = part[t];
        }
        memcpy(part, a, sizeof(int64_t) * na);
        memcpy(part + na, b, sizeof(int64_t) * nb);
        (void)best_na;
        stack[nstack++] = (seg_t){sg.start + na, nb, 0};
        stack[nstack++] = (seg_t){sg.start, na, 0};
    }
    for (long p = 0; p < ndone; p++) {
        int64_t first = INT64_MAX;
        for (long t = 0; t < done[p].len; t++)
            if (perm[done[p].start + t] < first)
                first = perm[done[p].start + t];
        done[p].first = first;
    }
    qsort(done, ndone, sizeof(seg_t), cmp_first);
    for (long p = 0; p < ndone; p++)
        for (long t = 0; t < done[p].len; t++)
            out[perm[done[p].start + t]] = p;
    result = PyLong_FromLong(ndone);
cleanup:
    free(seen); free(seen_s); free(perm); free(a); free(b); free(col); free(srt);
    free(tried); free(best_left); free(tried_left); free(bounds); free(stack); free(done);
    return result;
}

static PyMethodDef methods[] = {
    {"best_selection", (PyCFunction)(void (*)(void))best_selection, METH_FASTCALL,
     "CASTLE's best selection (as streamanon.castle._kernel.best_selection)."},
    {"merged_rows", (PyCFunction)(void (*)(void))merged_rows, METH_FASTCALL,
     "Every row merged with row i (as streamanon.castle._kernel.merged_rows)."},
    {"best_fits", (PyCFunction)(void (*)(void))best_fits, METH_FASTCALL,
     "The window release's fit test (as streamanon.castle._window_kernel.best_fits)."},
    {"rank_replace", (PyCFunction)(void (*)(void))rank_replace, METH_FASTCALL,
     "Keep the remembered classes ranked (as _window_kernel.rank_replace)."},
    {"part_states", (PyCFunction)(void (*)(void))part_states, METH_FASTCALL,
     "The states of the window's classes (as _window_kernel.part_states)."},
    {"median_cuts", (PyCFunction)(void (*)(void))median_cuts, METH_FASTCALL,
     "The window release's median cuts (as _window_kernel.median_cuts)."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_castle_native", "CASTLE's compiled loops.", -1, methods
};

PyMODINIT_FUNC PyInit__castle_native(void)
{
    import_array();
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "OPEN", OPEN) || PyModule_AddIntConstant(m, "OUTSIDE", OUTSIDE)
            || PyModule_AddIntConstant(m, "TIED", TIED) || PyModule_AddIntConstant(m, "HEAD", HEAD)
            || PyModule_AddIntConstant(m, "SCREEN_FROM", SCREEN_FROM)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
"""


def load() -> ModuleType | None:
    """The compiled module (built first when the cache does not hold it), or ``None`` with
    the reason in :data:`unavailable` (see :func:`streamanon._cbuild.load`)."""
    global unavailable
    module, unavailable = _cbuild.load("castle", "_castle_native", SOURCE)
    return module


_LOADED: list[ModuleType | None] = []


def loaded() -> ModuleType | None:
    """:func:`load`'s answer, asked once per process: every caller gets the same module
    object (loading the file again would give another, and set its attributes back)."""
    if not _LOADED:
        _LOADED.append(load())
    return _LOADED[0]


_WINDOW: list[Any] = []


def window_kernels() -> Any:
    """The window release's loops (``best_fits``, ``rank_replace``, ``part_states``,
    ``median_cuts``): the C build's, else numba's
    (:mod:`streamanon.castle._window_kernel`, imported only then). Same signatures, same
    answers."""
    if not _WINDOW:
        module = loaded()
        if module is None:
            from streamanon.castle import _window_kernel as module  # type: ignore[no-redef]
        _WINDOW.append(module)
    return _WINDOW[0]
