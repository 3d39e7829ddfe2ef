"""What a chaos job runs: it records each run in a shared runs file, under
an exclusive flock, so the tests can count runs whatever happened to the
daemon meanwhile.

    job.py run RUNS SECONDS        start line, sleep, end line, exit 0
    job.py escape RUNS SECONDS     as run, but first leaves three processes
                                   behind (setsid, a double fork, setpgid)
    job.py hang RUNS               escape, then sleep until killed (no end line)
    job.py finish RUNS             ignores stop signals, and ends 1 s later with exit 0
    job.py census RUNS TAG         a line counting live processes of jobs
                                   whose environment carries CHAOS_ESCAPER=TAG

Lines: `start JOB ATTEMPT PID TOKEN TIME`, `end JOB ATTEMPT TIME`,
`overlap JOB ATTEMPT PID` (written at a start when an earlier run of the
same job is still alive: the job runs twice at once), and
`census JOB N PIDS`. Standard library only; the job's own environment
carries GQA_JOB_ID and GQA_ATTEMPT."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time


def token(pid: int) -> str | None:
    """The process's start time (with the pid: a process, not a reused pid); None when gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def locked(runs: str, write) -> None:
    with open(runs, "a+", encoding="ascii") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0)
            lines = fh.read().splitlines()
            for line in write(lines):
                fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def start(runs: str, job: str, attempt: str) -> None:
    me = os.getpid()

    def lines(existing):
        out = []
        for line in existing:
            parts = line.split()
            if parts[:2] == ["start", job] and len(parts) >= 5 and token(int(parts[3])) == parts[4]:
                out.append(f"overlap {job} {attempt} {parts[3]}")
        return out + [f"start {job} {attempt} {me} {token(me)} {time.time():.6f}"]

    locked(runs, lines)


def end(runs: str, job: str, attempt: str) -> None:
    locked(runs, lambda _: [f"end {job} {attempt} {time.time():.6f}"])


def escape() -> None:
    """Three ways out of the job's process group; each child inherits the environment."""
    subprocess.Popen(["setsid", "sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    subprocess.Popen(["sh", "-c", "(sleep 300 &) &"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL).wait()
    subprocess.Popen([sys.executable, "-c", "import os, time; os.setpgid(0, 0); time.sleep(300)"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)   # let them detach before the job goes on


def tagged(**variables: str) -> list[int]:
    """Live processes (not this one) whose environment carries each NAME=value."""
    needles = [f"\0{k}={v}\0".encode() for k, v in variables.items()]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                environ = b"\0" + fh.read() + b"\0"
        except OSError:
            continue
        if all(n in environ for n in needles) and token(int(entry)) is not None:
            found.append(int(entry))
    return found


def census(runs: str, job: str, tag: str) -> None:
    found = [str(pid) for pid in tagged(CHAOS_ESCAPER=tag)]
    locked(runs, lambda _: [f"census {job} {len(found)} {','.join(found) or '-'}"])


def main(argv: list[str]) -> int:
    mode, runs = argv[0], argv[1]
    job, attempt = os.environ["GQA_JOB_ID"], os.environ["GQA_ATTEMPT"]
    if mode == "census":
        start(runs, job, attempt)
        census(runs, job, argv[2])
        end(runs, job, attempt)
        return 0
    if mode == "finish":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
        start(runs, job, attempt)
        time.sleep(1.0)
        end(runs, job, attempt)
        os._exit(0)
    start(runs, job, attempt)
    if mode in ("escape", "hang"):
        escape()
    if mode == "hang":
        time.sleep(300)
        return 1
    time.sleep(float(argv[2]))
    # from the end line on, a stop signal waits until the process has exited 0: an end line
    # means the run ended by itself, so a later start is a second run of a finished job
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    end(runs, job, attempt)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
