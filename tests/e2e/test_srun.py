"""srun, scontrol and squeue as a batch script meets them: installed with
gqa.runtime.slurm_tools.install, first on PATH, run by bash as real
processes: the tasks, their ranks and GPUs, exit codes, the failed-step
line, signals passed on, and the tasks ending with srun."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gqa.runtime import slurm_tools

pytestmark = pytest.mark.e2e


@pytest.fixture
def job(tmp_path):
    """Runs a bash script as a job would: the tools first on PATH, a step-status file."""
    tools = slurm_tools.install(tmp_path / "tools")
    status = tmp_path / "steps"
    started: list[subprocess.Popen[str]] = []

    def start(script: str, **env: str) -> subprocess.Popen[str]:
        inherited = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        environment = {**inherited, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
                       slurm_tools.STEP_STATUS_ENV: str(status), "SLURM_JOB_ID": "41", "PY": sys.executable,
                       **env}
        proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        started.append(proc)
        return proc

    start.status = status            # type: ignore[attr-defined]
    yield start
    for proc in started:             # a failed test leaves no task behind (the tasks share the job's group)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def wait_for(path: Path, count: int = 1, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while len(list(path.parent.glob(path.name))) < count:
        assert time.monotonic() < deadline, (f"{count} of {path.name} never appeared: "
                                             f"{sorted(p.name for p in path.parent.iterdir())}")
        time.sleep(0.02)


RANK = ("import os; e = os.environ; "
        "os.write(1, ' '.join((e['SLURM_PROCID'], e['CUDA_VISIBLE_DEVICES'], e['SLURM_STEP_ID'], '\\n')).encode())")


def test_four_tasks_each_get_their_rank_and_one_gpu(job):
    code, out, err = finish(job(f'srun -n 4 --gpus-per-task 1 "$PY" -c "{RANK}"', CUDA_VISIBLE_DEVICES="0,1,2,3"))
    assert code == 0, err
    assert sorted(out.splitlines()) == ["0 0 0 ", "1 1 0 ", "2 2 0 ", "3 3 0 "]
    assert not job.status.exists()


def test_a_failed_task_fails_the_step_and_leaves_its_line_while_the_others_finish(job, tmp_path):
    script = ('srun -n 3 bash -c \'if [ $SLURM_PROCID = 1 ]; then exit 3; fi; sleep 0.5; touch done.$SLURM_PROCID\'\n'
              'echo "srun=$?"; srun true; exit 0')
    code, out, err = finish(job(script))
    assert code == 0 and out == "srun=3\n", err
    assert sorted(p.name for p in tmp_path.glob("done.*")) == ["done.0", "done.2"]   # Slurm's default: the rest run on
    assert "srun: error: " in err and "task 1: Exited with exit code 3" in err
    assert job.status.read_text() == "3 step 0: srun -n 3 bash -c 'if [ $SLURM_PROCID = 1 ]; then exit 3; fi; " \
                                     "sleep 0.5; touch done.$SLURM_PROCID'\n"
    assert slurm_tools.first_failed_step(job.status) == (3, job.status.read_text().split(" ", 1)[1].strip())


def test_a_retry_loop_that_gets_there_does_not_fail_the_job_but_a_later_other_step_does(job, tmp_path):
    # the second try of the same command succeeds: the job did its work, as Slurm says
    retry = ('n=0; until srun bash -c "[ -e tried ] || { touch tried; exit 3; }"; do n=$((n+1)); done; '
             'echo "retries=$n"; exit 0')
    code, out, err = finish(job(retry))
    assert (code, out) == (0, "retries=1\n"), err
    assert not job.status.exists()
    # training failed and evaluation then ran fine: the training's failure is still the job's
    code, out, err = finish(job('srun bash -c "exit 4"; srun true; echo ran'))
    assert (code, out) == (0, "ran\n"), err
    assert job.status.read_text() == "4 step 2: srun bash -c 'exit 4'\n"   # steps 0 and 1 were the loop's


def test_kill_on_bad_exit_stops_the_other_tasks(job, tmp_path):
    script = ('srun -K -n 3 bash -c \'if [ $SLURM_PROCID = 2 ]; then sleep 0.3; exit 5; fi; '
              'trap "touch stopped.$SLURM_PROCID; exit 143" TERM; sleep 30 & wait\'')
    started = time.monotonic()
    code, _, err = finish(job(script))
    # Slurm's rule: the highest exit code, here the stopped tasks' 143 over the failed task's 5
    assert code == 143 and time.monotonic() - started < 15, err
    assert sorted(p.name for p in tmp_path.glob("stopped.*")) == ["stopped.0", "stopped.1"]
    assert job.status.read_text().startswith("143 step 0: srun -K -n 3")


def test_the_step_exits_with_the_highest_code_and_a_signal_over_any_code(job):
    script = ('srun -n 3 bash -c \'sleep 0.$SLURM_PROCID; exit $((SLURM_PROCID + 1))\'; echo $?; '
              'srun -n 3 bash -c \'sleep 0.$SLURM_PROCID; case $SLURM_PROCID in 0) exit 200;; '
              '1) kill -USR1 $$;; 2) kill -HUP $$;; esac\'; echo $?')
    code, out, err = finish(job(script))
    assert (code, out) == (0, f"3\n{128 + signal.SIGUSR1}\n"), err


def test_wait_stops_the_rest_some_seconds_after_the_first_task_ended(job):
    started = time.monotonic()
    code, _, err = finish(job("srun -n 2 --wait=1 bash -c '[ $SLURM_PROCID = 0 ] || sleep 30'"))
    assert code == 128 + signal.SIGTERM and time.monotonic() - started < 15, err
    assert "terminating the step's 1 remaining tasks" in err and "task 1: Killed by signal 15" in err


def test_signals_reach_every_task_once(job, tmp_path):
    script = ('trap "" USR1; srun -n 2 bash -c \'trap "echo usr1 >> got.$SLURM_PROCID" USR1; '
              'trap "echo term >> got.$SLURM_PROCID; exit 143" TERM; touch ready.$SLURM_PROCID; '
              'while :; do sleep 0.05; done\' & echo $! > srun.pid; wait $!')
    proc = job(script)
    wait_for(tmp_path / "ready.*", 2)
    os.killpg(proc.pid, signal.SIGUSR1)     # the job's whole group, as a stop or a warning reaches it
    wait_for(tmp_path / "got.*", 2)
    time.sleep(0.3)
    os.kill(int((tmp_path / "srun.pid").read_text()), signal.SIGTERM)        # srun alone: it passes it on
    code, _, err = finish(proc)
    assert code == 143, err
    assert [(tmp_path / f"got.{n}").read_text() for n in (0, 1)] == ["usr1\nterm\n"] * 2


def test_the_tasks_end_with_srun_even_when_it_is_killed(job, tmp_path):
    proc = job("srun -n 2 bash -c 'echo $$ > pid.$SLURM_PROCID; exec sleep 60' & echo $! > srun.pid; wait $!")
    wait_for(tmp_path / "pid.*", 2)
    time.sleep(0.2)
    pids = [int((tmp_path / f"pid.{n}").read_text()) for n in (0, 1)]
    os.kill(int((tmp_path / "srun.pid").read_text()), signal.SIGKILL)
    finish(proc)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, "a task outlived srun"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_labels_and_one_output_file_per_task(job, tmp_path):
    code, out, err = finish(job('srun -l -n 2 bash -c "echo out; echo err >&2"; '
                                'srun -n 2 -o "task-%j-%s-%t.out" bash -c "echo rank \\$SLURM_PROCID"'))
    assert code == 0, err
    assert sorted(out.splitlines()) == ["0: out", "1: out"] and sorted(err.splitlines()) == ["0: err", "1: err"]
    assert [(tmp_path / f"task-41-1-{n}.out").read_text() for n in (0, 1)] == ["rank 0\n", "rank 1\n"]


# each task writes half a line, waits until every task has, then ends its line
HALVES = """import glob, os, sys, time
rank = os.environ["SLURM_PROCID"]
sys.stdout.write(rank + "-a")
sys.stdout.flush()
open("half." + rank, "w").close()
while len(glob.glob("half.*")) < 4:
    time.sleep(0.01)
print(rank + "-b", flush=True)
"""


def test_tasks_writing_at_once_never_mix_their_lines_and_u_lets_them(job, tmp_path):
    (tmp_path / "halves.py").write_text(HALVES)
    code, out, err = finish(job('srun -n 4 "$PY" halves.py'))
    assert code == 0, err
    assert sorted(out.splitlines()) == [f"{r}-a{r}-b" for r in range(4)]
    code, out, err = finish(job('rm half.*; srun -u -n 4 "$PY" halves.py'))
    assert code == 0 and sorted(out.splitlines()) != [f"{r}-a{r}-b" for r in range(4)], out   # halves mixed


def test_input_directory_and_export_none(job, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "in.0").write_text("zero\n")
    (tmp_path / "in.1").write_text("one\n")
    script = ('srun -n 2 -i "in.%t" -D sub bash -c \'read -r line; echo "$SLURM_PROCID $line $(basename $PWD)"\' '
              '| sort; echo hi | srun -n 2 -i none cat; '
              'HIDDEN=1 srun --export=NONE env | grep -c "^HIDDEN=\\|^PATH=" || true')
    code, out, err = finish(job(script))
    assert code == 0, err
    assert out.splitlines() == ["0 zero sub", "1 one sub", "0"]     # -i none: nothing read; NONE: no HIDDEN, PATH


def test_a_missing_command_or_a_bad_option_fails_the_step_and_says_why(job):
    code, out, err = finish(job("srun -n 2 no-such-program; echo $?; srun --partition=x true; echo $?"))
    assert (code, out) == (0, "2\n2\n"), err      # Slurm: the task's execve errno, ENOENT
    assert "srun: no-such-program: command not found" in err and "--partition is not an option" in err
    lines = job.status.read_text().splitlines()
    assert lines == ["2 step 0: srun -n 2 no-such-program", "2 step 1: srun --partition=x true"]


def test_scontrol_and_squeue_answer_a_batch_script(job):
    script = ('echo "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"; '
              'squeue -h -j $SLURM_JOB_ID -o "%i %T %L"')
    end = int(time.time()) + 3600
    code, out, err = finish(job(script, SLURM_JOB_NODELIST=socket.gethostname(), SLURM_JOB_END_TIME=str(end)))
    assert code == 0, err
    host, status = out.splitlines()
    assert host == socket.gethostname()
    job_id, state, left = status.split()
    assert (job_id, state) == ("41", "RUNNING") and left.startswith(("59:", "1:00:00"))


def test_sacct_answers_for_the_job_itself_and_refuses_another(job):
    start = int(time.time()) - 65
    script = ('sacct -j $SLURM_JOB_ID --format=JobID,Elapsed,MaxRSS,State; echo "rc=$?"; '
              'sacct -n -P -X -o jobid,jobname,state,exitcode,maxrss,alloctres,nodelist; '
              'sacct -j 99 -o State; echo "rc=$?"')
    code, out, err = finish(job(script, SLURM_JOB_START_TIME=str(start), SLURM_JOB_NAME="train",
                                SLURM_JOB_NODELIST="node1", SLURM_NTASKS="2", CUDA_VISIBLE_DEVICES="0,1"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["JobID", "Elapsed", "MaxRSS", "State"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    job_id, elapsed, state = lines[2].split()       # MaxRSS: empty, as sacct leaves what it lacks
    assert (job_id, state) == ("41", "RUNNING") and elapsed.startswith("00:01:0"), lines
    assert lines[3:] == ["rc=0", "41|train|RUNNING|0:0||cpu=2,gres/gpu=2,node=1|node1", "rc=2"]
    assert "sacct: job 99: a gqa job sees only itself (job 41)" in err


def test_scancel_of_the_job_itself_ends_its_steps_and_script_and_refuses_another(job, tmp_path):
    script = ('scancel 99; echo "other=$?"; '
              'srun -n 2 bash -c \'trap "touch term.$SLURM_PROCID; exit 143" TERM; touch ready.$SLURM_PROCID; '
              'while :; do sleep 0.05; done\' & '
              'while [ ! -e ready.1 ] || [ ! -e ready.0 ]; do sleep 0.05; done; '
              'scancel $SLURM_JOB_ID; sleep 30; echo "still running"')
    started = time.monotonic()
    code, out, err = finish(job(script))
    assert code == -signal.SIGTERM and time.monotonic() - started < 20, err     # the batch shell, as Slurm ends it
    assert out == "other=2\n" and "scancel: job 99: a gqa job may cancel only itself (job 41)" in err
    wait_for(tmp_path / "term.*", 2)


def test_scancel_with_a_signal_reaches_the_steps_only(job, tmp_path):
    script = ('trap "touch shell.usr1" USR1; '
              'srun -n 2 bash -c \'trap "touch usr1.$SLURM_PROCID; exit 0" USR1; touch ready.$SLURM_PROCID; '
              'while :; do sleep 0.05; done\' & '
              'while [ ! -e ready.1 ] || [ ! -e ready.0 ]; do sleep 0.05; done; '
              'scancel -s USR1 $SLURM_JOB_ID; wait $!; echo "srun=$?"')
    code, out, err = finish(job(script))
    assert (code, out) == (0, "srun=0\n"), err
    assert sorted(p.name for p in tmp_path.glob("usr1.*")) == ["usr1.0", "usr1.1"]
    assert not (tmp_path / "shell.usr1").exists()


def test_scontrol_and_squeue_give_a_queued_jobs_submit_time_tres_and_exit_code(make_queue):
    queue = make_queue(gpus=2)
    script = ("scontrol show job $SLURM_JOB_ID | grep -oP '(SubmitTime|TRES|ExitCode)=\\K\\S+'; "
              "scontrol show jobid=$SLURM_JOB_ID | head -n 1; "
              "squeue -h -j $SLURM_JOB_ID -O 'JobID:|,State:|,TimeLeft:|,SubmitTime:|,tres-per-node:|'; "
              "squeue -h -o '%V %r %b'")
    [job_id] = queue.submit(["bash", "-c", script], resources={"gpus": 2, "cpus": 2}, team="vision")
    job = queue.wait(job_id, timeout=60)
    log = queue.log(job_id)
    assert job.state.value == "SUCCEEDED", log
    submitted = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(int(job.submitted_at)))
    slurm_id = log.split("JobId=")[1].split()[0]
    lines = [line for line in log.splitlines() if not line.startswith("--- gqa:")]
    assert lines == ["0:0", submitted, "cpu=2,node=1,billing=2,gres/gpu=2",          # Slurm's order
                     f"JobId={slurm_id} JobName={job.name}",
                     f"{slurm_id}|RUNNING|UNLIMITED|{submitted}|gres:gpu:2|", f"{submitted} None gres:gpu:2"]


def test_steps_run_at_once_take_distinct_gpus_and_one_waits_while_they_are_busy(job):
    script = ('for i in 0 1 2 3; do srun -n1 -G1 --exact bash -c "echo \\$CUDA_VISIBLE_DEVICES; sleep 1" & done; wait\n'
              'srun -n1 -G3 sleep 2 & sleep 0.5; srun -n1 -G2 bash -c "echo waited \\$CUDA_VISIBLE_DEVICES"; wait')
    code, out, err = finish(job(script, CUDA_VISIBLE_DEVICES="0,1,2,3"))
    assert code == 0, err
    assert sorted(out.splitlines()) == ["0", "1", "2", "3", "waited 0,1"]
    assert err.count("step creation temporarily disabled, retrying (Requested nodes are busy)") == 1, err


def test_a_step_asking_for_more_gpus_than_the_job_has_fails_at_once_as_in_slurm(job):
    code, out, err = finish(job('srun -n1 -G5 true; echo "srun=$?"', CUDA_VISIBLE_DEVICES="0,1,2,3"))
    assert out == "srun=1\n" and "srun: error: Step requested gres=gpu:5 is more than the job's gres=gpu:4" in err


def test_the_gpus_of_a_step_killed_outright_come_back(job):
    script = ('srun -n1 -G2 sleep 60 & sleep 1; kill -9 $!; wait\n'
              'timeout 20 srun -n1 -G2 bash -c "echo \\$CUDA_VISIBLE_DEVICES"')
    code, out, err = finish(job(script, CUDA_VISIBLE_DEVICES="0,1"))
    assert code == 0 and out == "0,1\n", err


def test_a_time_limit_stops_the_steps_tasks(job):
    code, out, err = finish(job('srun -t 0:1 sleep 30; echo "srun=$?"'))
    assert out == "srun=143\n", err
    assert "DUE TO TIME LIMIT ***" in err and "srun: Force Terminated StepId=41.0" in err


def test_open_mode_append_keeps_what_the_file_held_and_gpu_bind_none_leaves_tasks_every_gpu(job, tmp_path):
    (tmp_path / "out").write_text("before\n")
    script = ('srun -n2 --gpus-per-task=1 --gpu-bind=none --open-mode=append -o out '
              'bash -c "echo \\$SLURM_PROCID \\$CUDA_VISIBLE_DEVICES"')
    code, out, err = finish(job(script, CUDA_VISIBLE_DEVICES="0,1"))
    assert code == 0, err
    lines = (tmp_path / "out").read_text().splitlines()
    assert lines[0] == "before" and sorted(lines[1:]) == ["0 0,1", "1 0,1"]
