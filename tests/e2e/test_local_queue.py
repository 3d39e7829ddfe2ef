"""The daemon with real processes: every demo scenario, and what must hold
when things go wrong (crash, cancel, wall time, daemon restart)."""

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, pid_alive

pytestmark = pytest.mark.e2e
PY = sys.executable
TRAIN = str(ROOT / "examples" / "train.py")
# starts a worker in its own process, records pids, then runs until killed (ignoring SIGTERM if asked)
STUBBORN = (
    "import os, signal, subprocess, sys, time\n"
    "if sys.argv[2] == 'ignore': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen(['sleep', '300'])\n"
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {child.pid}')\n"
    "print('running', flush=True)\n"
    "time.sleep(300)\n"
)


def _pids(path: Path, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def _gone(pids: list[int], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_job_succeeds_with_its_environment_and_log(queue):
    [job_id] = queue.submit(["sh", "-c", "echo gpus=$CUDA_VISIBLE_DEVICES id=$GQA_JOB_ID attempt=$GQA_ATTEMPT "
                             "resume=[$GQA_RESUME_FROM] ckpt=$GQA_CHECKPOINT_DIR"], resources={"gpus": 2})
    job = queue.wait(job_id)
    assert job.state.value == "SUCCEEDED" and job.exit_code == 0
    log = queue.log(job_id)
    assert f"gpus=0,1 id={job_id} attempt=1 resume=[]" in log
    assert f"ckpt={queue.home}/checkpoints/{job_id}" in log
    assert [t.state.value for t in job.history] == ["SUBMITTED", "QUEUED", "STARTING", "RUNNING", "SUCCEEDED"]
    assert job.assigned == ()


def test_crash_fails_releases_gpus_and_leaves_no_orphan(queue, tmp_path):
    pids_file = tmp_path / "pids"
    [job_id] = queue.submit([PY, "-c", "import subprocess, sys\n"
                             "c = subprocess.Popen(['sleep', '300'])\n"
                             "open(sys.argv[1], 'w').write(str(c.pid))\n"
                             "raise SystemExit(3)", str(pids_file)])
    job = queue.wait(job_id)
    assert job.state.value == "FAILED" and job.exit_code == 3
    assert job.reason == "exit code 3"
    assert _gone(_pids(pids_file)), "the job's worker survived its crash"
    [other] = queue.submit(["true"], resources={"gpus": 4})
    assert queue.wait(other).state.value == "SUCCEEDED", "the crashed job's GPU was not released"


def test_application_error_is_retried_as_the_spec_allows(queue, tmp_path):
    marker = tmp_path / "tries"
    script = f"echo x >> {marker}; [ $(wc -l < {marker}) -ge 2 ]"
    [job_id] = queue.submit(["sh", "-c", script], retries={"on_error": 2, "backoff": "1s", "max_backoff": "1s"})
    job = queue.wait(job_id, timeout=20)
    assert job.state.value == "SUCCEEDED"
    assert (job.attempts, job.error_retries, job.interruptions) == (2, 1, 0)
    assert "retry 1 of 2" in " ".join(t.reason for t in job.history)
    [never] = queue.submit(["false"], retries={"on_error": 1, "backoff": "1s", "max_backoff": "1s"})
    job = queue.wait(never, timeout=20)
    assert job.state.value == "FAILED" and job.attempts == 2 and job.reason == "exit code 1 after 1 retries"


def test_high_priority_submitted_last_starts_before_queued_low_jobs(queue):
    fill = queue.submit(["sleep", "1"], array="0-3", priority="low")
    queue.wait(fill, ("RUNNING",))
    lows = queue.submit(["true"], array="0-2", priority="low")
    [high] = queue.submit(["true"], priority="high")
    jobs = queue.wait([*lows, high])
    starts = {j.id: j.first_start for j in jobs}
    assert all(starts[high] < starts[low] for low in lows)


def test_two_teams_bursts_interleave_by_fair_share(queue):
    fill = queue.submit(["sleep", "1"], array="0-3", team="ops")
    queue.wait(fill, ("RUNNING",))
    vision = queue.submit(["sleep", "0.3"], array="0-5", team="vision")
    nlp = queue.submit(["sleep", "0.3"], array="0-5", team="nlp")
    jobs = queue.wait([*vision, *nlp])
    order = "".join(j.team[0] for j in sorted(jobs, key=lambda j: (j.first_start, j.seq)))
    # every prefix of the start order is within one job of an even split
    for n in range(1, len(order) + 1):
        assert abs(order[:n].count("v") - order[:n].count("n")) <= 2, order


def test_requeue_resumes_from_the_checkpoint(queue):
    [job_id] = queue.submit([PY, TRAIN, "--steps", "30", "--step-seconds", "0.05", "--checkpoint-every", "3"])
    queue.wait_log(job_id, "step 12 ")
    [result] = queue.backend.control().requeue([job_id])
    assert result.action == "requeueing"
    job = queue.wait(job_id, timeout=30)
    log = queue.log(job_id)
    assert job.state.value == "SUCCEEDED" and "done at step 30" in log
    assert (job.attempts, job.error_retries, job.interruptions) == (2, 0, 1)
    resumed = [line for line in log.splitlines() if line.startswith("resumed from step")]
    assert resumed and int(resumed[0].split()[3]) >= 12
    states = [t.state.value for t in job.history]
    assert states[states.index("RETRY_WAIT") + 1] == "QUEUED"


@pytest.mark.parametrize("on_term", ["exit", "ignore"])
def test_cancel_kills_the_whole_group(make_queue, tmp_path, on_term):
    queue = make_queue(grace=1.0)
    pids_file = tmp_path / "pids"
    [job_id] = queue.submit([PY, "-c", STUBBORN, str(pids_file), on_term])
    pids = _pids(pids_file)
    queue.wait(job_id, ("RUNNING",))
    started = time.monotonic()
    queue.backend.control().cancel([job_id])
    job = queue.wait(job_id, timeout=10)
    assert job.state.value == "CANCELLED" and job.reason == "cancelled by user"
    assert _gone(pids), f"processes {pids} survived the cancel"
    if on_term == "ignore":  # needed SIGKILL after the grace period
        assert time.monotonic() - started >= 0.9


def test_cancel_a_queued_job_and_a_whole_array(queue):
    fill = queue.submit(["sleep", "30"], array="0-3")
    queue.wait(fill, ("RUNNING",))
    waiting = queue.submit(["true"], array="0-9")
    group = waiting[0].split("_")[0]
    results = queue.backend.control().cancel([group, fill[0]])
    assert {r.action for r in results if r.job.id in waiting} == {"cancelled"}
    assert all(queue.job(i).state.value == "CANCELLED" for i in waiting)
    assert queue.wait(fill[0]).state.value == "CANCELLED"


def test_wall_time_is_enforced_group_wide(make_queue, tmp_path):
    queue = make_queue(grace=0.5)
    pids_file = tmp_path / "pids"
    [job_id] = queue.submit([PY, "-c", STUBBORN, str(pids_file), "ignore"], limits={"wall_time": "2s"})
    pids = _pids(pids_file)
    job = queue.wait(job_id, timeout=15)
    assert job.state.value == "TIMED_OUT" and "wall time of 2s" in job.reason
    assert _gone(pids)
    ran = job.ended_at - job.started_at
    assert 2.0 <= ran < 5.0


def test_daemon_crash_readopts_running_jobs(queue):
    [job_id] = queue.submit(["sh", "-c", "sleep 2; echo finished"])
    queue.wait(job_id, ("RUNNING",))
    pid = queue.job(job_id).pid
    queue.crash()
    assert pid_alive(pid), "the job died with the daemon"
    queue.start()
    job = queue.wait(job_id, timeout=15)
    assert job.state.value == "SUCCEEDED" and job.attempts == 1 and job.interruptions == 0
    assert "finished" in queue.log(job_id)


def test_exit_while_daemon_down_is_recorded(queue):
    [ok, bad] = queue.submit(["sleep", "0.5"]) + queue.submit(["sh", "-c", "sleep 0.5; exit 4"])
    queue.wait([ok, bad], ("RUNNING",))
    queue.crash()
    time.sleep(1.5)
    queue.start()
    assert queue.wait(ok).state.value == "SUCCEEDED"
    job = queue.wait(bad)
    assert job.state.value == "FAILED" and job.exit_code == 4


def test_lost_process_is_requeued_not_failed(queue):
    [job_id] = queue.submit([PY, TRAIN, "--steps", "40", "--step-seconds", "0.05", "--checkpoint-every", "2"])
    queue.wait_log(job_id, "step 8 ")
    pid = queue.job(job_id).pid
    queue.crash()
    os.killpg(pid, signal.SIGKILL)  # the machine lost the job too (no exit record)
    queue.start()
    job = queue.wait(job_id, timeout=30)
    assert job.state.value == "SUCCEEDED"
    assert (job.attempts, job.error_retries, job.interruptions) == (2, 0, 1)
    assert "resumed from step" in queue.log(job_id)


def test_stop_requeues_running_jobs_and_start_resumes_them(queue):
    [job_id] = queue.submit([PY, TRAIN, "--steps", "30", "--step-seconds", "0.05", "--checkpoint-every", "5"])
    queue.wait_log(job_id, "step 6 ")
    queue.stop()
    job = queue.job(job_id)
    assert job.state.value in ("QUEUED", "RETRY_WAIT") and job.error_retries == 0
    queue.start()
    job = queue.wait(job_id, timeout=30)
    assert job.state.value == "SUCCEEDED" and "resumed from step" in queue.log(job_id)


def test_a_cancel_asked_while_the_daemon_is_down_is_carried_out_before_anything_starts(make_queue):
    queue = make_queue(gpus=1)
    [running] = queue.submit(["sleep", "60"])
    queue.wait(running, ("RUNNING",))
    pid = queue.job(running).pid
    queue.crash()
    [waiting] = queue.submit(["true"])            # straight into the database: no daemon to ring
    queue.backend.control().cancel([running])     # only the request is recorded while the daemon is down
    assert queue.job(running).request is not None
    queue.start()
    assert queue.wait(running).state.value == "CANCELLED"
    assert not pid_alive(pid), "the cancelled job's process outlived the restart"
    done = queue.wait(waiting)
    assert done.state.value == "SUCCEEDED"
    # the queued job started only once the cancelled one had released the GPU
    assert done.first_start >= queue.job(running).ended_at
