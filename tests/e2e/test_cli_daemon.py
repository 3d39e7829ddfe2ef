"""The real `gqa` executable against a running daemon: submit is answered by
the daemon (verified owner, the submitter's environment and directory),
everything else runs in the client."""

import json
import os
import pwd
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.e2e


def gqa(queue, *args, cwd=None, env=None, timeout=60):
    return subprocess.run([sys.executable, "-c", "from cli.client import run; run()", *args],
                          env=dict(queue.env, **(env or {})), cwd=str(cwd or queue.home),
                          capture_output=True, text=True, timeout=timeout)


def test_submit_through_the_daemon_keeps_the_callers_identity_environment_and_directory(queue, tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    (work / "job.yaml").write_text("name: env-check\ncommand: [sh, -c, 'echo token=$MY_TOKEN; pwd']\n")
    proc = gqa(queue, "submit", "job.yaml", "-o", "json", cwd=work, env={"MY_TOKEN": "s3cret"})
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout)["id"]
    job = queue.wait(job_id)
    assert job.state.value == "SUCCEEDED"
    assert job.owner == pwd.getpwuid(os.getuid()).pw_name
    log = queue.log(job_id)
    assert "token=s3cret" in log and str(work) in log


def test_bad_input_through_the_daemon_is_still_exit_2_and_one_line(queue):
    proc = gqa(queue, "submit", "--gpus", "9", "--", "true")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "gqa: error: asks for 9 GPUs; the queue has 4\n"
    assert queue.backend.store.list() == []


@pytest.mark.parametrize("dash", [(), ("-",)], ids=["heredoc", "dash"])
def test_a_script_on_stdin_is_submitted_with_a_daemon_listening(queue, dash):
    """sbatch <<EOF: the daemon cannot read the caller's stdin, so the client reads the script."""
    proc = subprocess.run([sys.executable, "-c", "from cli.client import run; run()", "submit", *dash, "-o", "json"],
                          env=queue.env, cwd=str(queue.home), capture_output=True, text=True, timeout=60,
                          input="#!/bin/sh\n#SBATCH --gpus=1\necho from-stdin on $CUDA_VISIBLE_DEVICES\n")
    assert proc.returncode == 0, proc.stderr
    job = queue.wait(json.loads(proc.stdout)["id"])
    assert job.state.value == "SUCCEEDED" and job.name == "sbatch"
    assert "from-stdin on " in (queue.home / f"slurm-{job.id}.out").read_text()


def test_submit_wait_returns_the_jobs_result(queue):
    ok = gqa(queue, "submit", "--wait", "--", "true")
    bad = gqa(queue, "submit", "--wait", "--", "sh", "-c", "exit 3")
    assert ok.returncode == 0 and "completed" in ok.stderr
    assert bad.returncode == 1 and "exit code 3" in bad.stderr


def test_wait_on_jobs_already_queued_exits_as_submit_wait_does(queue):
    [ok] = queue.submit(["true"])
    array = queue.submit(["sh", "-c", "sleep 0.3; exit $((SLURM_ARRAY_TASK_ID == 1))"], array="0-2")
    passed = gqa(queue, "wait", ok, "-o", "json")
    failed = gqa(queue, "wait", array[0].split("_")[0], ok)
    assert passed.returncode == 0 and json.loads(passed.stdout)["counts"] == {"completed": 1}
    assert failed.returncode == 1, failed.stderr
    assert "4 of 4 done: 3 completed, 1 failed" in failed.stderr
    assert f"job {array[1]} failed: exit code 1" in failed.stderr


def test_logs_follow_prints_until_the_job_ends(queue):
    [job_id] = queue.submit(["sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done"])
    proc = gqa(queue, "logs", job_id, "-f", timeout=30)
    assert proc.returncode == 0
    assert [line for line in proc.stdout.splitlines() if line.startswith("line")] == ["line 1", "line 2", "line 3"]


def test_queue_and_status_from_the_client(queue):
    fill = queue.submit(["sleep", "5"], array="0-3")
    queue.wait(fill, ("RUNNING",))
    queue.submit(["true"], resources={"gpus": 2}, team="vision")
    data = json.loads(gqa(queue, "queue", "-o", "json").stdout)
    assert len(data["running"]) == 4 and data["gpus"] == {"total": 4, "free": 0, "outside": 0}
    assert data["pending"][0]["reason"] == "needs 2 GPUs, 0 free"
    table = gqa(queue, "queue").stdout
    assert "needs 2 GPUs, 0 free" in table and "running (4)" in table
    cancel = gqa(queue, "cancel", fill[0].split("_")[0])
    assert cancel.returncode == 0 and cancel.stdout.count("cancelling") == 4


def test_gpu_hour_budget_stops_the_job(make_queue):
    queue = make_queue(grace=0.5)
    [job_id] = queue.submit(["sleep", "60"], resources={"gpus": 2}, limits={"max_gpu_hours": 0.001})
    job = queue.wait(job_id, timeout=15)  # 3.6 GPU-seconds on 2 GPUs: about 1.8 s
    assert job.state.value == "TIMED_OUT" and job.reason == "used its budget of 0.001 GPU-hours"
    assert 1.5 < job.ended_at - job.started_at < 4.5


def test_local_status_says_which_containment_and_log_cap_are_in_force(queue):
    data = queue.cli_json("local", "status")
    assert data["running"] and data["pid"] == queue.pid
    assert data["containment"].startswith("containment: ") and "\n" not in data["containment"]
    assert data["logs"].startswith("job logs capped at 100 MiB")
    text = queue.cli("local", "status", check=True).stdout
    assert data["containment"] in text and data["logs"] in text


def test_local_start_and_stop_answer_scripts_in_json(tmp_path):
    """`gqa local start -d -o json` and `gqa local stop -o json`: one object each on stdout, nothing else."""
    env = dict(os.environ, GQA_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))

    def gqa_json(*args):
        done = subprocess.run([sys.executable, "-c", "from cli.client import run; run()", *args, "-o", "json"],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    started = gqa_json("local", "start", "--gpus", "2", "--detach")
    assert started == {"home": str(tmp_path / "home"), "gpus": 2, "detached": True, "pid": started["pid"]}
    assert gqa_json("local", "stop") == {"pid": started["pid"], "stopped": True, "running": False}
    assert gqa_json("local", "stop") == {"pid": None, "stopped": False, "running": False}
