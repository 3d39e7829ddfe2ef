"""The Slurm commands a batch script calls (srun, scontrol, squeue), as
gqa.runtime.slurm_tools writes them, installed once per daemon in the
state home and put first on every attempt's PATH. Readable by every user
when the daemon runs jobs as their owners.

srun records a step that failed in the file GQA_STEP_STATUS names (in the
attempt's own directory, the job's user's); the wrapper (processes.py) ends
a script that exits 0 after it with the step's code."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ...runtime.slurm_tools import install

log = logging.getLogger("gqa.executor")

Installer = Callable[[Path, str], Path]


def install_slurm_commands(directory: Path, *, shared: bool, installer: Installer | None = None,
                           python: str = sys.executable) -> Path | None:
    """Install the commands in `directory` (idempotent); the directory to put
    on PATH, or None when they could not be written (the jobs then run
    without them, and the daemon's log says why)."""
    installer = installer or install
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
