"""CASTLE's best selection and merged rows as a C extension, built on first use and cached.

The same loops as :mod:`streamanon.castle._kernel`, written in C: loading them costs a few
milliseconds, where numba's import and the load of its cache cost ~0.6-0.8 s CPU per
process. :func:`load` compiles the source below once per machine (the system C compiler,
the Python and numpy headers; IEEE arithmetic, no contraction into fused multiply-adds, as
numba compiles without fastmath) into ``$XDG_CACHE_HOME/streamanon/kernels`` and returns
the module, or ``None`` (the reason in :data:`unavailable`) when it cannot be built or
loaded: the caller then uses numba. ``STREAMANON_NATIVE=0`` turns it off.

Design: docs/design/castle.md
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

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

#: the compiler's flags besides the include paths: IEEE doubles, no fused multiply-add
FLAGS = ("-O2", "-fPIC", "-shared", "-fno-fast-math", "-ffp-contract=off", "-fwrapv")


def _compiler() -> list[str] | None:
    """``$CC``, else the compiler Python was built with, else ``cc`` (the first found)."""
    import shlex
    import shutil
    import sysconfig

    given = os.environ.get("CC")
    for text in ([given] if given else [sysconfig.get_config_var("CC") or "", "cc"]):
        cc = shlex.split(text)
        if cc and shutil.which(cc[0]) is not None:
            return cc
    return None


def cache_dir() -> Path:
    """Where built kernels live: ``$XDG_CACHE_HOME/streamanon/kernels``, else
    ``~/.cache/...``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamanon" / "kernels"


def _private_dir(folder: Path) -> None:
    """Create ``folder`` (and ``streamanon/`` above it) readable by this user only, and
    refuse a folder another user owns or may write: a library loaded from it runs as this
    process, so whoever can put a file there could run code in it."""
    for level in (folder.parent, folder):
        with contextlib.suppress(FileExistsError):
            level.mkdir(mode=0o700)
        _refuse_shared(level)


def _refuse_shared(path: Path) -> None:
    """``PermissionError`` unless ``path`` is owned by this user and not writable by others."""
    st = path.lstat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise PermissionError(f"{path} is owned by uid {st.st_uid} or writable by others "
                              f"(mode {st.st_mode & 0o777:o}); not loading a library from it")


def _build(target: Path) -> None:
    """Compile :data:`SOURCE` to ``target`` (via a file of its own, renamed into place: two
    processes building at once each write their own). Raises ``OSError`` (with the
    compiler's message) when it cannot. The modules it needs are imported here: a process
    that finds the build cached does not pay for them."""
    import subprocess
    import sysconfig
    import tempfile

    import numpy as np

    cc = _compiler()
    if cc is None:
        raise FileNotFoundError("no C compiler")
    includes = [sysconfig.get_paths()["include"], np.get_include()]
    target.parent.parent.parent.mkdir(parents=True, exist_ok=True)
    _private_dir(target.parent)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        src = Path(tmp) / "castle_native.c"
        src.write_text(SOURCE, encoding="utf-8")
        out = Path(tmp) / target.name
        extra = ["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else []
        cmd = [*cc, *FLAGS, *extra, *(f"-I{i}" for i in includes), str(src), "-o", str(out)]
        try:
            subprocess.run(cmd, check=True, capture_output=True, timeout=300)
        except subprocess.SubprocessError as exc:
            detail = (getattr(exc, "stderr", b"") or b"").decode(errors="replace")[:500]
            raise OSError(f"the build failed ({exc}): {detail}") from None
        os.replace(out, target)


def load() -> ModuleType | None:
    """The compiled module (built first when the cache does not hold it), or ``None`` with
    the reason in :data:`unavailable`."""
    global unavailable
    if os.environ.get("STREAMANON_NATIVE", "1") == "0":
        unavailable = "STREAMANON_NATIVE=0"
        return None
    if sys.platform == "win32":
        unavailable = "not built on Windows"
        return None
    import numpy as np

    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256("\0".join((SOURCE, " ".join(FLAGS), sys.version, np.__version__,
                                    suffix)).encode()).hexdigest()[:20]
    try:
        target = cache_dir() / f"castle_{key}{suffix}"
        if target.exists():
            _refuse_shared(target.parent.parent)
            _refuse_shared(target.parent)
        else:
            _build(target)
        _refuse_shared(target)
        spec = importlib.util.spec_from_file_location("_castle_native", target)
        if spec is None or spec.loader is None:
            unavailable = f"cannot load {target}"
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (OSError, ImportError, RuntimeError) as exc:
        unavailable = f"{type(exc).__name__}: {exc}"
        return None
    unavailable = None
    return module
