"""examples/train.py as a real process: SIGTERM mid-run, then resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "train.py"
STEPS = 40


def job_env(checkpoints: Path, attempt: int, resume_from: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GQA_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        GQA_JOB_ID="7",
        GQA_ATTEMPT=str(attempt),
        GQA_CHECKPOINT_DIR=str(checkpoints),
        GQA_RESUME_FROM=resume_from,
    )
    return env


def train(*extra: str) -> list[str]:
    return [sys.executable, str(SCRIPT), "--steps", str(STEPS), "--checkpoint-every", "5", *extra]


@pytest.mark.e2e
def test_sigterm_saves_and_next_attempt_resumes(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"

    # Attempt 1: interrupted after step 8, between periodic checkpoints.
    first = subprocess.Popen(
        train("--step-seconds", "0.05"),
        env=job_env(checkpoints, 1, ""),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None
    seen = [first.stdout.readline()]
    while not seen[-1].startswith("step 8 "):
        line = first.stdout.readline()
        assert line, f"exited early: {seen} {first.stderr.read()}"  # type: ignore[union-attr]
        seen.append(line)
    first.send_signal(signal.SIGTERM)
    rest, err = first.communicate(timeout=10)
    out = "".join(seen) + rest

    assert first.returncode == 143, err
    assert out.startswith("starting fresh")
    last_step = int(re.findall(r"^step (\d+) loss ", out, re.M)[-1])
    assert 8 <= last_step < STEPS
    assert f"preempted: saved step {last_step}" in out
    latest = (checkpoints / "latest").read_text().strip()
    assert latest == f"ckpt-{last_step}"  # saved at the signal, not the last multiple of 5
    assert json.loads((checkpoints / latest / "state.json").read_text())["step"] == last_step

    # Attempt 2: the queue hands over the latest checkpoint.
    second = subprocess.run(
        train("--step-seconds", "0.005"),
        env=job_env(checkpoints, 2, str(checkpoints / latest)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert second.returncode == 0, second.stderr
    lines = second.stdout.splitlines()
    resumed = re.match(r"resumed from step (\d+)", lines[0])
    assert resumed and int(resumed[1]) == last_step > 0
    steps = [int(m) for m in re.findall(r"^step (\d+) loss ", second.stdout, re.M)]
    assert steps == list(range(last_step + 1, STEPS + 1))  # no step lost or repeated
    assert lines[-1] == f"done at step {STEPS}"
    assert (checkpoints / "latest").read_text().strip() == f"ckpt-{STEPS}"


@pytest.mark.e2e
def test_standalone_run_uses_local_checkpoints(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GQA_")}
    argv = [sys.executable, str(SCRIPT), "--steps", "6", "--step-seconds", "0"]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*argv, "--checkpoint-every", "4"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=20,
        )

    first = run()
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("starting fresh")
    # gqa's own entries are hidden: the lock `latest` moves under, an ended process's staging folder
    saved = sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if not p.name.startswith("."))
    assert saved == ["ckpt-4", "ckpt-6", "latest"]
    second = run()
    assert second.stdout.startswith("resumed from step 6")
    assert second.stdout.splitlines()[-1] == "done at step 6"


@pytest.mark.e2e
def test_a_copy_run_as_a_job_finds_the_checkout_it_was_submitted_from(tmp_path: Path) -> None:
    # a job runs a copy of its script, kept with the job, from the directory it was submitted
    # from: with a python that has no gqa installed, the example looked beside the copy and failed
    copy = tmp_path / "exits" / "1.1.d" / "slurm_script"
    copy.parent.mkdir(parents=True)
    copy.write_text(SCRIPT.read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("GQA_") and k != "PYTHONPATH"}
    done = subprocess.run(
        # -S: no site-packages, so no installed gqa
        [sys.executable, "-S", str(copy), "--steps", "2", "--step-seconds", "0",
         "--checkpoint-dir", str(tmp_path / "ckpt")],
        env=env, cwd=REPO / "examples", capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "done at step 2"
