"""The Slurm commands a batch script calls (srun, scontrol, squeue), as
gqa.runtime.slurm_tools writes them, installed once per daemon in the
state home and put first on every attempt's PATH, with the file every
attempt's BASH_ENV names (gqa.runtime.login_shell), which puts them first
again in a login shell (`#!/bin/bash -l`). Readable by every user when the
daemon runs jobs as their owners.

srun records a step that failed in the file GQA_STEP_STATUS names (in the
attempt's own directory, the job's user's); the wrapper (processes.py) ends
a script that exits 0 after it with the step's code."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ...runtime.login_shell import FILE_NAME, write_bash_env
from ...runtime.slurm_tools import install

log = logging.getLogger("gqa.executor")

Installer = Callable[[Path, str], Path]


def install_slurm_commands(directory: Path, *, shared: bool, installer: Installer | None = None,
                           python: str = sys.executable) -> Path | None:
    """Install the commands in `directory` (idempotent), and the BASH_ENV file
    beside them (`bash_env_of`, mode 0644); the directory to put on PATH, or
    None when they could not be written (the jobs then run without them, and
    the daemon's log says why)."""
    installer = installer or install
    try:
        where = Path(installer(directory, python))
        write_bash_env(where)
        if shared:   # jobs run as their owners: every user reads and runs them
            os.chmod(where, 0o755)
            for entry in where.iterdir():
                if entry.is_file() and not entry.is_symlink() and entry.name != FILE_NAME:
                    os.chmod(entry, 0o755)
        return where
    except OSError as exc:
        log.warning("the Slurm commands (srun, scontrol) could not be installed in %s: %s", directory, exc)
        return None


def bash_env_of(commands: Path) -> Path:
    """The BASH_ENV file installed with the commands in `commands`."""
    return commands / FILE_NAME
