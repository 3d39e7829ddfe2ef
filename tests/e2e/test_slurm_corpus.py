"""Realistic Slurm scripts (tests/slurm_corpus/), unchanged, through the real
`gqa submit` and a real daemon: what each writes is what it would write under
Slurm on one node (the same scripts run under Slurm in
benchmarks/slurm_parity.py)."""

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CORPUS = Path(__file__).resolve().parents[1] / "slurm_corpus"


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the corpus as a user's project directory."""
    work = tmp_path / "project"
    shutil.copytree(CORPUS, work)
    (work / "results").mkdir()
    (work / "logs").mkdir()
    return work


def submit(queue, project: Path, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", "from cli.client import run; run()", "submit", *args, "-o", "json"],
                          env=queue.env, cwd=str(project), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def result(project: Path, name: str) -> str:
    return (project / "results" / name).read_text()


def test_an_array_indexes_a_bash_array_and_writes_its_own_output_files(make_queue, project):
    queue = make_queue()
    answer = submit(queue, project, "lr_sweep.sh")
    group = answer["id"]
    jobs = queue.wait(answer["jobs"], timeout=60)
    assert [j.state.value for j in jobs] == ["SUCCEEDED"] * 4, [j.reason for j in jobs]
    assert [result(project, f"lr_{i}.txt") for i in range(4)] == [f"lr={v}\n" for v in
                                                                   ("1e-4", "3e-4", "1e-3", "3e-3")]
    for i in range(4):
        out = (project / "logs" / f"lr_sweep-{group}_{i}.out").read_text()
        assert f"task={i} count=4 min=0 max=3" in out and "gpus=1 cpus=2" in out
        assert "a warning on stderr" not in out       # --error takes stderr
        assert (project / "logs" / f"lr_sweep-{group}_{i}.err").read_text() == "a warning on stderr\n"
        assert f"task={i} count=4" in queue.log(f"{group}_{i}")   # gqa keeps its own copy


def test_a_ddp_launch_through_srun_gives_each_rank_its_gpu(make_queue, project):
    queue = make_queue(gpus=4)
    answer = submit(queue, project, "ddp_train.sh")
    job = queue.wait(answer["id"], timeout=60)
    assert job.state.value == "SUCCEEDED", job.reason
    assert result(project, "ddp.txt").splitlines() == [
        f"rank={r} world=4 local={r} gpus=1 port_set=True" for r in range(4)]
    out = (project / f"ddp-{job.id}.out").read_text()
    assert f"master={socket.gethostname()} tasks=4 nodes=1" in out


def test_a_pipeline_runs_in_order_with_a_cpu_only_first_step(make_queue, project):
    queue = make_queue(gpus=1)
    prep = submit(queue, project, "preprocess.sh")["id"]
    train = submit(queue, project, f"--dependency=afterok:{prep}", "train.sh")["id"]
    report = submit(queue, project, "--dependency", f"afterany:{train}", "report.sh")["id"]
    jobs = queue.wait([prep, train, report], timeout=60)
    assert [j.state.value for j in jobs] == ["SUCCEEDED"] * 3, [j.reason for j in jobs]
    prep_job, train_job, report_job = jobs
    assert prep_job.gpus == 0
    assert re.fullmatch(r"prep gpus=\[\] cpus=2 nproc=2 omp=2\n", result(project, "prep.txt"))
    assert prep_job.memory == 128 * 2**20          # --mem-per-cpu x --cpus-per-task
    assert train_job.first_start >= prep_job.ended_at
    assert report_job.first_start >= train_job.ended_at
    assert result(project, "train.txt") == "trained on 100 rows\n"
    assert (project / "logs" / f"train-{train}.out").exists()
    assert result(project, "report.txt") == "prep.txt train.txt\n"


def test_a_failed_dependency_ends_the_next_step_with_the_reason(make_queue, project):
    queue = make_queue(gpus=1)
    (project / "preprocess.sh").write_text((project / "preprocess.sh").read_text().replace("set -euo pipefail",
                                                                                             "exit 4"))
    prep = submit(queue, project, "preprocess.sh")["id"]
    train = submit(queue, project, f"--dependency=afterok:{prep}", "train.sh")["id"]
    prep_job, train_job = queue.wait([prep, train], timeout=60)
    assert prep_job.state.value == "FAILED"
    assert train_job.state.value == "CANCELLED" and train_job.attempts == 0
    assert f"job {prep}" in train_job.reason and "never" in train_job.reason


def test_a_failed_srun_step_fails_the_job(make_queue, project):
    queue = make_queue()
    job = queue.wait(submit(queue, project, "step_fails.sh")["id"], timeout=60)
    assert job.state.value == "FAILED" and job.exit_code == 3, job.reason
    assert job.reason.startswith("srun step 0 (srun python3 -c ") and job.reason.endswith("failed with exit code 3")
    assert result(project, "cleanup.txt") == "cleanup after the step\n"   # the script went on, as in Slurm


def test_a_mig_profile_in_gres_is_a_gpu_type(make_queue, project):
    queue = make_queue(gpus=2, types=("1g.10gb",))
    job = queue.wait(submit(queue, project, "mig.sh")["id"], timeout=60)
    assert job.state.value == "SUCCEEDED", job.reason
    assert job.gpu_type == "1g.10gb" and "on GPUs 0 " in queue.log(job.id)   # GPU 0 is the 1g.10gb slice
    assert result(project, "mig.txt") == "mig gpus=1\n"


def test_the_warning_signal_arrives_before_the_time_limit(make_queue, project):
    queue = make_queue()
    job = queue.wait(submit(queue, project, "warned.sh")["id"], timeout=30)
    assert job.state.value == "SUCCEEDED", job.reason
    assert result(project, "warned.txt") == "checkpoint at warning\n"
    assert job.ended_at - job.first_start < 20     # warned 55 s before a 60 s limit, not at the limit
