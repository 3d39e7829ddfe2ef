"""A batch script that starts `#!/bin/bash -l` (a login shell, to load modules)
keeps srun, scontrol and sacct, on the local queue and in an AWS job's runtime,
and reads the BASH_ENV its environment had as bash itself would.

A login shell reads /etc/profile, then ~/.bash_profile, and either may set PATH
anew: here a HOME whose ~/.bash_profile sets PATH to a directory of its own, so
the tests fail without gqa's BASH_ENV on any machine, whatever its /etc/profile
does or wherever a real Slurm's commands are installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gqa.adapters.local.slurm_commands import bash_env_of, install_slurm_commands
from gqa.runtime import job_process
from gqa.runtime.login_shell import BASH_ENV, FILE_NAME, USER_BASH_ENV, write_bash_env

pytestmark = pytest.mark.e2e

BASH = "/bin/bash"


@pytest.fixture
def home(tmp_path) -> Path:
    """A HOME whose login profile sets PATH anew, as a site's profile may: to a directory of
    the few commands the tests' scripts (and a profile, for a nested login shell) run."""
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    for command in ("id", "true"):
        (home / "bin" / command).symlink_to(shutil.which(command) or f"/bin/{command}")
    (home / ".bash_profile").write_text('PATH="$HOME/bin"; export PATH\n')
    (home / "user-env.sh").write_text('export FROM_USER_BASH_ENV="read in $$"\n')
    return home


def submit(queue, project: Path, script: str, home: Path, **env: str) -> str:
    (project / "run.sh").write_text(script)
    proc = subprocess.run([sys.executable, "-c", "from cli.client import run; run()", "submit", "run.sh", "-o", "json"],
                          env={**queue.env, "HOME": str(home), **env}, cwd=str(project), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["id"]


def entries(path: str, directory: str) -> int:
    return path.split(os.pathsep).count(directory)


def test_a_login_shell_script_finds_srun_scontrol_and_sacct(make_queue, tmp_path, home):
    queue = make_queue(gpus=1)
    project = tmp_path / "project"
    project.mkdir()
    job_id = submit(queue, project, f"""#!/bin/bash -l
#SBATCH --job-name=login
#SBATCH -o out.txt
echo "path=$PATH"
srun {sys.executable} -c 'print("the step ran")'
scontrol show job "$SLURM_JOB_ID"
sacct -j "$SLURM_JOB_ID"
""", home)
    job = queue.wait(job_id, timeout=60)
    out = (project / "out.txt").read_text()
    assert job.state.value == "SUCCEEDED", out
    tools = str(queue.home / "slurm-bin")
    assert f"path={tools}{os.pathsep}{home / 'bin'}\n" in out         # first again, after the profile's PATH
    assert "the step ran" in out
    assert f"JobId={job_id} JobName=login" in out                       # scontrol show job
    assert "command not found" not in out


def test_nested_shells_keep_one_entry_and_the_users_bash_env_is_read(make_queue, tmp_path, home):
    queue = make_queue(gpus=1)
    project = tmp_path / "project"
    project.mkdir()
    (project / "inner.sh").write_text('#!/bin/bash --login\necho "inner=$PATH user=${FROM_USER_BASH_ENV-}"\n'
                                      'srun true && echo "inner srun ok"\n')
    (project / "inner.sh").chmod(0o755)
    job_id = submit(queue, project, f"""#!/bin/bash -l
#SBATCH -o out.txt
echo "outer=$PATH user=${{FROM_USER_BASH_ENV-}}"
{BASH} -c 'echo "nested=$PATH"'
./inner.sh
""", home, BASH_ENV=str(home / "user-env.sh"))
    job = queue.wait(job_id, timeout=60)
    out = (project / "out.txt").read_text()
    assert job.state.value == "SUCCEEDED", out
    tools = str(queue.home / "slurm-bin")
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for name in ("outer", "nested", "inner"):
        path = lines[name].split(" user=")[0]
        assert path.startswith(tools + os.pathsep) and entries(path, tools) == 1, (name, path)
    assert lines["outer"].split(" user=")[1].startswith("read in ")   # the job's own BASH_ENV, read as before
    assert lines["inner"].split(" user=")[1].startswith("read in ")
    assert "inner srun ok" in out


def test_an_aws_jobs_login_shell_script_finds_srun_and_scontrol(tmp_path, home):
    out = tmp_path / "out.txt"
    script = tmp_path / "run.sh"
    script.write_text(f"""#!/bin/bash -l
echo "path=$PATH user=${{FROM_USER_BASH_ENV-}} uid=$SLURM_JOB_UID gid=$SLURM_JOB_GID" > {out}
srun {sys.executable} -c 'print("the step ran")' >> {out}
scontrol show hostnames "$SLURM_JOB_NODELIST" >> {out}
{BASH} -c 'echo "nested=$PATH"' >> {out}
""")
    script.chmod(0o755)
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "SLURM_JOB_ID": "41", "SLURM_NTASKS": "1",
           "SLURM_JOB_NODELIST": "ip-10-0-0-7", BASH_ENV: str(home / "user-env.sh")}
    assert job_process.run_job([str(script)], env) == 0, out.read_text() if out.exists() else ""
    first, step, host, nested = out.read_text().splitlines()
    path, rest = first.removeprefix("path=").split(" user=")
    tools = path.split(os.pathsep)[0]
    assert Path(tools).name.startswith("gqa-tools-") and path == f"{tools}{os.pathsep}{home / 'bin'}"
    assert rest.startswith("read in ") and rest.endswith(f" uid={os.getuid()} gid={os.getgid()}")
    assert (step, host) == ("the step ran", "ip-10-0-0-7")
    assert nested == f"nested={path}"                                 # no second entry in a nested bash


# The job's own BASH_ENV through gqa's file against bash reading it itself: the same file read, or none.
@pytest.mark.parametrize("value, read", [
    ("{home}/user-env.sh", "in the home"),
    ("$HOME/user-env.sh", "in the home"),          # bash expands the value: parameters,
    ("$(echo user-env.sh)", "in the home"),        # command substitution,
    ("~/user-env.sh", "in the home"),              # a leading ~,
    ("user-env.sh", "in the home"),                # and reads a bare name in the current directory, not on PATH
    ("{home}/missing.sh", "none"),                 # a name with no file is passed over
    ("$UNSET_NAME", "none"),                       # as is one that expands to nothing
    ("", "none"),
    ('{home}/a "quoted" name.sh', "quoted"),
])
def test_the_jobs_bash_env_is_read_as_bash_reads_it(tmp_path, home, value, read):
    value = value.format(home=home)
    (home / "user-env.sh").write_text('export FROM_USER_BASH_ENV="in the home"\n')
    (home / 'a "quoted" name.sh').write_text('export FROM_USER_BASH_ENV="quoted"\n')
    on_path = tmp_path / "on-path"
    on_path.mkdir()
    (on_path / "user-env.sh").write_text('export FROM_USER_BASH_ENV="found on PATH"\n')
    tools = install_slurm_commands(tmp_path / "tools", shared=False)
    assert tools is not None
    script = tmp_path / "run.sh"
    script.write_text('#!/bin/bash\necho "user=${FROM_USER_BASH_ENV-none}"\n')
    script.chmod(0o755)
    base = {"HOME": str(home), "PATH": f"{on_path}{os.pathsep}{os.environ['PATH']}"}

    def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(script)], env={**base, **env}, cwd=home, capture_output=True, text=True,
                              timeout=30)

    by_bash = run({BASH_ENV: value})
    through_gqa = run({BASH_ENV: str(bash_env_of(tools)), USER_BASH_ENV: value})
    assert (through_gqa.returncode, through_gqa.stdout, through_gqa.stderr) == (
        by_bash.returncode, by_bash.stdout, by_bash.stderr)
    assert by_bash.stdout == f"user={read}\n"


def test_a_traced_script_shows_none_of_gqas_lines(tmp_path, home):
    tools = write_bash_env(tmp_path)
    (tmp_path / "run.sh").write_text('#!/bin/bash -lx\ntrue traced\n')
    (tmp_path / "run.sh").chmod(0o755)
    proc = subprocess.run([str(tmp_path / "run.sh")], env={"HOME": str(home), "PATH": os.environ["PATH"],
                                                            BASH_ENV: str(tools),
                                                            USER_BASH_ENV: str(home / "user-env.sh")},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "+ true traced" in proc.stderr and "__gqa" not in proc.stderr
    assert "FROM_USER_BASH_ENV" in proc.stderr                          # the job's own file is traced, as by bash


def test_on_a_shared_box_every_user_reads_the_file_and_runs_the_tools(tmp_path):
    tools = install_slurm_commands(tmp_path / "tools", shared=True)
    assert tools is not None
    assert bash_env_of(tools).stat().st_mode & 0o777 == 0o644          # read, not a command on PATH
    assert (tools / "srun").stat().st_mode & 0o777 == 0o755
    assert bash_env_of(tools).name == FILE_NAME


def test_a_tools_directory_whose_path_bash_would_expand_is_still_the_one_read(tmp_path, home):
    """bash expands BASH_ENV's value as between double quotes: a home named `h$USER` named another file."""
    from gqa.runtime.login_shell import with_bash_env

    tools = install_slurm_commands(tmp_path / "h$USER`false`\\q" / "tools", shared=False)
    assert tools is not None
    script = tmp_path / "run.sh"
    script.write_text('#!/bin/bash -l\ncommand -v srun\n')
    script.chmod(0o755)
    env = {"HOME": str(home), "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}", "USER": "someone"}
    with_bash_env(env, bash_env_of(tools))
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (0, f"{tools}/srun\n"), proc.stderr
