"""Slurm's commands inside a job, without starting anything: host lists, srun's
options and each task's environment, scontrol's and squeue's answers, the tools'
installation and the failed-step file (gqa.runtime.hostlist, srun_options,
srun, scontrol, squeue, slurm_tools)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from gqa.runtime import job_files, scontrol, slurm_tools, squeue, srun, srun_options
from gqa.runtime.hostlist import HostListError, compress, expand
from gqa.runtime.srun_options import SrunError
from tests.fifos import fifo_opened_late


# -- host lists ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, hosts", [
    ("node7", ["node7"]),
    ("node[1-3,7]", ["node1", "node2", "node3", "node7"]),
    ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
    ("a[1-2]-b[3-4]", ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]),
    ("x,node[1-2],y.example.com", ["x", "node1", "node2", "y.example.com"]),
])
def test_a_host_list_expands_as_slurm_reads_it(text, hosts):
    assert expand(text) == hosts


@pytest.mark.parametrize("text, why", [
    ("node[1-3", "a '[' is never closed"),
    ("node1-3]", "']' at 8 closes no '['"),
    ("node[3-1]", "the range 3-1 runs backwards"),
    ("node[a-b]", "holds 'a-b', not a number"),
    ("node[]", "an empty [] names no host"),
    ("n[0-99999999]", "names more than 65536 hosts"),
    ("n[0-999],m[0-999],k[0-99999]", "names more than 65536 hosts"),
])
def test_a_host_list_that_is_not_one_says_where(text, why):
    with pytest.raises(HostListError, match=re.escape(why)):
        expand(text)


def test_a_list_of_hosts_compresses_and_expands_back():
    hosts = ["node1", "node2", "node3", "node7", "gpu08", "gpu09", "gpu10", "login", "x", "x1", "x2"]
    assert compress(hosts) == "node[1-3,7],gpu[08-10],login,x,x[1-2]"
    assert expand(compress(hosts)) == hosts


# -- srun's options ---------------------------------------------------------------------------------------------
def test_options_take_every_spelling_up_to_the_command():
    opts = srun_options.parse(["-n4", "--gpus-per-task=1", "-lK", "-c", "2", "--mpi=none", "--cpu-bind=cores",
                               "--exclusive", "-u", "python", "-n", "3"], {})
    assert (opts.ntasks, opts.gpus_per_task, opts.cpus_per_task, opts.label, opts.kill_on_bad_exit) == (4, 1, 2,
                                                                                                        True, True)
    assert opts.command == ["python", "-n", "3"] and opts.notes == []
    opts = srun_options.parse(["--ntasks", "2", "-N", "1", "--kill-on-bad-exit=0", "-G", "a100:2", "--", "-x"], {})
    assert (opts.ntasks, opts.gpus, opts.kill_on_bad_exit, opts.command) == (2, 2, False, ["-x"])
    assert srun_options.parse(["--gres=gpu:a10g:3", "true"], {}).gpus == 3
    assert "without a PMI server" in srun_options.parse(["--mpi=pmix", "true"], {}).notes[0]


@pytest.mark.parametrize("args, why", [
    (["--partition=gpu", "python"], "srun: --partition is not an option gqa's srun knows"),
    (["-X", "python"], "srun: -X is not an option"),
    (["-N", "2", "python"], "srun: -N 2: a gqa job is one node, so a step runs on 1 node"),
    (["--nodes=2-4", "python"], "--nodes 2-4: a gqa job is one node"),
    (["-n", "0", "python"], "srun: -n takes a whole number of 1 or more, got '0'"),
    (["-n", "four", "python"], "got 'four'"),
    (["-n"], "srun: -n needs a value"),
    (["-l", "-n", "2"], "srun: no command to run"),
    (["--label=yes", "x"], "--label takes no value"),
    (["--gres=nic:1", "x"], "gpu\\[:type\\]:N and none only"),
    (["-n", "8", "--ntasks-per-node=4", "x"], "-n 8 with --ntasks-per-node=4 needs 2 nodes"),
])
def test_options_gqa_cannot_honour_are_refused_by_name(args, why):
    with pytest.raises(SrunError, match=why):
        opts = srun_options.parse(args, {})
        srun_options.step_size(opts, {})


# -- each task's environment ----------------------------------------------------------------------------------
JOB = {"SLURM_JOB_ID": "41", "SLURM_NTASKS": "4", "CUDA_VISIBLE_DEVICES": "4,5,6,7", "HOME": "/home/a",
       "GQA_JOB_ID": "41", "SLURM_JOB_NAME": "ddp"}


def envs(args, env=JOB, step=2):
    return srun_options.task_environments(srun_options.parse([*args, "true"], env), env, step, "gpu-host")


def test_each_task_gets_its_rank_and_its_own_gpus():
    tasks = envs(["-n", "4", "--gpus-per-task", "1"])
    assert [t["SLURM_PROCID"] for t in tasks] == ["0", "1", "2", "3"] == [t["SLURM_LOCALID"] for t in tasks]
    assert [t["CUDA_VISIBLE_DEVICES"] for t in tasks] == ["4", "5", "6", "7"]
    first = tasks[0]
    assert {k: first[k] for k in ("SLURM_STEP_ID", "SLURM_STEPID", "SLURM_NODEID", "SLURM_NTASKS",
                                  "SLURM_STEP_NUM_TASKS", "SLURM_STEP_GPUS", "SLURM_STEP_NODELIST",
                                  "SLURM_GPUS_PER_TASK")} == {
        "SLURM_STEP_ID": "2", "SLURM_STEPID": "2", "SLURM_NODEID": "0", "SLURM_NTASKS": "4",
        "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_GPUS": "4,5,6,7", "SLURM_STEP_NODELIST": "gpu-host",
        "SLURM_GPUS_PER_TASK": "1"}
    assert first["HOME"] == "/home/a"          # --export=ALL by default
    two = envs(["-n", "2", "--gpus-per-task=2"])
    assert [t["CUDA_VISIBLE_DEVICES"] for t in two] == ["4,5", "6,7"]


def test_a_step_takes_the_jobs_task_count_and_gpus_per_task_by_default():
    tasks = envs([], {**JOB, "SLURM_GPUS_PER_TASK": "1"})
    assert len(tasks) == 4 and [t["CUDA_VISIBLE_DEVICES"] for t in tasks] == ["4", "5", "6", "7"]
    shared = envs([], {k: v for k, v in JOB.items() if k != "SLURM_NTASKS"})
    assert len(shared) == 1 and shared[0]["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    assert [t["CUDA_VISIBLE_DEVICES"] for t in envs(["-n", "2", "-G", "3"])] == ["4,5,6", "4,5,6"]
    assert len(envs(["--ntasks-per-node=3"])) == 3


def test_a_step_that_needs_more_gpus_than_the_job_has_fails_with_slurms_words_and_code():
    with pytest.raises(SrunError, match=r"Step requested gres=gpu:8 is more than the job's gres=gpu:4\n"
                                        r"srun: error: Unable to create step for job 41: Invalid generic "
                                        r"resource \(gres\) specification") as refused:
        envs(["-n", "4", "--gpus-per-task", "2"])
    assert refused.value.code == 1
    with pytest.raises(SrunError, match="requested gres=gpu:5 is more than the job's gres=gpu:4"):
        envs(["-G", "5"])


def test_without_cuda_visible_devices_the_gpus_are_counted_from_the_node():
    assert srun_options.job_gpus({"SLURM_GPUS_ON_NODE": "2"}) == ["0", "1"]
    assert srun_options.job_gpus({"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b,GPU-c"}) == ["0", "1", "2"]
    assert srun_options.job_gpus({"NVIDIA_VISIBLE_DEVICES": "all"}) == []
    assert srun_options.job_gpus({"CUDA_VISIBLE_DEVICES": "", "SLURM_GPUS_ON_NODE": "2"}) == []


def test_export_passes_the_named_variables_and_slurms_own():
    only = envs(["--export=NONE"])[0]
    assert "HOME" not in only and only["SLURM_JOB_ID"] == "41" and only["GQA_JOB_ID"] == "41"
    named = envs(["--export=HOME,LR=0.1"])[0]
    assert (named["HOME"], named["LR"]) == ("/home/a", "0.1")
    assert envs(["--export=ALL,LR=3"])[0]["LR"] == "3"
    with pytest.raises(SrunError, match="'1X' is not a variable name"):
        envs(["--export=1X=2"])


def test_file_patterns_name_each_tasks_file():
    env = {"SLURM_JOB_ID": "41", "SLURM_JOB_NAME": "ddp", "SLURM_JOB_USER": "ann", "SLURM_ARRAY_JOB_ID": "40",
           "SLURM_ARRAY_TASK_ID": "13"}
    assert srun.expand_pattern("out-%j.%s-%3t-%x-%u-%N-%A_%a-%b-%J-%%-%q", 2, 5, env, "gpu1.example.com") == (
        "out-41.5-002-ddp-ann-gpu1-40_13-3-41.5-%-%q")
    assert srun.expand_pattern("%a", 0, 0, {"SLURM_JOB_ID": "7"}, "h") == "4294967294"


# -- scontrol and squeue ----------------------------------------------------------------------------------------
OWN = {"SLURM_JOB_ID": "41", "SLURM_JOB_NAME": "a-long-job-name", "SLURM_JOB_USER": "ann",
       "SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_NTASKS": "4", "SLURM_CPUS_PER_TASK": "2",
       "SLURM_JOB_START_TIME": "1000", "SLURM_JOB_END_TIME": "8200", "SLURM_SUBMIT_DIR": "/w"}


def answer(tool, args, env=OWN, now=1000 + 65.0):
    out = io.StringIO()
    assert tool.run(args, env, out, now=now) == 0
    return out.getvalue()


def test_scontrol_shows_hostnames_hostlists_and_this_job():
    assert answer(scontrol, ["show", "hostnames"]) == "gpu1\ngpu2\n"
    assert answer(scontrol, ["show", "hostnames", "n[08-09],x"]) == "n08\nn09\nx\n"
    assert answer(scontrol, ["show", "hostname"], {"SLURMD_NODENAME": "here"}) == "here\n"
    assert answer(scontrol, ["show", "hostlistsorted", "n3,n1,n2"]) == "n[1-3]\n"
    job = answer(scontrol, ["show", "job", "41"])
    for field in ("JobId=41 JobName=a-long-job-name", "JobState=RUNNING", "RunTime=00:01:05",
                  "TimeLimit=02:00:00", "NodeList=gpu[1-2]", "NumTasks=4 CPUs/Task=2", "WorkDir=/w"):
        assert field in job
    assert answer(scontrol, ["-o", "show", "job"]).count("\n") == 1


@pytest.mark.parametrize("args, why", [
    (["requeue", "7"], "scontrol: requeue 7: a gqa job may requeue only itself (job 41): use gqa requeue 7 from a "
                       "shell"),
    (["requeue"], "scontrol: requeue needs a job id"),
    (["requeue", "41"], "scontrol: this is not a gqa job's process ($GQA_STEP_STATUS is not set): use gqa requeue 41"),
    (["requeuehold", "41"], "scontrol: requeuehold is not available inside a gqa job: use gqa requeue from a shell"),
    (["update", "JobId=41", "TimeLimit=5"], "use gqa update from a shell"),
    (["show", "job", "7"], "show job 7: a gqa job sees only itself (job 41): use gqa status 7 from a shell"),
    (["show", "partition"], "show partition is not something gqa's scontrol does"),
    (["show", "hostnames", "n[1-"], "a '[' is never closed"),
    ([], "gqa's scontrol does `show hostnames"),
])
def test_scontrol_refuses_what_a_job_cannot_do_and_says_what_to_use(args, why):
    with pytest.raises(scontrol.Refused, match=re.escape(why)):
        scontrol.run(args, OWN, io.StringIO())


def test_squeue_tells_the_time_left_and_the_basics_of_its_own_job():
    assert answer(squeue, ["-h", "-j", "41", "-o", "%L"]) == "1:58:55\n"
    assert answer(squeue, ["-h", "-j", "41", "-o", "%L"], now=8200 - 59) == "0:59\n"
    assert answer(squeue, ["-h", "-j", "41", "-o", "%L"], {**OWN, "SLURM_JOB_END_TIME": "200000"}) == "2-07:15:35\n"
    assert answer(squeue, ["--noheader", "--format=%i/%j/%T/%.5j/%8u|"]) == (
        "41/a-long-job-name/RUNNING/a-lon/ann     |\n")
    table = answer(squeue, []).splitlines()
    assert table[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]
    assert table[1].split() == ["41", "gqa", "a-long-j", "ann", "R", "1:05", "1", "gpu[1-2]"]
    assert answer(squeue, ["-h", "-t", "PD", "-o", "%i"]) == ""


@pytest.mark.parametrize("args, why", [
    (["-j", "7"], "squeue: job 7: a gqa job sees only itself"),
    (["-u", "bob"], "sees only its own user's job \\(ann\\)"),
    (["-o", "%Y"], "%Y in the format is not a field"),
    (["-O", "JobID,SchedNodes"], "SchedNodes in --Format is not a field"),
    (["-O", "JobID", "-o", "%i"], "-o \\(--format\\) is incompatible with -O \\(--Format\\)"),
    (["--start"], "--start is not an option"),
])
def test_squeue_refuses_other_jobs_and_what_it_does_not_know(args, why):
    with pytest.raises(squeue.Refused, match=why):
        squeue.run(args, OWN, io.StringIO())


# -- installing the tools, the failed-step file --------------------------------------------------------------
def test_install_writes_executable_tools_once_and_the_same_again(tmp_path):
    where = slurm_tools.install(tmp_path / "bin", python="/opt/my python/bin/python3")
    assert sorted(p.name for p in where.iterdir()) == ["sacct", "scancel", "scontrol", "squeue", "srun"]
    srun_tool = where / "srun"
    assert srun_tool.stat().st_mode & 0o777 == 0o755
    assert "exec '/opt/my python/bin/python3' -I -c" in srun_tool.read_text()
    before = srun_tool.stat().st_ino
    slurm_tools.install(where, python="/opt/my python/bin/python3")
    assert srun_tool.stat().st_ino == before                    # unchanged: not rewritten
    slurm_tools.install(where, python=sys.executable)
    assert srun_tool.stat().st_ino != before and sys.executable in srun_tool.read_text()


def test_installs_at_once_leave_complete_tools_and_no_leftovers(tmp_path):
    pythons = [f"/py{n}" for n in range(8)]
    threads = [threading.Thread(target=slurm_tools.install, args=(tmp_path, p)) for p in pythons * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sacct", "scancel", "scontrol", "squeue", "srun"]
    assert slurm_tools.shim("gqa.runtime.srun", "/py0").replace("/py0", "/py?") in {
        (tmp_path / "srun").read_text().replace(p, "/py?") for p in pythons}


def test_a_tool_runs_whatever_gqa_the_jobs_pythonpath_holds(tmp_path):
    fake = tmp_path / "project" / "gqa"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('the project’s own gqa was imported')\n")
    where = slurm_tools.install(tmp_path / "bin")
    env = {**os.environ, "PYTHONPATH": str(fake.parent), "SLURM_JOB_NODELIST": "n[1-2]"}
    done = subprocess.run([str(where / "scontrol"), "show", "hostnames"], cwd=fake.parent, env=env,
                          capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "n1\nn2\n"), done.stderr


def test_failed_steps_are_lines_and_the_first_is_the_jobs(tmp_path):
    status = tmp_path / "steps"
    env = {slurm_tools.STEP_STATUS_ENV: str(status)}
    slurm_tools.record_failed_step(0, "step 0: srun true", env)
    assert not status.exists()
    slurm_tools.record_failed_step(3, "step 1: srun python\ntrain.py", env)
    slurm_tools.record_failed_step(137, "step 2: srun x", env)
    assert status.read_text() == "3 step 1: srun python train.py\n137 step 2: srun x\n"
    assert slurm_tools.first_failed_step(status) == (3, "step 1: srun python train.py")
    assert slurm_tools.first_failed_step(tmp_path / "none") is None
    slurm_tools.record_failed_step(3, "no file named", {})          # outside a job: nothing, no error


@pytest.mark.parametrize("trap", ["link to a file", "link to a device", "fifo"])
def test_the_failed_steps_file_is_read_only_when_the_job_left_a_regular_file_there(tmp_path, trap):
    """The job's user writes the file and a shared box's root daemon reads it: a link to a
    file that user may not read, or to a device without end, and a FIFO the job made in its
    place are no failed step, said at once."""
    status, secret = tmp_path / "steps", tmp_path / "root-only"
    secret.write_text("42 TOPSECRET\n")
    secret.chmod(0o600)
    if trap == "fifo":
        with fifo_opened_late(status, "42 TOPSECRET\n"):
            started = time.monotonic()
            assert slurm_tools.first_failed_step(status) is None
            assert time.monotonic() - started < 1.0
    else:
        status.symlink_to(secret if trap == "link to a file" else "/dev/zero")
        assert slurm_tools.first_failed_step(status) is None


@pytest.mark.parametrize("failed, before, succeeded, left", [
    # a retry that got there in the end: the job did its work
    (["1 step 0: srun python train.py"], 1, "step 1: srun python train.py", []),
    # another command succeeding after a failure does not take it back (train, then eval)
    (["1 step 0: srun python train.py"], 1, "step 1: srun python eval.py", ["1 step 0: srun python train.py"]),
    # a failure that ended while the same command ran beside it (not before it started) stays
    (["1 step 0: srun python train.py"], 0, "step 1: srun python train.py", ["1 step 0: srun python train.py"]),
    # only the retried command's lines go, each of its earlier failures with it
    (["1 step 0: srun a", "2 step 1: srun b", "3 step 2: srun a"], 3, "step 3: srun a", ["2 step 1: srun b"]),
    # a long command, cut in its line, is still known as the same
    ([f"1 step 0: srun {'x' * 500}"[:2 + slurm_tools.MAX_DESCRIPTION]], 1, f"step 9: srun {'x' * 500}", []),
])
def test_a_step_that_succeeds_takes_back_its_own_commands_earlier_failures(tmp_path, failed, before, succeeded,
                                                                             left):
    status = tmp_path / "steps"
    env = {slurm_tools.STEP_STATUS_ENV: str(status)}
    for line in failed[:before]:
        code, _, text = line.partition(" ")
        slurm_tools.record_failed_step(int(code), text, env)
    earlier = slurm_tools.failed_so_far(env)          # what the step saw as it started
    for line in failed[before:]:
        code, _, text = line.partition(" ")
        slurm_tools.record_failed_step(int(code), text, env)
    slurm_tools.forgive_retried(succeeded, earlier, env)
    assert (status.read_text().splitlines() if status.exists() else []) == left
    assert slurm_tools.first_failed_step(status) == (
        (int(left[0].split(" ", 1)[0]), left[0].split(" ", 1)[1]) if left else None)


def test_taking_back_a_retried_step_outside_a_job_or_without_a_file_does_nothing(tmp_path):
    slurm_tools.forgive_retried("step 1: srun a", ("1 step 0: srun a",), {})
    env = {slurm_tools.STEP_STATUS_ENV: str(tmp_path / "steps")}
    slurm_tools.forgive_retried("step 1: srun a", ("1 step 0: srun a",), env)
    assert not (tmp_path / "steps").exists() and slurm_tools.failed_so_far(env) == ()


def test_step_numbers_count_up_per_job_even_when_steps_start_at_once(tmp_path):
    env = {slurm_tools.STEP_STATUS_ENV: str(tmp_path / "steps")}
    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(slurm_tools.next_step_id(env))) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(20))
    assert slurm_tools.next_step_id({}) == 0


def test_scontrol_show_job_gives_the_files_cpus_and_requeue_slurm_gives(tmp_path):
    facts = os.open(tmp_path / "job", os.O_WRONLY | os.O_CREAT, 0o600)
    job_files.write_facts(facts, {"Command": "/w/train.sh", "WorkDir": "/w/run", "StdOut": "/w/slurm-41.out",
                                  "StdErr": "/w/slurm-41.err", "StdIn": "/dev/null", "Requeue": "0"})
    os.close(facts)
    env = {**OWN, "SLURM_CPUS_ON_NODE": "8", "SLURM_RESTART_COUNT": "2",
           slurm_tools.STEP_STATUS_ENV: str(tmp_path / "steps")}
    fields = dict(f.split("=", 1) for f in answer(scontrol, ["-o", "show", "job", "41"], env).split())
    assert {k: fields[k] for k in ("Command", "WorkDir", "StdOut", "StdErr", "StdIn", "NumCPUs", "Requeue",
                                   "Restarts")} == {
        "Command": "/w/train.sh", "WorkDir": "/w/run", "StdOut": "/w/slurm-41.out", "StdErr": "/w/slurm-41.err",
        "StdIn": "/dev/null", "NumCPUs": "8", "Requeue": "0", "Restarts": "2"}
    lines = answer(scontrol, ["show", "job"], env).splitlines()
    assert [line.split("=")[0].strip() for line in lines[-8:-3]] == ["Command", "WorkDir", "StdErr", "StdIn",
                                                                      "StdOut"]   # Slurm's order
    plain = dict(f.split("=", 1) for f in answer(scontrol, ["-o", "show", "job"]).split())   # no facts: AWS
    assert (plain["NumCPUs"], plain["WorkDir"], plain["Requeue"], "StdOut" in plain) == ("8", "/w", "1", False)


def test_scontrol_requeue_is_refused_for_a_no_requeue_job_with_slurms_words_and_on_aws(tmp_path, capsys):
    facts = os.open(tmp_path / "job", os.O_WRONLY | os.O_CREAT, 0o600)
    job_files.write_facts(facts, {"Requeue": "0"})
    os.close(facts)
    env = {**OWN, slurm_tools.STEP_STATUS_ENV: str(tmp_path / "steps")}
    assert scontrol.run(["requeue", "JobId=41"], env, io.StringIO()) == 1
    assert capsys.readouterr().err == "Requested operation is presently disabled for job 41\n"
    assert not (tmp_path / job_files.REQUEST).exists()
    with pytest.raises(scontrol.Refused, match="not available inside a gqa job on AWS Batch, where a job tells "
                                               "the queue nothing but its exit code: use gqa requeue 41"):
        scontrol.run(["requeue", "41"], {**env, "AWS_BATCH_JOB_ID": "b-1"}, io.StringIO())


# what Slurm 22.05's `scontrol show job` printed for a running batch job with 2 GPUs, the keys in its order
SLURM_SHOW_JOB = """JobId JobName UserId GroupId MCS_label Priority Nice Account QOS JobState Reason Dependency
Requeue Restarts BatchFlag Reboot ExitCode RunTime TimeLimit TimeMin SubmitTime EligibleTime AccrueTime StartTime
EndTime Deadline PreemptEligibleTime PreemptTime SuspendTime SecsPreSuspend LastSchedEval Scheduler Partition
AllocNode:Sid ReqNodeList ExcNodeList NodeList BatchHost NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES
Socks/Node NtasksPerN:B:S:C CoreSpec MinCPUsNode MinMemoryNode MinTmpDiskNode Features DelayBoot OverSubscribe
Contiguous Licenses Network Command WorkDir StdErr StdIn StdOut Power TresPerNode""".split()


def test_scontrol_show_job_gives_slurms_fields_in_slurms_order_and_formats(tmp_path):
    facts = os.open(tmp_path / "job", os.O_WRONLY | os.O_CREAT, 0o600)
    submitted = int(time.mktime((2026, 12, 7, 23, 45, 12, 0, 0, -1)))
    job_files.write_facts(facts, {"Command": "/w/train.sh", "StdOut": "/w/slurm-41.out", "StdErr": "/w/slurm-41.out",
                                  "StdIn": "/dev/null", "SubmitTime": str(submitted),
                                  "EligibleTime": str(submitted + 60)})
    os.close(facts)
    env = {**OWN, "SLURM_JOB_START_TIME": str(submitted + 120), "SLURM_JOB_END_TIME": str(submitted + 120 + 7200),
           "SLURM_CPUS_ON_NODE": "8", "SLURM_GPUS_ON_NODE": "2", "SLURM_MEM_PER_NODE": "65536",
           "SLURM_JOB_ACCOUNT": "vision", "SLURM_JOB_QOS": "high", "SLURM_JOB_PARTITION": "a100",
           slurm_tools.STEP_STATUS_ENV: str(tmp_path / "steps")}
    text = answer(scontrol, ["show", "job", "41"], env, now=submitted + 185)
    keys = [f.split("=", 1)[0] for f in text.split()]
    assert keys == [k for k in SLURM_SHOW_JOB if k in keys]               # Slurm's order
    assert set(SLURM_SHOW_JOB) - set(keys) == {"AllocNode:Sid", "PreemptEligibleTime", "PreemptTime"}
    fields = dict(f.split("=", 1) for f in text.split())
    assert {k: fields[k] for k in ("SubmitTime", "EligibleTime", "AccrueTime", "StartTime", "EndTime", "RunTime",
                                   "TimeLimit", "TRES", "ExitCode", "JobState", "Partition", "QOS", "Account",
                                   "Priority", "MinMemoryNode", "TresPerNode")} == {
        "SubmitTime": "2026-12-07T23:45:12", "EligibleTime": "2026-12-07T23:46:12",
        "AccrueTime": "2026-12-07T23:46:12", "StartTime": "2026-12-07T23:47:12", "EndTime": "2026-12-08T01:47:12",
        "RunTime": "00:01:05", "TimeLimit": "02:00:00", "TRES": "cpu=8,mem=64G,node=1,billing=8,gres/gpu=2",
        "ExitCode": "0:0", "JobState": "RUNNING", "Partition": "a100", "QOS": "high", "Account": "vision",
        "Priority": "4294901759", "MinMemoryNode": "64G", "TresPerNode": "gres:gpu:2"}
    assert text.startswith("JobId=41 JobName=a-long-job-name\n   UserId=ann(") and text.endswith("\n   \n\n")
    assert answer(scontrol, ["-o", "show", "job"], env).endswith("TresPerNode=gres:gpu:2 \n")
    bare = dict(f.split("=", 1) for f in answer(scontrol, ["-o", "show", "job"], {**OWN, "SLURM_MEM_PER_CPU": "1000"}
                                                ).split())   # on AWS: no facts; no account, QOS, GPUs
    assert {k: bare[k] for k in ("SubmitTime", "Account", "QOS", "TRES", "MinMemoryCPU")} == {
        "SubmitTime": "Unknown", "Account": "(null)", "QOS": "normal", "TRES": "cpu=8,mem=8000M,node=1,billing=8",
        "MinMemoryCPU": "1000M"}
    assert "TresPerNode" not in bare and "EndTime=Unknown" in answer(
        scontrol, ["show", "job"], {k: v for k, v in OWN.items() if k != "SLURM_JOB_END_TIME"})


@pytest.mark.parametrize("args", [["show", "jobid=41"], ["show", "jobid", "41"], ["show", "job=41"],
                                  ["show", "JobId=41"], ["-o", "show", "Job=41"]])
def test_scontrol_show_job_takes_slurms_spellings_of_the_id(args):
    assert answer(scontrol, args).startswith("JobId=41 JobName=a-long-job-name")


def test_scontrol_show_jobid_of_another_job_is_refused():
    with pytest.raises(scontrol.Refused, match=re.escape("show job 7: a gqa job sees only itself (job 41)")):
        scontrol.run(["show", "jobid=7"], OWN, io.StringIO())


SQUEUE_ENV = {**OWN, "SLURM_JOB_ID": "126", "SLURM_JOB_NAME": "job.sh", "SLURM_JOB_USER": "root",
              "SLURM_JOB_NODELIST": "localhost", "SLURM_NTASKS": "1", "SLURM_GPUS_ON_NODE": "2",
              "SLURM_JOB_END_TIME": "6400", "SLURM_JOB_ACCOUNT": "teama", "SLURM_JOB_QOS": "normal",
              "SLURM_JOB_PARTITION": "gpu"}


@pytest.mark.parametrize("fields, lines", [   # as Slurm 22.05's squeue printed them for such a job
    ("JobID,State,TimeLeft,EndTime", ["126                 RUNNING             1:28:55             "
                                      + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(6400)) + " "]),
    ("JobID:5,State:.12,Name:3,TimeLeft", ["JOBID       STATENAMTIME_LEFT           ",
                                           "126       RUNNINGjob1:28:55             "]),
    ("JobID:|,State:|,Name", ["JOBID|STATE|NAME                ", "126|RUNNING|job.sh              "]),
    ("JobID:5|,State:.4|,Name:|", ["JOBID|STAT|NAME|", "126  |RUNN|job.sh|"]),
    ("jobid:5x,STATE:xx|,Name:", ["JOBIDxSTATExx|NAME", "126  xRUNNINGxx|job.sh"]),
    ("JobID,,State", ["JOBID               STATE               ", "126                 RUNNING             "]),
    ("JobID: ,State:/,TimeLeft:. ", ["JOBID STATE/TIME_LEFT ", "126 RUNNING/1:28:55 "]),
    ("NumCPUs:5,NumNodes:6,Partition:4,Reason:5,UserName:5,Account:6,QOS:7,Priority:17,PriorityLong:11,"
     "tres-per-node:11,Gres:0", ["CPUS NODES PARTREASOUSER ACCOUNQOS    PRIORITY         PRIORITY   TRES_PER_NO"
                                 "TRES_PER_NODE", "2    1     gpu None root teama normal 0.99998474121093 "
                                 "4294901759 gres:gpu:2 gres:gpu:2"]),
    ("JobArrayID:|,StateCompact:|,TimeUsed:|,TimeLimit:|,StartTime", [
        "JOBID|ST|TIME|TIME_LIMIT|START_TIME          ",
        "126|R|1:05|1:30:00|" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(1000)) + " "]),
])
def test_squeue_format_long_takes_slurms_names_widths_and_suffixes(fields, lines):
    header, *rows = lines if len(lines) == 2 else [None, *lines]
    for option in (["-O", fields], [f"--Format={fields}"], ["--Format", fields]):
        got = answer(squeue, ["-j", "126", *option], SQUEUE_ENV).splitlines()
        assert got == ([header] if header else got[:1]) + rows


def test_squeue_fills_submit_time_priority_reason_qos_and_gres(tmp_path):
    facts = os.open(tmp_path / "job", os.O_WRONLY | os.O_CREAT, 0o600)
    job_files.write_facts(facts, {"SubmitTime": "998"})
    os.close(facts)
    env = {**SQUEUE_ENV, slurm_tools.STEP_STATUS_ENV: str(tmp_path / "steps")}
    assert answer(squeue, ["-o", "%V|%Q|%r|%q|%b|%a|%P|%e"], env).splitlines() == [
        "SUBMIT_TIME|PRIORITY|REASON|QOS|TRES_PER_NODE|ACCOUNT|PARTITION|END_TIME",
        f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(998))}|4294901759|None|normal|gres:gpu:2|teama|gpu|"
        + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(6400))]
    plain = {k: v for k, v in OWN.items() if k != "SLURM_JOB_END_TIME"}   # on AWS no facts; no GPUs, no limit
    assert answer(squeue, ["-h", "-o", "%V %b %a %q %e %L"], plain) == "Unknown N/A (null) normal NONE UNLIMITED\n"
