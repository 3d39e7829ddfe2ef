"""What a Slurm script finds on a local attempt, with real processes: the
SLURM_* variables, thread counts and pinned cores, srun first on PATH and
its failed steps, --output/--error/--input files, and --signal's warning
before the wall time ends."""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from pathlib import Path

import pytest

from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.paths import StatePaths
from gqa.models.errors import LaunchFailed
from gqa.models.expand import expand
from gqa.models.slurm_env import ARRAY_TASK_BASE
from gqa.ports import Inventory
from tests.builders import gpus, job_record, spec
from tests.fifos import fifo_opened_late

pytestmark = pytest.mark.e2e


def fake_srun(directory: Path, python: str) -> Path:
    """Stands in for gqa.runtime.slurm_tools.install: an srun that runs its
    command and records a failure as the real one does."""
    directory.mkdir(parents=True, exist_ok=True)
    srun = directory / "srun"
    srun.write_text('#!/bin/sh\n"$@"; rc=$?\n[ "$rc" = 0 ] || echo "$rc $*" >> "$GQA_STEP_STATUS"\nexit "$rc"\n')
    srun.chmod(0o755)
    return directory


@pytest.fixture
def executor(tmp_path):
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    return LocalExecutor(paths, Inventory(gpus=gpus(4)), slurm_installer=fake_srun)


def record(tmp_path, script: str, job_id: str = "7", **fields):
    spec_fields = {"command": ["bash", "-c", script], "workdir": str(tmp_path), **fields.pop("spec", {})}
    return job_record(id=job_id, group=job_id.split("_")[0], spec=spec_fields, **fields)


def run(executor, job, attempt=1, gpus=(0,), timeout=15.0, between=None):
    """Launch, release and wait for one attempt; its Exit."""
    executor.launch(job, gpus, attempt)
    executor.release([job.id])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor.kill_overdue()
        if between is not None:
            between()
        wait = executor.next_kill()
        ready = select.select(executor.fds(), [], [], min(0.05, wait) if wait is not None else 0.05)[0]
        for fd in ready:
            ended = executor.collect(fd)
            if ended is not None:
                executor.forget(job if job.attempts == attempt else job_record_at(job, attempt))
                return ended
    raise AssertionError("the attempt never ended")


def job_record_at(job, attempt):
    from dataclasses import replace

    return replace(job, attempts=attempt)


def values(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_an_attempt_reads_slurms_variables_and_threads_from_its_cpus(executor, tmp_path):
    job = record(tmp_path, "for v in SLURM_JOB_ID SLURM_JOB_NAME SLURM_CPUS_PER_TASK SLURM_NTASKS SLURM_JOB_NODELIST "
                           "SLURM_RESTART_COUNT SLURM_JOB_GPUS OMP_NUM_THREADS GQA_JOB_ID; do echo $v=${!v}; done"
                           " > env.txt; echo NPROC=$(nproc) >> env.txt", spec={"name": "probe",
                                                                              "resources": {"cpus": 1}})
    assert run(executor, job, attempt=2, gpus=(1, 3)).code == 0
    assert values(tmp_path / "env.txt") == {
        "SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "probe", "SLURM_CPUS_PER_TASK": "1", "SLURM_NTASKS": "1",
        "SLURM_JOB_NODELIST": socket.gethostname(), "SLURM_RESTART_COUNT": "1", "SLURM_JOB_GPUS": "1,3",
        "OMP_NUM_THREADS": "1", "GQA_JOB_ID": "7", "NPROC": "1"}


def test_the_jobs_own_env_wins_over_the_thread_count(executor, tmp_path):
    job = record(tmp_path, "echo $OMP_NUM_THREADS $MKL_NUM_THREADS > threads.txt",
                 spec={"resources": {"cpus": 2}, "env": {"OMP_NUM_THREADS": "1"}})
    assert run(executor, job).code == 0
    assert (tmp_path / "threads.txt").read_text() == "1 2\n"


def test_array_tasks_index_a_bash_array(executor, tmp_path):
    script = 'LRS=(1e-4 3e-4 1e-3); echo "${LRS[$SLURM_ARRAY_TASK_ID]} $SLURM_ARRAY_JOB_ID $SLURM_JOB_ID ' \
             '$SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MAX" > lr_$SLURM_ARRAY_TASK_ID.txt'
    tasks = expand(spec(command=["bash", "-c", script], workdir=str(tmp_path), array="0-2"))
    for seq, (task_spec, index, extra) in enumerate(tasks, start=20):
        job = job_record(spec=task_spec, id=f"5_{index}", group="5", array_index=index, extra_env=extra, seq=seq)
        assert run(executor, job).code == 0
    assert [(tmp_path / f"lr_{i}.txt").read_text().split() for i in range(3)] == [
        [lr, "5", str(ARRAY_TASK_BASE + 20 + i), "3", "2"] for i, lr in enumerate(("1e-4", "3e-4", "1e-3"))]


def test_attempts_that_ask_for_cpus_are_pinned_to_cores_no_other_holds(executor, tmp_path):
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        pytest.skip("needs two cores")
    first = record(tmp_path, "sleep 30", job_id="1", spec={"resources": {"cpus": 1}})
    second = record(tmp_path, "sleep 30", job_id="2", spec={"resources": {"cpus": len(usable) - 1}})
    crowded = record(tmp_path, "sleep 30", job_id="3", spec={"resources": {"cpus": 1}})
    free = record(tmp_path, "sleep 30", job_id="4")
    pids = [executor.launch(j, (i,), 1).pid for i, j in enumerate((first, second, crowded, free))]
    try:
        cores = [os.sched_getaffinity(pid) for pid in pids]
        assert len(cores[0]) == 1 and len(cores[1]) == len(usable) - 1 and not cores[0] & cores[1]
        assert len(cores[2]) == 1 and cores[3] == set(usable)          # one without cpus is not pinned
        log = (executor.paths.log_for("3")).read_text()
        assert f"asks for 1 CPUs; 0 of the {len(usable)} cores are free of other jobs" in log
    finally:
        executor.abandon([j.id for j in (first, second, crowded, free)])


def test_output_and_error_go_to_their_files_and_to_gqas_log(executor, tmp_path):
    (tmp_path / "logs").mkdir()
    job = record(tmp_path, "echo out-$SLURM_RESTART_COUNT; echo err-$SLURM_RESTART_COUNT >&2; exit 3",
                 spec={"name": "train", "output": "logs/%x-%j.out", "error": "logs/%x-%j.err"})
    first = run(executor, job)
    second = run(executor, job, attempt=2)
    assert (first.code, second.code) == (3, 3)                      # the job's exit status is kept
    # a retry appends; SLURM_RESTART_COUNT is unset on the first attempt, as under Slurm
    assert (tmp_path / "logs" / "train-7.out").read_text() == "out-\nout-1\n"
    assert (tmp_path / "logs" / "train-7.err").read_text() == "err-\nerr-1\n"
    log = executor.paths.log_for("7").read_text()
    assert all(line in log for line in ("out-\n", "err-\n", "out-1", "err-1"))
    assert not list(executor.paths.exits.iterdir())                  # fifos and records go with the attempt


def test_a_first_attempt_truncates_and_stderr_follows_output_without_error(executor, tmp_path):
    (tmp_path / "slurm-7.out").write_text("an earlier job's output\n")
    job = record(tmp_path, "echo to-out; echo to-err >&2", spec={"output": "slurm-%j.out"})
    assert run(executor, job).code == 0
    assert sorted((tmp_path / "slurm-7.out").read_text().splitlines()) == ["to-err", "to-out"]


def test_open_mode_append_keeps_what_the_file_held_across_jobs(executor, tmp_path):
    """#SBATCH --open-mode=append, two chained jobs writing one file: nothing is truncated."""
    (tmp_path / "chain.out").write_text("old line\n")
    for job_id in ("15", "16"):
        job = record(tmp_path, "echo segment $SLURM_JOB_ID", job_id=job_id,
                     spec={"output": "chain.out", "open_mode": "append"})
        assert run(executor, job).code == 0
    assert (tmp_path / "chain.out").read_text().splitlines() == ["old line", "segment 15", "segment 16"]


def test_input_is_the_jobs_stdin(executor, tmp_path):
    (tmp_path / "data.txt").write_text("one\ntwo\n")
    job = record(tmp_path, "wc -l > count.txt", spec={"input": "data.txt"})
    assert run(executor, job).code == 0
    assert (tmp_path / "count.txt").read_text().strip() == "2"


@pytest.mark.parametrize("streams, reason", [
    ({"output": "missing/%j.out"}, "cannot write its output file {tmp}/missing/7.out: No such file or directory"),
    ({"error": "missing/%j.err"}, "cannot write its error file {tmp}/missing/7.err: No such file or directory"),
    ({"input": "absent.txt"}, "cannot read its input file {tmp}/absent.txt: No such file or directory"),
])
def test_a_stream_that_cannot_be_opened_fails_the_launch_with_the_reason(executor, tmp_path, streams, reason):
    job = record(tmp_path, "echo ran > ran.txt", spec=streams)
    with pytest.raises(LaunchFailed) as failed:
        executor.launch(job, (0,), 1)
    assert str(failed.value) == reason.format(tmp=tmp_path)
    assert not (tmp_path / "ran.txt").exists() and executor.watched() == 0
    assert not list(executor.paths.exits.iterdir())


@pytest.mark.parametrize("stream", ["input", "output", "error"])
def test_a_fifo_named_for_a_stream_fails_the_launch_at_once(executor, tmp_path, stream):
    """#SBATCH --input=pf with pf a FIFO: opening it would hold the daemon until something opened its other end."""
    job = record(tmp_path, "echo ran > ran.txt", spec={stream: "pf"})
    with fifo_opened_late(tmp_path / "pf", "data\n"):
        started = time.monotonic()
        with pytest.raises(LaunchFailed) as failed:
            executor.launch(job, (0,), 1)
        assert time.monotonic() - started < 1.0
    verb = "read its input" if stream == "input" else f"write its {stream}"
    assert str(failed.value) == (f"cannot {verb} file {tmp_path}/pf: it is a FIFO, not a regular file or "
                                 "a character device such as /dev/null")
    assert executor.watched() == 0


def test_dev_null_will_do_for_input_and_output(executor, tmp_path):
    job = record(tmp_path, "cat; echo ran > ran.txt", spec={"input": "/dev/null", "output": "/dev/null"})
    assert run(executor, job).code == 0 and (tmp_path / "ran.txt").exists()


@pytest.mark.parametrize("trap", ["fifo", "link"])
def test_a_checkpoint_pointer_that_is_no_regular_file_gives_no_resume_point_and_says_why(executor, tmp_path, trap):
    """`latest` in the job's checkpoint directory, which a shared box's root daemon reads: a FIFO
    would hold the launch until written, a link could name a file only root may read."""
    job = record(tmp_path, 'echo "resume=$GQA_RESUME_FROM" > resume.txt')
    checkpoints = executor.paths.checkpoint_for(job.id)
    (checkpoints / "ckpt-1").mkdir(parents=True)
    pointer = checkpoints / "latest"
    if trap == "fifo":
        with fifo_opened_late(pointer, "ckpt-1\n"):
            started = time.monotonic()
            ended = run(executor, job)
            assert time.monotonic() - started < 1.5
    else:
        (tmp_path / "root-only").write_text("ckpt-1\n")
        pointer.symlink_to(tmp_path / "root-only")
        ended = run(executor, job)
    assert ended.code == 0 and (tmp_path / "resume.txt").read_text() == "resume=\n"
    why = "not a regular file" if trap == "fifo" else "it is a symbolic link"
    assert f"--- gqa: checkpoint pointer {pointer} not read ({why}): no GQA_RESUME_FROM\n" in \
        executor.paths.log_for(job.id).read_text()


def test_a_regular_checkpoint_pointer_is_the_resume_point(executor, tmp_path):
    job = record(tmp_path, 'echo "resume=$GQA_RESUME_FROM" > resume.txt')
    checkpoints = executor.paths.checkpoint_for(job.id)
    (checkpoints / "ckpt-1").mkdir(parents=True)
    (checkpoints / "latest").write_text("ckpt-1\n")
    assert run(executor, job).code == 0
    assert (tmp_path / "resume.txt").read_text() == f"resume={checkpoints / 'ckpt-1'}\n"


@pytest.mark.parametrize("named", ["../../secret", "/etc/shadow", "..", "ckpt-1/../../x"])
def test_a_checkpoint_pointer_naming_a_path_outside_its_directory_gives_no_resume_point(executor, tmp_path, named):
    # the root daemon would tell the job whether a file it may not see exists, and hand it the path
    job = record(tmp_path, 'echo "resume=$GQA_RESUME_FROM" > resume.txt')
    checkpoints = executor.paths.checkpoint_for(job.id)
    (checkpoints / "ckpt-1").mkdir(parents=True)
    (checkpoints / "latest").write_text(named + "\n")
    assert run(executor, job).code == 0
    assert (tmp_path / "resume.txt").read_text() == "resume=\n"
    assert f"names {named!r}, not an entry of its directory: no GQA_RESUME_FROM" in \
        executor.paths.log_for(job.id).read_text()


def test_a_working_directory_that_is_missing_is_said_as_such_not_as_its_output_file(executor, tmp_path):
    """#SBATCH --chdir=gone with an output file in it: the reason names the directory."""
    job = record(tmp_path, "echo ran", spec={"workdir": str(tmp_path / "gone"), "output": "slurm-%j.out"})
    with pytest.raises(LaunchFailed) as failed:
        executor.launch(job, (0,), 1)
    assert str(failed.value) == f"working directory {tmp_path / 'gone'} does not exist"
    assert executor.watched() == 0 and not list(executor.paths.exits.iterdir())


def test_a_failed_srun_step_fails_a_script_that_exits_0(executor, tmp_path):
    job = record(tmp_path, "srun false; srun sh -c 'exit 3'; echo cleanup > cleanup.txt; exit 0")
    ended = run(executor, job)
    # the first failed step (as srun writes it: "<code> step <id>: <command>"; this one writes its command)
    assert ended.code == 1 and ended.detail == "srun false failed with exit code 1"
    assert (tmp_path / "cleanup.txt").read_text() == "cleanup\n"     # the script went on, as under Slurm
    assert "the script ended 0 after a failed step (false, exit code 1)" in executor.paths.log_for("7").read_text()


def test_a_step_recorded_by_hand_fails_the_job_with_its_code(executor, tmp_path):
    job = record(tmp_path, 'echo "3 step 0: python train.py" >> "$GQA_STEP_STATUS"; exit 0', spec={"output": "o.txt"})
    ended = run(executor, job)
    assert (ended.code, ended.detail) == (3, "srun step 0 (python train.py) failed with exit code 3")
    assert "exit code 3): the job ends 3" in executor.paths.log_for("7").read_text()   # gqa's log, not o.txt
    assert "gqa" not in (tmp_path / "o.txt").read_text()


def test_gqas_own_srun_records_the_failed_step(tmp_path):
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    executor = LocalExecutor(paths, Inventory(gpus=gpus(1)))
    job = record(tmp_path, "srun -n 2 sh -c 'exit 3'; srun true; echo went-on > after.txt")
    ended = run(executor, job)
    assert ended.code == 3 and ended.detail.startswith("srun step 0 (")
    assert (tmp_path / "after.txt").read_text() == "went-on\n"
    assert os.access(paths.home / "slurm-bin" / "srun", os.X_OK)


def test_a_script_that_fails_itself_keeps_its_own_code(executor, tmp_path):
    job = record(tmp_path, 'srun false; exit 5')
    assert run(executor, job).code == 5


def test_the_warning_signal_reaches_the_batch_shell_before_the_wall_time(executor, tmp_path):
    job = record(tmp_path, "trap 'echo warned > warned.txt; exit 0' USR1; for i in $(seq 1 300); do sleep 0.1; done",
                 spec={"limits": {"wall_time": "62s", "signal": "B:USR1@60"}})
    started = time.monotonic()
    ended = run(executor, job, timeout=20)
    assert ended.code == 0 and (tmp_path / "warned.txt").read_text() == "warned\n"
    assert 1.5 < time.monotonic() - started < 10                     # 2 s in, not at the limit
    assert not list(executor.paths.exits.iterdir())                  # its mark goes with the attempt


def test_without_b_the_steps_get_the_warning_and_the_batch_shell_does_not(executor, tmp_path):
    catcher = ("import signal, sys, time\n"
               "signal.signal(signal.SIGUSR1, lambda *_: (open('step.txt', 'w').write('warned'), sys.exit(0)))\n"
               "time.sleep(30)\n")
    (tmp_path / "step.py").write_text(catcher)
    job = record(tmp_path, "python3 step.py; echo shell-alive-$? > shell.txt",
                 spec={"limits": {"wall_time": "64s", "signal": "USR1@60"}})   # 4 s in: its handler is set
    ended = run(executor, job, timeout=20)
    assert ended.code == 0
    assert (tmp_path / "step.txt").read_text() == "warned"
    assert (tmp_path / "shell.txt").read_text() == "shell-alive-0\n"   # bash itself was not signalled


def test_without_b_the_srun_step_gets_the_warning_and_the_scripts_pipe_is_left_alone(tmp_path):
    # `srun python train.py | tee train.log`: the step checkpoints on USR1 and tee keeps copying (tee,
    # no step, died of the signal and the log stopped there, as the training's srun then failed to write)
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    executor = LocalExecutor(paths, Inventory(gpus=gpus(1)))       # gqa's own srun
    (tmp_path / "step.py").write_text(
        "import signal, time\n"
        "signal.signal(signal.SIGUSR1, lambda *_: print('got USR1, checkpointing', flush=True))\n"
        "for i in range(50):\n    print('step', i, flush=True); time.sleep(0.1)\n"
        "print('training finished', flush=True)\n")
    job = record(tmp_path, 'srun python3 -u step.py 2>&1 | tee train.log; echo "status=${PIPESTATUS[*]}" > st.txt',
                 spec={"limits": {"wall_time": "62s", "signal": "USR1@60"}})   # 2 s in
    ended = run(executor, job, timeout=30)
    assert ended.code == 0
    lines = (tmp_path / "train.log").read_text().splitlines()
    assert "got USR1, checkpointing" in lines and lines[-1] == "training finished"
    assert (tmp_path / "st.txt").read_text() == "status=0 0\n"


def test_a_warning_is_sent_once_and_not_to_an_attempt_held_at_its_gate(executor, tmp_path):
    job = record(tmp_path, "trap 'echo w >> warned.txt' USR1; for i in $(seq 1 30); do sleep 0.1; done",
                 spec={"limits": {"wall_time": "60s", "signal": "B:USR1@60"}})
    launched = executor.launch(job, (0,), 1)
    executor.kill_overdue()                      # due at once, but still at its gate
    time.sleep(0.2)
    assert not (tmp_path / "warned.txt").exists()
    executor.release([job.id])
    time.sleep(0.5)                              # its trap is set (a signal before that would end it)
    for _ in range(5):
        executor.kill_overdue()
        time.sleep(0.2)
    os.killpg(launched.pid, signal.SIGKILL)
    assert (tmp_path / "warned.txt").read_text() == "w\n"


class RecordingContainment:
    """Records what each cell is prepared with (the cgroup's own enforcement: test_containment.py)."""
    kind = "recording"

    def __init__(self):
        from gqa.adapters.local.containment import Cell

        self.prepared: list[tuple[str, int, int | None, int | None]] = []
        self._cell = Cell

    def prepare(self, job_id, attempt, *, cpus, memory):
        self.prepared.append((job_id, attempt, cpus, memory))
        return self._cell(f"{job_id}.{attempt}")

    def cell(self, job_id, attempt):
        return self._cell(f"{job_id}.{attempt}")

    def place(self, cell, pid): ...
    def kill(self, cell): ...
    def oom_killed(self, cell): return False
    def release(self, cell): ...
    def reap_strays(self, keep): return 0
    def close(self): ...
    def describe(self): return "recording"


def test_memory_per_cpu_becomes_the_cells_memory_limit(tmp_path):
    from gqa.models.loader import validate

    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    containment = RecordingContainment()
    executor = LocalExecutor(paths, Inventory(gpus=gpus(1)), containment=containment, slurm_installer=fake_srun)
    job_spec = validate({"command": ["true"], "workdir": str(tmp_path), "resources": {"cpus": 2, "memory": "128Mi"}})
    assert run(executor, job_record(spec=job_spec, id="9", group="9")).code == 0
    assert containment.prepared == [("9", 1, 2, 128 * 2**20)]


def test_slurm_commands_that_cannot_be_installed_leave_the_path_alone(tmp_path):
    def refused(directory, python):
        raise PermissionError(13, "Permission denied", str(directory))
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    executor = LocalExecutor(paths, Inventory(gpus=gpus(1)), slurm_installer=refused,
                             base_env={"PATH": "/usr/bin:/bin"})
    assert run(executor, record(tmp_path, 'echo "$PATH" > path.txt')).code == 0
    assert (tmp_path / "path.txt").read_text() == "/usr/bin:/bin\n"


def test_the_warning_comes_before_the_wall_time_time_min_granted(executor, tmp_path):
    job = record(tmp_path, "trap 'echo warned > warned.txt; exit 0' USR1; for i in $(seq 1 300); do sleep 0.1; done",
                 spec={"limits": {"wall_time": "1h", "time_min": "62s", "signal": "B:USR1@60"}}, time_limit=62)
    started = time.monotonic()
    assert run(executor, job, timeout=20).code == 0
    assert (tmp_path / "warned.txt").read_text() == "warned\n" and time.monotonic() - started < 10


def test_nothing_of_the_wrapper_outlives_an_attempt_with_output(executor, tmp_path):
    from gqa.adapters.local.processes import group_members, read_exit

    job = record(tmp_path, "echo hi", spec={"output": "o.txt", "error": "e.txt"})
    launched = executor.launch(job, (0,), 1)
    executor.release([job.id])
    deadline = time.monotonic() + 10
    while read_exit(executor.paths.exit_for("7", 1))[0] is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    assert group_members(launched.pid) == []          # the tees and their timer ended with it
    assert (tmp_path / "o.txt").read_text() == "hi\n"


def test_a_restarted_daemon_keeps_adopted_cores_taken_and_does_not_warn_twice(tmp_path):
    from dataclasses import replace

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    first = LocalExecutor(paths, Inventory(gpus=gpus(2)), slurm_installer=fake_srun)
    job = record(tmp_path, "trap 'echo w >> warned.txt' USR1; for i in $(seq 1 100); do sleep 0.1; done",
                 job_id="1", spec={"resources": {"cpus": 1}, "limits": {"wall_time": "61s", "signal": "B:USR1@60"}})
    launched = first.launch(job, (0,), 1)
    first.release([job.id])
    deadline = time.monotonic() + 10
    while not (tmp_path / "warned.txt").exists() and time.monotonic() < deadline:
        first.kill_overdue()
        time.sleep(0.05)
    try:
        later = LocalExecutor(paths, Inventory(gpus=gpus(2)), slurm_installer=fake_srun)
        adopted = later.adopt(replace(job, pid=launched.pid, attempts=1, started_at=time.time() - 5))
        assert adopted.cores == frozenset(os.sched_getaffinity(launched.pid)) and adopted.warn_at is None
        other = record(tmp_path, "sleep 30", job_id="2", spec={"resources": {"cpus": 1}})
        pid = later.launch(other, (1,), 1).pid
        assert not os.sched_getaffinity(pid) & os.sched_getaffinity(launched.pid)
        later.abandon(["2"])
        later.kill_overdue()
        assert (tmp_path / "warned.txt").read_text() == "w\n"       # once
    finally:
        os.killpg(launched.pid, signal.SIGKILL)


def test_an_attempt_with_output_ends_as_soon_as_its_job_does(executor, tmp_path):
    # the wrapper waits for its tees on a fifo only they hold, not on a timer it must then stop
    took = []
    for n in range(8):
        job = record(tmp_path, f"echo {n}; echo e{n} >&2", job_id=str(10 + n), spec={"output": f"o{n}.txt"})
        started = time.monotonic()
        ended = run(executor, job)
        took.append(time.monotonic() - started)
        assert ended.code == 0 and (tmp_path / f"o{n}.txt").read_text() == f"{n}\ne{n}\n"
        assert "Killed" not in executor.paths.log_for(job.id).read_text()
    assert max(took) < 2.0, took


@pytest.mark.slow
def test_a_process_left_holding_the_output_delays_the_end_by_at_most_5_s(executor, tmp_path):
    job = record(tmp_path, "echo hi; (sleep 60 & echo $! > left.pid); exit 3", spec={"output": "o.txt"})
    started = time.monotonic()
    try:
        ended = run(executor, job, timeout=20)
        assert ended.code == 3 and 4.5 < time.monotonic() - started < 10
        assert (tmp_path / "o.txt").read_text() == "hi\n"
    finally:
        try:
            os.kill(int((tmp_path / "left.pid").read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
