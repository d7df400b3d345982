"""C extensions built from source on first use and cached: the compiled loops of the cores.

A core whose hot loop pays for a compiled kernel keeps that kernel's C source in its own
module (:mod:`streamanon.castle._native`, :mod:`streamanon.zanon._native`) and loads it with
:func:`load`: the first process on a machine compiles it with the system C compiler and the
Python and numpy headers (IEEE arithmetic, no contraction into fused multiply-adds) into
``$XDG_CACHE_HOME/streamanon/kernels``; later processes load the cached library in a few
milliseconds. When it cannot be built or loaded, :func:`load` says why and the caller runs
its pure-Python (numpy or numba) twin of the same loop, which the tests hold it equal to.
``STREAMANON_NATIVE=0`` turns every kernel off.

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


def _build(source: str, target: Path) -> None:
    """Compile ``source`` to ``target`` (via a file of its own, renamed into place: two
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
        src = Path(tmp) / "kernel.c"
        src.write_text(source, encoding="utf-8")
        out = Path(tmp) / target.name
        extra = ["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else []
        cmd = [*cc, *FLAGS, *extra, *(f"-I{i}" for i in includes), str(src), "-o", str(out)]
        try:
            subprocess.run(cmd, check=True, capture_output=True, timeout=300)
        except subprocess.SubprocessError as exc:
            detail = (getattr(exc, "stderr", b"") or b"").decode(errors="replace")[:500]
            raise OSError(f"the build failed ({exc}): {detail}") from None
        os.replace(out, target)


def load(stem: str, module: str, source: str) -> tuple[ModuleType | None, str | None]:
    """The extension ``module`` (its ``PyInit_<module>``) compiled from ``source``, built
    first when the cache does not hold it, as ``(module, None)``; ``(None, reason)`` when it
    cannot be built or loaded. ``stem`` names the cached file (``<stem>_<key><suffix>``; the
    key hashes the source, the flags, Python's and numpy's versions)."""
    if os.environ.get("STREAMANON_NATIVE", "1") == "0":
        return None, "STREAMANON_NATIVE=0"
    if sys.platform == "win32":
        return None, "not built on Windows"
    import numpy as np

    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256("\0".join((source, " ".join(FLAGS), sys.version, np.__version__,
                                    suffix)).encode()).hexdigest()[:20]
    try:
        target = cache_dir() / f"{stem}_{key}{suffix}"
        if target.exists():
            _refuse_shared(target.parent.parent)
            _refuse_shared(target.parent)
        else:
            _build(source, target)
        _refuse_shared(target)
        spec = importlib.util.spec_from_file_location(module, target)
        if spec is None or spec.loader is None:
            return None, f"cannot load {target}"
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    except (OSError, ImportError, RuntimeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return loaded, None
