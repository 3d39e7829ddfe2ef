"""The job's user and memory as a Slurm script reads them (gqa/models/slurm_env.py):
SLURM_JOB_USER, SLURM_JOB_UID and SLURM_JOB_GID, and the one SLURM_MEM_PER_* variable
the sbatch option asked (Slurm's batch environment sets SLURM_MEM_PER_CPU for
--mem-per-cpu, else SLURM_MEM_PER_NODE; sbatch SLURM_MEM_PER_GPU for --mem-per-gpu),
in MiB as plain integers."""

import pytest

from gqa.models.loader import parse_directives, validate
from gqa.models.slurm_env import slurm_env
from tests.builders import job_record

MEMORY_VARIABLES = ("SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU")


def from_script(directives: str, **given):
    """The record of a job whose batch script holds `directives` (and gqa submit's own flags)."""
    raw = parse_directives(f"#!/bin/bash\n{directives}\n", now=0.0, given=given or None)
    raw.setdefault("resources", {}).update(given)   # the flags are merged over the directives, as load_spec does
    return job_record(spec=validate({"command": ["run.sh"], "owner": "alice", **raw}))


@pytest.mark.parametrize("directives, given, expected", [
    ("#SBATCH --mem=16G", {}, {"SLURM_MEM_PER_NODE": "16384"}),
    ("#SBATCH --mem=1500K", {}, {"SLURM_MEM_PER_NODE": "2"}),                        # whole MiB, rounded up
    ("#SBATCH -c 4 --mem-per-cpu=2G", {}, {"SLURM_MEM_PER_CPU": "2048"}),
    ("#SBATCH -n 3 --mem-per-cpu=512M", {}, {"SLURM_MEM_PER_CPU": "512"}),          # one CPU per task
    ("#SBATCH --mem-per-cpu=100", {}, {"SLURM_MEM_PER_CPU": "100"}),                # a bare number is MiB
    ("#SBATCH -c 2 --mem-per-cpu=1G", {"cpus": 3}, {"SLURM_MEM_PER_CPU": "1024"}),  # per CPU, of the CPUs given
    ("#SBATCH -c 2 --mem-per-cpu=1G", {"memory": "5Gi"}, {"SLURM_MEM_PER_NODE": "5120"}),   # the flag's total
    ("#SBATCH --gpus=2 --mem-per-gpu=10G", {}, {"SLURM_MEM_PER_GPU": "10240"}),
    ("#SBATCH --gpus=0 --mem-per-gpu=1G", {}, {"SLURM_MEM_PER_GPU": "1024"}),
    ("#SBATCH --mem=0 --gres=gpu:1", {}, {}),                                       # no limit: no variable
    ("#SBATCH -c 4", {}, {}),
])
def test_the_memory_option_asked_names_its_variable(directives, given, expected):
    env = slurm_env(from_script(directives, **given), 1)
    assert {k: v for k, v in env.items() if k in MEMORY_VARIABLES} == expected


@pytest.mark.parametrize("resources, expected", [
    ({"memory": "3GiB"}, {"SLURM_MEM_PER_NODE": "3072"}),         # a job file's memory is the node's
    ({"memory": "3GiB", "cpus": 4, "memory_option": "--mem-per-cpu"}, {"SLURM_MEM_PER_CPU": "768"}),
    ({"memory": "1GiB", "cpus": 3, "memory_option": "--mem-per-cpu"}, {"SLURM_MEM_PER_CPU": "342"}),   # rounded up
    ({"memory": "8GiB", "gpus": 4, "memory_option": "--mem-per-gpu"}, {"SLURM_MEM_PER_GPU": "2048"}),
    ({"gpus": 1, "memory_option": "--mem-per-cpu"}, {}),
])
def test_a_specs_memory_and_its_option(resources, expected):
    env = slurm_env(job_record(spec={"resources": resources}), 1)
    assert {k: v for k, v in env.items() if k in MEMORY_VARIABLES} == expected


@pytest.mark.parametrize("ids, expected", [
    ({"uid": 1001, "gid": 100}, {"SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "1001", "SLURM_JOB_GID": "100"}),
    ({"uid": 0, "gid": 0}, {"SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "0", "SLURM_JOB_GID": "0"}),
    ({}, {"SLURM_JOB_USER": "alice"}),          # not known here (AWS): the job's runtime fills them in
])
def test_the_jobs_user_name_and_ids(ids, expected):
    env = slurm_env(job_record(spec={"owner": "alice"}), 1, **ids)
    assert {k: v for k, v in env.items() if k in ("SLURM_JOB_USER", "SLURM_JOB_UID", "SLURM_JOB_GID")} == expected
