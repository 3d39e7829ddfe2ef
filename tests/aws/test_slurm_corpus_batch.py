"""The Slurm script corpus (tests/slurm_corpus/) on the AWS path: each script
read as `gqa submit` reads it, launched through BatchCompute, and the
SubmitJob request checked for what the script asked (GPUs, CPUs, memory, time,
Slurm's variables, the warning signal the job's runtime sends)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gqa.models.expand import expand
from gqa.models.loader import load_spec
from tests.aws.test_batch_compute import aws, clock, compute, launched_request  # noqa: F401 (fixtures)
from tests.builders import job_record

pytestmark = pytest.mark.aws
CORPUS = Path(__file__).resolve().parents[1] / "slurm_corpus"


def request_for(compute, script: str, gpus: tuple[int, ...], task: int | None = None) -> tuple[dict, dict]:  # noqa: F811
    spec = load_spec(script, cwd=str(CORPUS))
    jobs = expand(spec)
    task_spec, index, extra = jobs[task] if task is not None else jobs[0]
    record = job_record(spec=task_spec, id="12" if index is None else f"12_{index}", group="12",
                        array_index=index, extra_env=extra, seq=40)
    request, _ = launched_request(compute, record, gpus)
    env = {e["name"]: e["value"] for e in request["containerOverrides"]["environment"]}
    return request, env


def needs(request: dict) -> dict[str, str]:
    return {r["type"]: r["value"] for r in request["containerOverrides"]["resourceRequirements"]}


def test_an_array_task_knows_its_index_its_array_and_its_cpus(compute):  # noqa: F811
    request, env = request_for(compute, "lr_sweep.sh", (0,), task=2)
    assert (env["SLURM_ARRAY_JOB_ID"], env["SLURM_ARRAY_TASK_ID"], env["SLURM_ARRAY_TASK_COUNT"],
            env["SLURM_ARRAY_TASK_MIN"], env["SLURM_ARRAY_TASK_MAX"]) == ("12", "2", "4", "0", "3")
    assert env["SLURM_JOB_NAME"] == "lr_sweep" and env["SLURM_CPUS_PER_TASK"] == "2"
    assert env["OMP_NUM_THREADS"] == "2" and env["SLURM_JOB_ID"].isdigit()
    assert needs(request)["GPU"] == "1" and needs(request)["VCPU"] == "2"
    assert request["timeout"]["attemptDurationSeconds"] >= 600


def test_a_ddp_script_asks_for_its_tasks_gpus(compute):  # noqa: F811
    request, env = request_for(compute, "ddp_train.sh", (0, 1, 2, 3))
    assert (env["SLURM_NTASKS"], env["SLURM_GPUS_PER_TASK"], env["SLURM_NNODES"]) == ("4", "1", "1")
    assert needs(request)["GPU"] == "4" and needs(request)["VCPU"] == "4"
    assert request["containerOverrides"]["command"][-1].endswith("ddp_train.sh")


def test_a_cpu_only_step_asks_for_no_gpu(compute):  # noqa: F811
    request, env = request_for(compute, "preprocess.sh", ())
    assert "GPU" not in needs(request)
    assert needs(request)["VCPU"] == "2" and needs(request)["MEMORY"] == "128"
    assert env["SLURM_CPUS_PER_TASK"] == "2" and env.get("SLURM_GPUS_ON_NODE", "0") == "0"


def test_the_warning_signal_travels_to_the_jobs_runtime(compute):  # noqa: F811
    _, env = request_for(compute, "warned.sh", (0,))
    assert env["GQA_WARN_SIGNAL"] == "B:USR1@55"
    assert env["GQA_WALL_SECONDS"] == "60"
