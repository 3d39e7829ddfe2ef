"""Writing a report: `report.html` (self-contained) and each figure as its
own PNG beside it, in one directory, created if needed."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .figures import render_figures
from .metrics import Report
from .page import html_page

PAGE = "report.html"


@dataclass(frozen=True)
class Written:
    page: Path
    figures: dict[str, Path]


def write_report(report: Report, directory: str | os.PathLike[str]) -> Written:
    """Every file is written aside first and moved into place once all are: a failure leaves nothing
    this call wrote (the directories it made included), and what was there before as it was. OSError
    where the directory cannot be made or a file written, naming that file (its `filename`)."""
    out = Path(directory)
    made = _make_directory(out)
    try:
        figures = render_figures(report)
        paths = {name: out / f"{name}.png" for name in figures}
        files = {path: figures[name] for name, path in paths.items()}
        page = out / PAGE
        files[page] = html_page(report, figures).encode("utf-8")
        _put(files)
    except BaseException:
        for directory_made in made:
            with contextlib.suppress(OSError):
                directory_made.rmdir()
        raise
    return Written(page, paths)


def _make_directory(out: Path) -> list[Path]:
    """Make `out` and its missing parents; those made, deepest first (to remove on a failure)."""
    missing = []
    at = out
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    out.mkdir(parents=True, exist_ok=True)
    return missing


def _put(files: dict[Path, bytes]) -> None:
    """Write each file aside (.NAME.partial), see nothing is in the way, then move each into place
    (a reader, a browser reloading, never sees half a file). On a failure the partial files go, and
    so do the files moved in where none was."""
    partials: dict[Path, Path] = {}
    moved_in: list[Path] = []
    try:
        for path, data in files.items():
            partials[path] = path.with_name(f".{path.name}.partial")
            try:
                partials[path].write_bytes(data)
            except OSError as exc:
                raise _naming(exc, path) from None
        for path in files:
            if _is_directory(path):    # a rename onto it fails: found before any file is moved
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        for path, partial in partials.items():
            existed = os.path.lexists(path)
            try:
                partial.replace(path)
            except OSError as exc:
                raise _naming(exc, path) from None
            if not existed:
                moved_in.append(path)
    except BaseException:
        for path in [*partials.values(), *moved_in]:
            with contextlib.suppress(OSError):
                path.unlink()
        raise


def _is_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except FileNotFoundError:
        return False


def _naming(exc: OSError, path: Path) -> OSError:
    """`exc` naming the file it was for, not the partial one written aside."""
    if exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror, str(path))
