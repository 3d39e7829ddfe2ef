"""A stopped job's processes get SIGTERM and the whole grace, as under Slurm
(SIGTERM to every process of the job, KillWait, then SIGKILL), even once the
batch shell that started them has died of the SIGTERM."""

import os
import time

import pytest

from tests.e2e.conftest import pid_alive

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# bash starts python as a child (not exec): bash dies of the SIGTERM at once, python checkpoints
TRAIN = """
import os, signal, sys, time
def on_term(signum, frame):
    if os.environ["MODE"] == "ignore":
        return
    print("saving", flush=True)
    time.sleep(float(os.environ["MODE"]))
    with open("ckpt.pt", "w") as fh:
        fh.write("step 7")
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
with open("train.pid", "w") as fh:
    fh.write(str(os.getpid()))
print("ready", flush=True)
while True:
    time.sleep(0.1)
"""


def _submit(queue, mode: str, output: str | None = None) -> str:
    """MODE: seconds the checkpoint takes, or "ignore"."""
    (queue.home / "train.py").write_text(TRAIN)
    script = f"MODE={mode} python3 train.py; echo bash-went-on"
    [job_id] = queue.submit(["bash", "-c", script], **({"output": output} if output else {}))
    deadline = time.monotonic() + 20
    while "ready" not in (_read(queue.home / output) if output else queue.log(job_id)):
        assert time.monotonic() < deadline, queue.log(job_id)
        time.sleep(0.05)
    return job_id


def _read(path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_cancelled_jobs_child_saves_its_checkpoint_within_the_grace(make_queue):
    queue = make_queue(grace=8.0)
    job_id = _submit(queue, "3")
    started = time.monotonic()
    queue.cli("cancel", job_id, check=True)
    job = queue.wait(job_id, timeout=30)
    assert job.state.value == "CANCELLED", job.reason
    assert (queue.home / "ckpt.pt").read_text() == "step 7"
    assert time.monotonic() - started >= 3   # it ended when the child did, not before
    assert "saved" in queue.log(job_id) and "bash-went-on\n" not in queue.log(job_id)


def test_a_checkpoint_longer_than_the_output_copies_wait_still_prints_to_output(make_queue):
    # the wrapper's 5 s wait for its output copies is no limit on a stopped job's grace
    queue = make_queue(grace=10.0)
    job_id = _submit(queue, "6", output="out.txt")
    queue.cli("cancel", job_id, check=True)
    job = queue.wait(job_id, timeout=30)
    assert job.state.value == "CANCELLED", job.reason
    assert (queue.home / "ckpt.pt").read_text() == "step 7"
    out = _read(queue.home / "out.txt")
    assert "saving" in out and "saved" in out and "bash-went-on" not in out


def test_a_child_that_ignores_sigterm_is_killed_when_the_grace_runs_out(make_queue):
    queue = make_queue(grace=2.0)
    job_id = _submit(queue, "ignore")
    pid = int((queue.home / "train.pid").read_text())
    started = time.monotonic()
    queue.cli("cancel", job_id, check=True)
    job = queue.wait(job_id, timeout=30)
    took = time.monotonic() - started
    assert job.state.value == "CANCELLED", job.reason
    assert 1.5 <= took < 10, took
    deadline = time.monotonic() + 5
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(pid)
    assert not os.path.exists(queue.home / "ckpt.pt")
