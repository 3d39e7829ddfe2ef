"""The daemon with real processes, on a machine whose CPUs it counts: a
CPU-only job runs beside a GPU job with no GPU of its own, a job asking for
more CPUs than are free waits saying how many, and an exclusive job waits
for the machine to be empty, then has it to itself."""

import time

import pytest

from cli.local import start_background
from gqa.adapters.local.paths import StatePaths

pytestmark = pytest.mark.e2e


def waits_for(path) -> list[str]:
    """A command that says it runs, then waits (up to 30 s) for `path` to appear."""
    return ["sh", "-c", f"echo running gpus=[$CUDA_VISIBLE_DEVICES]; i=0; "
                        f"while [ ! -e {path} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"]


def reasons(queue) -> dict[str, str]:
    return {e.job.id: e.reason for e in queue.backend.queries().queue().pending}


def until(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


@pytest.fixture
def machine(make_queue):
    """One GPU and 2 CPUs, counted."""
    queue = make_queue(gpus=1, start=False)
    inventory = {"gpus": [{"index": 0, "type": "virtual"}], "cpus": 2, "memory": None}
    queue.pid = start_background(StatePaths(queue.home), inventory, queue.grace)
    return queue


def test_cpu_only_jobs_run_beside_a_gpu_job_and_an_exclusive_job_waits_for_an_empty_machine(machine, tmp_path):
    go = tmp_path / "go"
    [gpu_job] = machine.submit(waits_for(go), resources={"gpus": 1, "cpus": 1})
    [cpu_job] = machine.submit(waits_for(go), resources={"gpus": 0})
    machine.wait_log(gpu_job, "running gpus=[0]")
    log = machine.wait_log(cpu_job, "running gpus=[]")  # no GPU: CUDA_VISIBLE_DEVICES is empty
    assert f"attempt 1 of job {cpu_job} on no GPU (CPU only)" in log
    assert {machine.job(gpu_job).state.value, machine.job(cpu_job).state.value} == {"RUNNING"}
    assert machine.job(cpu_job).assigned == ()

    [exclusive] = machine.submit(waits_for(tmp_path / "done"), resources={"gpus": 0, "exclusive": True})
    [big] = machine.submit(["true"], resources={"gpus": 0, "cpus": 2})
    waiting = until(lambda: (r := reasons(machine)).get(big) and r.get(exclusive) and r)
    assert waiting[big] == "needs 2 CPUs, 0 free"
    assert waiting[exclusive] == "waits for the machine to be empty (--exclusive): 2 jobs running"

    go.touch()   # the first two end; the exclusive job, ahead of `big` in the queue, runs alone
    machine.wait([gpu_job, cpu_job])
    machine.wait(exclusive, states=("RUNNING",))
    [plain] = machine.submit(["true"], resources={"gpus": 1})
    held = until(lambda: (r := reasons(machine)).get(plain) and r)
    assert held[plain] == held[big] == f"job {exclusive} has the machine to itself (--exclusive)"
    assert machine.job(big).state.value == machine.job(plain).state.value == "QUEUED"

    (tmp_path / "done").touch()
    assert [j.state.value for j in machine.wait([exclusive, big, plain])] == ["SUCCEEDED"] * 3
