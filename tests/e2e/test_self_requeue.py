"""A Slurm script that requeues or cancels itself from inside, with real
processes: the request the tools leave in the attempt's files, read by the
executor when the attempt ends (and by a restarted daemon that reaps it),
never by the next attempt; and through a real daemon, the self-resubmission
idiom (`trap 'scontrol requeue $SLURM_JOB_ID' USR1` with --signal) running
twice and ending COMPLETED, `scancel $SLURM_JOB_ID` ending CANCELLED."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.processes import read_exit
from gqa.models.job import JobState
from gqa.models.outcome import ExitKind
from gqa.ports import Change, Inventory
from tests.builders import gpus, job_record
from tests.e2e.conftest import next_end

pytestmark = pytest.mark.e2e


@pytest.fixture
def paths(tmp_path):
    home = StatePaths(tmp_path / "home")
    home.ensure()
    return home


def executor_of(paths: StatePaths) -> LocalExecutor:
    return LocalExecutor(paths, Inventory(gpus=gpus(2)))      # gqa.runtime's own srun, scontrol, scancel


def record(tmp_path, script: str, attempts: int = 1, **spec):
    return job_record(id="7", group="7", spec={"command": ["bash", "-c", script], "workdir": str(tmp_path), **spec},
                      attempts=attempts)


def collected(executor: LocalExecutor, job, timeout: float = 30.0):
    """Launch and release the job's attempt; its Exit as collect() reports it."""
    executor.launch(job, (0,), job.attempts)
    executor.release([job.id])
    return next_end(executor, timeout)


@pytest.mark.parametrize("script, kind, code", [
    ('scontrol requeue $SLURM_JOB_ID; sleep 30', ExitKind.SELF_REQUEUE, 143),
    ('trap "exit 0" TERM; scontrol requeue $SLURM_JOB_ID; exit 0', ExitKind.SELF_REQUEUE, 0),
    ('scontrol requeue $SLURM_JOB_ID; scontrol requeue $SLURM_JOB_ID; sleep 30', ExitKind.SELF_REQUEUE, 143),
    ('scancel $SLURM_JOB_ID; sleep 30', ExitKind.SELF_CANCEL, 143),
    ('trap "" TERM; scontrol requeue $SLURM_JOB_ID; scancel $SLURM_JOB_ID; exit 3', ExitKind.SELF_CANCEL, 3),
    ('sleep 0.1', ExitKind.APP, 0),
])
def test_the_executor_reports_what_the_job_asked(paths, tmp_path, script, kind, code):
    ended = collected(executor_of(paths), record(tmp_path, script))
    assert (ended.kind, ended.code) == (kind, code), ended


def test_a_restarted_daemon_reads_the_request_and_the_next_attempt_does_not(paths, tmp_path):
    script = ('if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then scontrol requeue $SLURM_JOB_ID; sleep 30; fi; '
              'echo "$SLURM_RESTART_COUNT" > second.txt')
    first = record(tmp_path, script)
    executor = executor_of(paths)
    executor.launch(first, (0,), 1)
    executor.release([first.id])
    deadline = time.monotonic() + 30
    while read_exit(paths.exit_for(first.id, 1))[0] is None:   # ended, never collected: the daemon died
        assert time.monotonic() < deadline, "the first attempt never ended"
        time.sleep(0.05)
    reaped = executor_of(paths).reap(first)
    assert (reaped.kind, reaped.code) == (ExitKind.SELF_REQUEUE, 143), reaped
    assert reaped.detail == "scontrol requeue $SLURM_JOB_ID"
    second = replace(first, attempts=2)        # the first not forgotten yet: its files are still there
    assert collected(executor_of(paths), second).kind == ExitKind.APP
    assert (tmp_path / "second.txt").read_text() == "1\n"


def test_a_no_requeue_job_is_told_slurms_words_and_goes_on(paths, tmp_path):
    script = 'scontrol requeue $SLURM_JOB_ID 2> said.txt; echo "rc=$?" >> said.txt'
    ended = collected(executor_of(paths), record(tmp_path, script, requeue=False))
    assert (ended.kind, ended.code) == (ExitKind.APP, 0)
    assert (tmp_path / "said.txt").read_text() == "Requested operation is presently disabled for job 7\nrc=1\n"


# -- through a real daemon ------------------------------------------------------------------------------------
SELF_RESUBMITTING = """#!/bin/bash
#SBATCH --job-name=resubmit
#SBATCH --time=1
#SBATCH --signal=B:USR1@58
#SBATCH --output=logs/%x-%j.out
echo "attempt restart=${SLURM_RESTART_COUNT:-0} out=$(scontrol show job $SLURM_JOB_ID | grep -oP 'StdOut=\\K\\S+')"
if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then echo finished; exit 0; fi
trap 'echo requeueing; scontrol requeue $SLURM_JOB_ID' USR1
srun sleep 50 & wait
"""

GIVING_UP = """#!/bin/bash
echo "giving up"
scancel $SLURM_JOB_ID
sleep 30
echo "still running"
"""


def submit(queue, project: Path, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", "from cli.client import run; run()", "submit", *args, "-o", "json"],
                          env=queue.env, cwd=str(project), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_script_that_requeues_itself_runs_twice_and_completes(make_queue, tmp_path):
    project = tmp_path / "project"
    (project / "logs").mkdir(parents=True)
    (project / "resubmit.sh").write_text(SELF_RESUBMITTING)
    queue = make_queue(gpus=1)
    job_id = submit(queue, project, "resubmit.sh")["id"]
    waiting = queue.wait(job_id, states=("RETRY_WAIT",), timeout=60)
    # it ran 2 s: held back the rest of a minute, as one self-requeue a minute allows; the test does not wait
    assert waiting.not_before - waiting.history[-1].at == pytest.approx(58, abs=1.5), waiting.reason
    queue.backend.store.apply([Change(job_id, JobState.RETRY_WAIT, None, "", time.time(),
                                      {"not_before": time.time()})])
    queue.backend.waker.wake([job_id])
    job = queue.wait(job_id, timeout=60)
    out = project / "logs" / f"resubmit-{job_id}.out"
    assert (job.state.value, job.attempts) == ("SUCCEEDED", 2), (job.reason, out.read_text())
    lines = out.read_text().splitlines()     # a requeue appends, as Slurm's
    assert lines[:2] == [f"attempt restart=0 out={out}", "requeueing"], lines
    assert lines[-2:] == [f"attempt restart=1 out={out}", "finished"], lines
    moves = [(t.state.value, t.reason) for t in job.history]
    [requeued] = [r for state, r in moves if state == "RETRY_WAIT"]
    assert re.fullmatch(r"requeued itself \(scontrol requeue \$SLURM_JOB_ID\) after \ds; starts again in 5\ds at the "
                        r"earliest: a job that requeues itself starts at most once every 1m00s; resumes from its last "
                        r"checkpoint", requeued), requeued
    assert job.error_retries == 0 and job.interruptions == 1


def test_a_script_that_cancels_itself_ends_cancelled(make_queue, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "give_up.sh").write_text(GIVING_UP)
    queue = make_queue(gpus=1)
    job_id = submit(queue, project, "give_up.sh")["id"]
    job = queue.wait(job_id, timeout=60)
    assert (job.state.value, job.reason, job.attempts) == ("CANCELLED", "cancelled itself (scancel $SLURM_JOB_ID)",
                                                           1)
    out = (project / f"slurm-{job_id}.out").read_text()
    assert "giving up" in out and "still running" not in out
