"""CASTLE's best selection and merged rows as a C extension, built on first use and cached.

The same loops as :mod:`streamanon.castle._kernel`, written in C: loading them costs a few
milliseconds, where numba's import and the load of its cache cost ~0.6-0.8 s CPU per
process. :func:`load` compiles the source below once per machine (:mod:`streamanon._cbuild`:
IEEE arithmetic, no contraction into fused multiply-adds, as numba compiles without
fastmath) and returns the module, or ``None`` (the reason in :data:`unavailable`) when it
cannot be built or loaded: the caller then uses numba. ``STREAMANON_NATIVE=0`` turns it off.

Design: docs/design/castle.md
"""

from __future__ import annotations

from types import ModuleType

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
                     type == NPY_FLOAT64 ? "float64" : "int64", ndim);
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

static PyMethodDef methods[] = {
    {"best_selection", (PyCFunction)(void (*)(void))best_selection, METH_FASTCALL,
     "CASTLE's best selection (as streamanon.castle._kernel.best_selection)."},
    {"merged_rows", (PyCFunction)(void (*)(void))merged_rows, METH_FASTCALL,
     "Every row merged with row i (as streamanon.castle._kernel.merged_rows)."},
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
