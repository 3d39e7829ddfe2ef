"""`gqa submit` with Slurm's options: its own flags (--after, --dependency,
--hold, --begin, --nice, --exclusive, --tasks, --gpus 0), a script's #SBATCH
lines, default names; through the CLI and through the daemon's light-client
path, which parses the same options."""

import json
import time

import pytest

from cli.local_backend import LocalBackend
from daemon.submit_command import SubmitCommand
from gqa.models.units import parse_duration
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu


def spec_of(cli, job_id: str) -> dict:
    return json.loads(cli.store.get(job_id).spec_json)


def test_slurm_flags_reach_the_spec(cli):
    assert cli("submit", "--", "true")[0] == 0
    assert cli("submit", "--", "true")[0] == 0
    before = time.time()
    code, out, err = cli("submit", "--after", "1", "--after", "2:any", "-d", "afterok:1", "--hold",
                         "--begin", "now+1hour", "--nice", "5", "--exclusive", "-n", "4", "--gpus", "0",
                         "--", "true")
    assert code == 0, err
    spec = spec_of(cli, out.strip())
    assert spec["after"] == "afterok:1,afterany:2,afterok:1"
    assert spec["hold"] is True and spec["nice"] == 5
    assert before + 3600 <= spec["begin"] <= time.time() + 3600
    assert spec["resources"]["exclusive"] is True and spec["resources"]["tasks"] == 4
    assert spec["resources"]["gpus"] == 0 and cli.store.get(out.strip()).gpus == 0


@pytest.mark.parametrize("argv, words", [
    (["--begin", "someday"], ["--begin 'someday'"]),
    (["--after", "1:maybe"], ["--after 1:maybe: use ID, ID:ok, ID:notok, ID:any or ID:start"]),
    (["-d", "afterok:1?afterany:2", "--after", "3"], ["mixes ',' (all) and '?' (any)"]),
    (["--nice", "100000"], ["nice"]),
])
def test_bad_slurm_flags_are_refused(cli, argv, words):
    code, out, err = cli("submit", *argv, "--", "true")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    for word in words:
        assert word in err
    assert cli.job_count() == 0


def test_a_shell_command_is_named_after_its_first_word(cli):
    code, out, err = cli("submit", "--shell", "--", "echo $HOME | tr a-z A-Z")
    assert code == 0, err
    assert cli.store.get(out.strip()).name == "echo"
    code, out, err = cli("submit", "--shell", "--", "  ")
    assert code == 2 and "command is empty" in err


def test_a_script_reads_its_sbatch_lines_and_is_named_after_its_file(cli):
    (cli.home / "sub").mkdir()
    (cli.home / "train.sh").write_text("#!/bin/bash\n#SBATCH -N 1 -n 2 --gpus-per-task 1 -c 2\n"
                                       "#SBATCH -o out-%j.txt -D sub\n#SBATCH -p gpu\necho\n")
    code, out, err = cli("submit", "train.sh")
    assert code == 0, err
    assert "train.sh:4: #SBATCH -p gpu has no effect here" in err
    job = cli.store.get(out.strip())
    spec = spec_of(cli, job.id)
    assert (job.name, job.gpus, job.cpus) == ("train.sh", 2, 4)
    assert spec["output"] == "out-%j.txt"
    assert spec["workdir"] == str(cli.home / "sub") and spec["submit_dir"] == str(cli.home)


def test_a_refused_sbatch_option_names_the_line_and_writes_nothing(cli):
    (cli.home / "train.sh").write_text("#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --nodes=2\necho\n")
    code, out, err = cli("submit", "train.sh")
    assert code == 2 and out == ""
    assert err == "gqa: error: train.sh:3: gqa runs a job on one machine; --nodes 2 would need 2\n"
    assert cli.job_count() == 0


def test_the_local_queue_refuses_a_container_image(cli):
    (cli.home / "train.sh").write_text("#!/bin/bash\n#SBATCH --container-image=nvcr.io/nvidia/pytorch:24.01-py3\n"
                                       "echo\n")
    code, out, err = cli("submit", "train.sh")
    assert code == 2 and "names a container image, which jobs on AWS run in" in err
    assert cli.job_count() == 0


def test_the_light_clients_submit_takes_the_slurm_flags(tmp_path):
    be = LocalBackend(tmp_path / "home")
    be.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g"),), cpus=8, memory=64 << 30))
    command = SubmitCommand(be.submitter())
    first = command.run(["submit", "--", "true"], "/", {}, None)
    assert first["code"] == 0, first
    answer = command.run(["submit", "--after", "1:start", "--hold", "--nice", "7", "-n", "2", "--gpus", "0",
                          "--shell", "--", "echo hi | cat"], "/", {}, None)
    assert answer["code"] == 0, answer
    job = be.store.get(answer["stdout"].strip())
    spec = json.loads(job.spec_json)
    assert (spec["after"], spec["hold"], spec["nice"], spec["resources"]["tasks"]) == ("after:1", True, 7, 2)
    assert (job.name, job.gpus) == ("echo", 0)


def test_flags_settle_with_the_scripts_per_task_quantities(cli):
    (cli.home / "train.sh").write_text("#!/bin/bash\n#SBATCH -c 2 --mem-per-cpu=1G --gres=gpu:1\necho\n")
    code, out, err = cli("submit", "-n", "3", "train.sh")
    assert code == 0, err
    job = cli.store.get(out.strip())
    assert (job.cpus, job.memory, job.gpus) == (6, 6 << 30, 1)      # as `sbatch -n 3 train.sh` reads it


P3 = "#!/bin/bash\n#SBATCH -J fromscript --time=10 -o p3-%x-%j.out\ntrue\n"


def wall_time(spec: dict) -> int:
    return parse_duration(spec["limits"]["wall_time"])


@pytest.fixture
def shell(monkeypatch):
    """The environment of the shell `gqa submit` runs in, as the CLI keeps it at its start."""
    from cli import context

    def setenv(name: str, value: str) -> None:
        monkeypatch.setitem(context._STARTING_ENVIRONMENT, name, value)
    return setenv


def test_sbatch_variables_override_the_script_and_give_way_to_flags(cli, shell):
    (cli.home / "p3.sh").write_text(P3)
    for name, value in (("SBATCH_TIMELIMIT", "3"), ("SBATCH_JOB_NAME", "envname"), ("SBATCH_NO_REQUEUE", "1"),
                        ("SBATCH_PARTITION", "gpu")):
        shell(name, value)
    code, out, err = cli("submit", "p3.sh")
    assert code == 0, err
    assert err.startswith("SBATCH_PARTITION=gpu has no effect here: one machine")
    spec = spec_of(cli, out.strip())
    assert (spec["name"], wall_time(spec), spec["requeue"]) == ("envname", 180, False)
    code, out, err = cli("submit", "-t", "5", "-J", "flag", "p3.sh")
    assert code == 0, err
    spec = spec_of(cli, out.strip())
    assert (spec["name"], wall_time(spec)) == ("flag", 300)


def test_a_refused_sbatch_variable_exits_2_naming_it(cli, shell):
    (cli.home / "p3.sh").write_text(P3)
    shell("SBATCH_CLUSTERS", "east")
    code, out, err = cli("submit", "p3.sh")
    assert (code, out, err) == (2, "", "gqa: error: SBATCH_CLUSTERS=east: one gqa queue is one cluster\n")
    assert cli.job_count() == 0


def test_a_job_file_reads_no_sbatch_variable(cli, shell):
    (cli.home / "job.yaml").write_text("name: fromfile\ncommand: ['true']\nlimits: {wall_time: 10m}\n")
    shell("SBATCH_TIMELIMIT", "3")
    shell("SBATCH_CLUSTERS", "east")
    code, out, err = cli("submit", "job.yaml")
    assert code == 0, err
    spec = spec_of(cli, out.strip())
    assert (spec["name"], wall_time(spec)) == ("fromfile", 600)


def test_the_light_clients_submit_reads_the_callers_sbatch_variables(tmp_path, monkeypatch):
    be = LocalBackend(tmp_path / "home")
    be.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g"),), cpus=8, memory=64 << 30))
    command = SubmitCommand(be.submitter())
    (tmp_path / "p3.sh").write_text(P3)
    monkeypatch.setenv("SBATCH_JOB_NAME", "the-daemons-own")      # never the daemon's environment
    answer = command.run(["submit", "p3.sh"], str(tmp_path), {"SBATCH_TIMELIMIT": "3"}, None,
                         files=[{"path": "p3.sh", "data": "IyEvYmluL2Jhc2gKI1NCQVRDSCAtSiBmcm9tc2NyaXB0IC0tdGltZT0xMCAt"
                                                          "byBwMy0leC0lai5vdXQKdHJ1ZQo=", "executable": False}])
    assert answer["code"] == 0, answer
    spec = json.loads(be.store.get(answer["stdout"].strip()).spec_json)
    assert (spec["name"], wall_time(spec)) == ("fromscript", 180)
    refused = command.run(["submit", "p3.sh"], str(tmp_path), {"SBATCH_CLUSTERS": "east"}, None,
                          files=[{"path": "p3.sh", "data": "dHJ1ZQo=", "executable": False}])
    assert refused == {"code": 2, "stdout": "", "stderr": "gqa: error: SBATCH_CLUSTERS=east: one gqa queue is one "
                                                         "cluster\n"}


@pytest.mark.parametrize("argv, seconds", [
    (["--time", "0:10", "t.sh"], 60),             # a Slurm form on a script: whole minutes, as sbatch keeps it
    (["-t", "1:00:01", "t.sh"], 3660),
    (["--time", "30s", "t.sh"], 30),              # gqa's own form keeps its seconds
    (["--time", "0:10", "--", "true"], 10),       # a command is not a Slurm script
])
def test_submit_time_in_a_slurm_form_rounds_up_on_a_script(cli, argv, seconds):
    (cli.home / "t.sh").write_text("#!/bin/bash\n#SBATCH --time=5\ntrue\n")
    code, out, err = cli("submit", *argv)
    assert code == 0, err
    assert wall_time(spec_of(cli, out.strip())) == seconds
