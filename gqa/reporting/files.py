"""Writing a report: `report.html` (self-contained) and each figure as its
own PNG beside it, in one directory, created if needed."""

from __future__ import annotations

import os
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
    """OSError where the directory cannot be made or written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    figures = render_figures(report)
    paths = {}
    for name, png in figures.items():
        paths[name] = out / f"{name}.png"
        _write(paths[name], png)
    page = out / PAGE
    _write(page, html_page(report, figures).encode("utf-8"))
    return Written(page, paths)


def _write(path: Path, data: bytes) -> None:
    """Whole or not at all: a reader (a browser reloading) never sees half a file."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    partial.replace(path)
