"""gqa/models/sbatch_env.py: sbatch's input environment variables, each read as
its option's #SBATCH line is, over the script's lines and under the command
line's flags; a flag's variable set as sbatch sets it; notes and errors that
name the variable; a job file and a command read none."""

import re

import pytest

from gqa.models.errors import SpecError
from gqa.models.loader import load_spec, parse_directives, validate
from gqa.models.sbatch import FLAG, SBATCH
from gqa.models.sbatch_env import VARIABLES

SCRIPT = "#!/bin/bash\n#SBATCH -J fromscript --time=10 -o p3-%x-%j.out\ntrue\n"


def read(text: str, environment: dict[str, str], given=None):
    """The spec a script header describes under `environment`, and the notes it gave."""
    notes: list[str] = []
    raw = parse_directives(text, source="run.sh", warn=notes.append, environment=environment, given=given)
    return validate({"command": ["x"], "owner": "alice", **raw}), notes


def test_every_variable_stands_for_an_option_of_the_table():
    assert set(VARIABLES.values()) <= set(SBATCH)
    assert VARIABLES["SBATCH_TIMELIMIT"] == "--time" and VARIABLES["SBATCH_MEM_PER_NODE"] == "--mem"
    assert VARIABLES["SLURM_HINT"] == VARIABLES["SBATCH_HINT"] == "--hint"


def test_the_environment_overrides_the_scripts_lines():
    job, notes = read(SCRIPT, {"SBATCH_TIMELIMIT": "3", "SBATCH_JOB_NAME": "envname", "SBATCH_NO_REQUEUE": "1"})
    assert (job.name, job.limits.wall_time, job.requeue, job.output) == ("envname", 180, False, "p3-%x-%j.out")
    assert notes == []


def test_the_command_line_overrides_the_environment(tmp_path):
    (tmp_path / "p3.sh").write_text(SCRIPT)
    environment = {"SBATCH_TIMELIMIT": "3", "SBATCH_JOB_NAME": "envname", "SBATCH_GPUS": "2"}
    spec = load_spec("p3.sh", cwd=str(tmp_path), environment=environment,
                     overrides={"name": "flag", "limits": {"wall_time": "5"}, "resources": {"gpus": 1}})
    assert (spec.name, spec.limits.wall_time, spec.resources.gpus) == ("flag", 300, 1)


@pytest.mark.parametrize("value, requeue", [
    ("", False), ("yes", False), ("YES", False), ("1", False), ("2", False),   # set, as sbatch sets a flag
    ("0", True), ("no", True), ("true", True),                                 # anything else leaves it unset
])
def test_a_flags_variable_is_set_as_sbatch_sets_it(value, requeue):
    job, _ = read(SCRIPT, {"SBATCH_NO_REQUEUE": value})
    assert job.requeue is requeue


def test_an_optional_value_is_given_unless_empty():
    job, notes = read(SCRIPT, {"SBATCH_EXCLUSIVE": ""})
    assert job.resources.exclusive is True and notes == []
    job, notes = read(SCRIPT, {"SBATCH_EXCLUSIVE": "user"})
    assert not job.resources.exclusive
    assert notes == ["SBATCH_EXCLUSIVE=user: nodes shared only with like jobs have no meaning on one machine; "
                     "the job shares it as any job does"]


def test_a_noted_variable_says_so_naming_it():
    _, notes = read(SCRIPT, {"SBATCH_PARTITION": "gpu", "SBATCH_TIMELIMIT": "UNLIMITED"})
    assert notes == [
        "SBATCH_PARTITION=gpu has no effect here: one machine: gqa places a job on a machine with the GPUs it "
        "asks for (--gres TYPE chooses a GPU type)",
        "SBATCH_TIMELIMIT=UNLIMITED: the job gets no wall-time limit beyond the queue's own"]


@pytest.mark.parametrize("environment, message", [
    ({"SBATCH_CLUSTERS": "east"}, "SBATCH_CLUSTERS=east: one gqa queue is one cluster"),
    ({"SLURM_CLUSTERS": "east"}, "SLURM_CLUSTERS=east: one gqa queue is one cluster"),
    ({"SBATCH_CONTAINER": "/opt/b"}, "SBATCH_CONTAINER=/opt/b: an OCI bundle is not run"),
    ({"SBATCH_TIMELIMIT": "soon"}, "SBATCH_TIMELIMIT=soon: invalid duration 'soon'"),
    ({"SBATCH_EXCLUSIVE": "0"}, "SBATCH_EXCLUSIVE=0: --exclusive=0: use --exclusive"),
    ({"SBATCH_GRES": "shard:2"}, "SBATCH_GRES=shard:2: --gres 'shard:2': gqa gives whole GPUs"),
])
def test_a_refused_or_bad_variable_is_an_error_naming_it(environment, message):
    with pytest.raises(SpecError, match=re.escape(message)) as caught:
        read(SCRIPT, environment)
    assert caught.value.line is None and str(caught.value).startswith(message.split(":")[0])


def test_a_memory_variable_gives_way_to_the_scripts_other_memory_option():
    script = "#SBATCH -c 2 --mem-per-cpu=1G\ntrue\n"
    job, notes = read(script, {"SBATCH_MEM_PER_NODE": "300M"})
    assert job.resources.memory == 2 << 30                 # as sbatch keeps the script's --mem-per-cpu
    assert notes == ["SBATCH_MEM_PER_NODE=300M has no effect here: the script asks for its memory another way, "
                     "and sbatch keeps that"]
    job, _ = read(script, {"SBATCH_MEM_PER_CPU": "2G"})
    assert job.resources.memory == 4 << 30                 # the same option: the environment's


def test_the_environment_settles_with_the_scripts_quantities():
    job, _ = read("#SBATCH -n 3 --gpus-per-task=1\ntrue\n", {"SBATCH_CPUS_PER_GPU": "2", "SBATCH_ARRAY_INX": "0-3"})
    assert (job.resources.gpus, job.resources.cpus, job.array) == (3, 6, "0-3")


def test_no_variable_leaves_the_script_as_it_was():
    assert read(SCRIPT, {}) == read(SCRIPT, {"SBATCH_UNKNOWN": "1", "SLURM_JOB_ID": "7", "PATH": "/bin"})


def test_every_flag_variable_is_read_as_a_flag():
    for variable, long in VARIABLES.items():
        if SBATCH[long].takes == FLAG:
            read(SCRIPT, {variable: "no"})                 # unset: nothing to refuse, nothing to say
            if long not in ("--requeue", "--no-requeue"):
                assert read(SCRIPT, {variable: "yes"})[1] == [
                    f"{variable}=yes has no effect here: {SBATCH[long].effect}"], variable


def test_a_job_file_and_a_command_read_no_variable(tmp_path):
    (tmp_path / "job.yaml").write_text("name: fromfile\ncommand: ['true']\nlimits: {wall_time: 10m}\n")
    environment = {"SBATCH_TIMELIMIT": "3", "SBATCH_JOB_NAME": "envname", "SBATCH_CLUSTERS": "east"}
    spec = load_spec("job.yaml", cwd=str(tmp_path), environment=environment)
    assert (spec.name, spec.limits.wall_time) == ("fromfile", 600)
    spec = load_spec(None, command=["true"], cwd=str(tmp_path), environment=environment)
    assert spec.name == "true" and spec.limits.wall_time is None
