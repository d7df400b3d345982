"""Outputs that never destroy data: refuse to overwrite an input, replace files only on success.

>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "in.csv").write_text("old input")
>>> with OutputSet(inputs=[d / "in.csv"]) as outs:
...     _ = pathlib.Path(outs.add(d / "out.csv", "-o")).write_text("new")
>>> (d / "out.csv").read_text()
'new'
>>> try:
...     with OutputSet(inputs=[d / "in.csv"]) as outs:
...         outs.add(d / "in.csv", "-o")
... except OutputError as exc:
...     print(exc)  # doctest: +ELLIPSIS
-o .../in.csv: is the input file itself; writing it would destroy the input (choose another name)
>>> (d / "in.csv").read_text()
'old input'

Design: docs/design/pipeline.md
"""

from __future__ import annotations

import os
import signal
import stat
import threading
from collections.abc import Iterable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Self

from streamanon.errors import OutputError, Terminated

STDOUT = "-"




def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _mode_for(target: Path) -> int:
    """The permission bits the final file gets: the old file's, else what ``open`` gives."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


class OutputSet:
    """The files one run writes; see the module docstring for the contract.

    ``inputs`` are the paths the run reads (``-`` and ``None`` are ignored): no output may be
    one of them. Use it as a context manager; :meth:`add` targets inside the block.
    """

    def __init__(self, inputs: Iterable[str | Path | None] = ()) -> None:
        self._inputs: list[tuple[str, Path, tuple[int, int] | None]] = []
        for src in inputs:
            if src is None or str(src) == STDOUT:
                continue
            p = Path(src)
            self._inputs.append((str(src), p.resolve(), _identity(p)))
        self._targets: list[tuple[str, Path, Path]] = []  # (option, target, temporary)
        self._stdout_option: str | None = None
        self._old_sigterm: object = None
        self.committed: list[str] = []
        self.not_written: list[str] = []
        self.failed = False
        self._committing = False

    # -- registering targets ---------------------------------------------------------------
    def add(self, target: str | Path, option: str = "output") -> str:
        """Check ``target`` and return the path to write instead (``-`` stays ``-``).

        Raises :class:`OutputError` naming ``option`` when the target is refused.
        """
        if str(target) == STDOUT:
            if self._stdout_option is not None:
                raise OutputError(f"{option} -: standard output is already taken by "
                                  f"{self._stdout_option}")
            self._stdout_option = option
            return STDOUT
        where = f"{option} {target}"
        path = Path(target)
        if path.is_symlink():  # write through the link: the file it points to is replaced
            path = path.resolve()
        resolved = path.resolve()
        ident = _identity(path)
        for name, res, src_ident in self._inputs:
            if resolved == res or (ident is not None and ident == src_ident):
                what = "the input file itself" if str(target) == name else (
                    f"the same file as the input {name}")
                raise OutputError(f"{where}: is {what}; writing it would destroy the input "
                                  "(choose another name)")
        for other_option, other, _ in self._targets:
            if other.resolve() == resolved or (ident is not None and ident == _identity(other)):
                raise OutputError(f"{where}: is also the file of {other_option}; give each "
                                  "output its own name")
        if path.is_dir():
            raise OutputError(f"{where}: is a folder; give a file name")
        folder = path.parent
        if not folder.is_dir():
            raise OutputError(f"{where}: the folder {str(folder)!r} does not exist "
                              "(create it first)")
        mode = _mode_for(path)
        while True:
            # ".published.x1y2.partial.csv": hidden, marked, and keeping the extension; listed
            # before it exists, so that a signal at any moment finds it to remove
            tmp = folder / f".{path.stem}.{os.urandom(4).hex()}.partial{path.suffix}"
            self._targets.append((option, path, tmp))
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                self._targets.pop()
                continue
            except OSError as exc:
                self._targets.pop()
                raise OutputError(f"{where}: cannot write in the folder {str(folder)!r} "
                                  f"({exc.strerror or exc})") from None
            break
        os.close(fd)
        os.chmod(tmp, mode)
        return str(tmp)

    def display(self, path: str | Path) -> str:
        """The name to show for ``path``: its target when it is one of the temporary files."""
        for _, target, tmp in self._targets:
            if str(tmp) == str(path):
                return str(target)
        return str(path)

    @property
    def targets(self) -> list[str]:
        """The files this set will write, in the order they were added."""
        return [str(t) for _, t, _ in self._targets]

    # -- leaving ---------------------------------------------------------------------------
    def commit(self) -> None:
        """Rename every temporary file onto its target (called when the block succeeds).

        When a rename fails or a signal stops it, each target is told as written or not as
        its temporary file is gone (renamed) or still there (then removed)."""
        self._committing = True
        try:
            for _, target, tmp in self._targets:
                os.replace(tmp, target)
                self.committed.append(str(target))
        except BaseException:
            self.settle()
            raise

    def discard(self) -> None:
        """Remove every temporary file; the targets keep their previous content."""
        self.failed = True
        self.settle()

    def settle(self) -> None:
        """Remove every temporary file still there and tell each target as written or not.

        For a run stopped at any moment, a signal even inside this set's own methods (the
        caller that catches it calls this again): a target is written when the commit had
        begun and its temporary file is gone (renamed onto it). Calling it again changes
        nothing."""
        told = set(self.not_written)  # their temporary files are removed, not renamed
        gone = [not tmp.exists() for _, _, tmp in self._targets]
        self.committed = [str(t) for (_, t, _), g in zip(self._targets, gone, strict=True)
                          if g and self._committing and str(t) not in told]
        self.not_written = [str(t) for _, t, _ in self._targets if str(t) not in self.committed]
        self.failed = self.failed or bool(self.not_written)
        self._remove([tmp for _, _, tmp in self._targets])

    @staticmethod
    def _remove(paths: list[Path]) -> None:
        for tmp in paths:
            Path(tmp).unlink(missing_ok=True)

    def describe_failure(self) -> str:
        """One line for stderr after a failed run: what was not written, what is incomplete."""
        parts = []
        if self.not_written:
            parts.append("not written (previous content, if any, untouched): "
                         + ", ".join(self.not_written))
        if self.committed:
            parts.append("written: " + ", ".join(self.committed))
        if self._stdout_option is not None:
            parts.append(f"standard output ({self._stdout_option}) received an incomplete "
                         "stream: discard it")
        return "; ".join(parts) if parts else "no output was written"

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            def on_sigterm(signum: int, frame: FrameType | None) -> None:
                raise Terminated(signum)
            try:
                self._old_sigterm = signal.signal(signal.SIGTERM, on_sigterm)
            except ValueError:  # not the main interpreter
                self._old_sigterm = None
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if et is None:
                self.commit()
            else:
                self.discard()
        finally:
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)  # type: ignore[arg-type]
                self._old_sigterm = None


__all__ = ["STDOUT", "OutputError", "OutputSet", "Terminated"]
