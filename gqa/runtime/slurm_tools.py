"""Slurm's commands inside a gqa job: `srun`, `scontrol`, `squeue`, `sacct` and
`scancel` (for the job itself) as small executables in a directory the job finds first on its PATH, and the file in
which a failed step leaves its exit code.

A script that runs `srun python train.py` and ends with `exit 0` would
otherwise succeed even when the training failed (Slurm calls it COMPLETED,
keeping the step's code only as the job's "derived" exit code). So a
failed step appends one line, "<exit code> <what ran>", to the file $GQA_STEP_STATUS
names, and whatever runs the job's command (the local executor's wrapper,
gqa.runtime.code on AWS) turns the command's exit 0 into the first failed
step's code (`first_failed_step`). A failure the script retried is not one:
a step that succeeds takes out the lines of the same command that had
failed before it started (`until srun python train.py; do sleep 60; done`).

`sbatch` is left out on purpose: inside a job, submitting again needs the
submitter's credentials and rights, which a job does not carry.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from . import user_file

STEP_STATUS_ENV = "GQA_STEP_STATUS"
TOOLS = {"srun": "gqa.runtime.srun", "scontrol": "gqa.runtime.scontrol", "squeue": "gqa.runtime.squeue",
         "sacct": "gqa.runtime.sacct", "scancel": "gqa.runtime.scancel"}
MAX_DESCRIPTION = 400          # characters of the failed step's command kept in its line
MAX_STEPS_READ = 64 * 1024     # bytes of the failed steps' file read for the first failure

# the directory that holds the gqa package, so the tools import this very runtime
_ROOT = str(Path(__file__).resolve().parents[2])


def shim(module: str, python: str) -> str:
    """The text of one tool: `python -I` ignores the job's PYTHONPATH and its current directory
    for the tool alone (a project may hold its own `gqa`), while the job's environment, which
    the tool passes on to what it starts, stays as it was."""
    code = f"import sys; sys.path.insert(0, {_ROOT!r}); from {module} import main; main()"
    return f'#!/bin/sh\nexec {shlex.quote(python)} -I -c {shlex.quote(code)} "$@"\n'


def install(directory: str | os.PathLike[str], python: str = sys.executable) -> Path:
    """Write the tools into `directory` (made if missing): each mode 0755, written whole
    beside its name and renamed over it, and left alone when it already says the same, so
    two processes installing at once, or again, leave the same complete files."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for name, module in TOOLS.items():
        install_file(target / name, shim(module, python), 0o755)
    return target


def install_file(path: Path, text: str, mode: int) -> None:
    """`text` at `path` with `mode`, in whole (a job starting meanwhile finds the old file or the
    new one), unless it is there already."""
    try:
        if path.read_text(encoding="utf-8") == text and path.stat().st_mode & 0o777 == mode:
            return
    except OSError:
        pass
    fd, staged = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(staged, mode)
        os.replace(staged, path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


def record_failed_step(code: int, description: str, environ: Mapping[str, str] | None = None) -> None:
    """Append "<code> <description>" to $GQA_STEP_STATUS, when the job has one. One write of
    one line in append mode, under the steps' lock, so steps that fail at once never mix their
    lines and a retry's rewrite (`forgive_retried`) loses none."""
    path = (os.environ if environ is None else environ).get(STEP_STATUS_ENV, "")
    if not path or code == 0:
        return
    try:
        with _steps_lock(path):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{code} {_line_text(description)}\n".encode("utf-8", "replace"))
            finally:
                os.close(fd)
    except OSError as exc:
        sys.stderr.write(f"gqa: cannot record the failed step in {path}: {exc.strerror or exc}\n")


def failed_so_far(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The failed steps' lines as a step starts: the failures that ended before it."""
    path = (os.environ if environ is None else environ).get(STEP_STATUS_ENV, "")
    if not path:
        return ()
    try:
        with _steps_lock(path), open(path, encoding="utf-8", errors="replace") as lines:
            return tuple(line.rstrip("\n") for line in lines)
    except OSError:
        return ()


def forgive_retried(description: str, earlier: Sequence[str], environ: Mapping[str, str] | None = None) -> None:
    """A step that succeeded: take out the lines of `earlier` (failed before it started) that ran
    the same command, so a retry loop that got there in the end does not fail the job. A failure
    of another command, or one that ended while this step ran, stays."""
    path = (os.environ if environ is None else environ).get(STEP_STATUS_ENV, "")
    command = _command_of(_line_text(description))
    retried = {line for line in earlier if _command_of(line.partition(" ")[2]) == command}
    if not path or not retried:
        return
    try:
        with _steps_lock(path):
            with open(path, encoding="utf-8", errors="replace") as lines:
                kept = [line for line in lines if line.rstrip("\n") not in retried]
            if not kept:
                os.unlink(path)
                return
            fd, staged = tempfile.mkstemp(prefix=".steps-", dir=os.path.dirname(path) or ".")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.writelines(kept)
                os.replace(staged, path)
            except BaseException:
                Path(staged).unlink(missing_ok=True)
                raise
    except OSError as exc:
        sys.stderr.write(f"gqa: cannot record the retried step in {path}: {exc.strerror or exc}\n")


def _line_text(description: str) -> str:
    return " ".join(description.split())[:MAX_DESCRIPTION]


def _command_of(text: str) -> str:
    """"step 3: srun python train.py" -> "srun python train.py" (the step's number aside)."""
    return text.partition(": ")[2] if text.startswith("step ") else text


@contextlib.contextmanager
def _steps_lock(path: str) -> Iterator[None]:
    """The lock the step counter is taken under (a file beside $GQA_STEP_STATUS)."""
    fd = os.open(f"{path}.steps", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def first_failed_step(path: str | os.PathLike[str]) -> tuple[int, str] | None:
    """The first line's (code, description), or None when no step failed. The file is the
    job's to write and a shared box's root daemon reads it: only its first bytes, and only
    a regular file (user_file: no link to a file root alone may read, no FIFO to wait on)."""
    try:
        text = user_file.read_text(path, limit=MAX_STEPS_READ)
    except OSError:
        return None
    for line in text.splitlines():
        code, _, description = line.strip().partition(" ")
        if code.isdigit() and int(code) > 0:
            return min(int(code), 255), description
    return None


def next_step_id(environ: Mapping[str, str] | None = None) -> int:
    """This job's next step number, 0 first: a counter in a file beside $GQA_STEP_STATUS,
    taken under a lock so steps started at once get different numbers. 0 without one."""
    path = (os.environ if environ is None else environ).get(STEP_STATUS_ENV, "")
    if not path:
        return 0
    try:
        fd = os.open(f"{path}.steps", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        text = os.read(fd, 32).decode("ascii", "replace").strip()
        step = int(text) if text.isdigit() else 0
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(step + 1).encode())
        return step
    finally:
        os.close(fd)
