"""The Slurm commands a batch script calls (srun, scontrol, squeue), as
gqa.runtime.slurm_tools writes them, installed once per daemon in the
state home and put first on every attempt's PATH. Readable by every user
when the daemon runs jobs as their owners.

srun records a step that failed in the file GQA_STEP_STATUS names (one
per attempt, writable by the job's user); the wrapper (processes.py) ends
a script that exits 0 after it with the step's code."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("gqa.executor")

STEP_STATUS_ENV = "GQA_STEP_STATUS"      # the name srun writes to (gqa.runtime.slurm_tools)
Installer = Callable[[Path, str], Path]


def runtime_installer() -> Installer | None:
    """gqa.runtime.slurm_tools.install, or None where this gqa has no Slurm commands."""
    try:
        module = importlib.import_module("gqa.runtime.slurm_tools")
    except ImportError:
        return None
    return getattr(module, "install", None)


def install_slurm_commands(directory: Path, *, shared: bool, installer: Installer | None = None,
                           python: str = sys.executable) -> Path | None:
    """Install the commands in `directory` (idempotent); the directory to put
    on PATH, or None when there are none or they could not be written (the
    jobs then run without them, and the daemon's log says why)."""
    installer = installer or runtime_installer()
    if installer is None:
        return None
    try:
        where = Path(installer(directory, python))
        if shared:   # jobs run as their owners: every user reads and runs them
            os.chmod(where, 0o755)
            for entry in where.iterdir():
                if entry.is_file() and not entry.is_symlink():
                    os.chmod(entry, 0o755)
        return where
    except OSError as exc:
        log.warning("the Slurm commands (srun, scontrol) could not be installed in %s: %s", directory, exc)
        return None
