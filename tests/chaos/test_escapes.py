"""Jobs whose processes leave the job's process group (setsid, a double
fork, setpgid) and outlive its main process, or are cancelled while such
children run: once the job has ended, no process of it survives, and the
GPU goes to the next job only after they are gone (the next job counts
them when it starts, on the only GPU)."""

import time
import uuid

import pytest

from .harness import Runs, tagged

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]


def wait_started(chaos, job_id: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while job_id not in Runs.read(chaos.runs).starts:
        assert time.monotonic() < deadline, f"job {job_id} never started"
        time.sleep(0.05)


def test_escaped_processes_die_with_their_job_before_the_gpu_moves_on(make_chaos):
    chaos = make_chaos(gpus=1, grace=1.0)
    chaos.start()
    escaper = {"CHAOS_ESCAPER": uuid.uuid4().hex}
    tag = escaper["CHAOS_ESCAPER"]

    [ends] = chaos.submit(1, 0.2, mode="escape", env=escaper)        # escapes, then exits 0
    census1 = _census(chaos, tag)                                     # counts what is left of the first
    [hangs] = chaos.submit(1, mode="hang", env=escaper)               # escapes, then runs until cancelled
    census2 = _census(chaos, tag)

    wait_started(chaos, hangs)
    time.sleep(0.6)                                                   # its escapees are out by now
    assert tagged("CHAOS_ESCAPER", tag, GQA_JOB_ID=hangs), "the hanging job left nothing behind to find"
    assert chaos.cli("cancel", hangs).returncode == 0

    chaos.check("escaping processes", [ends, census1, hangs, census2], once=True, cancelled=[hangs])
    runs = Runs.read(chaos.runs)
    assert runs.census == {census1: 0, census2: 0}, f"escapees alive when the next job started: {runs.census}"
    for job in (ends, hangs):
        assert tagged("CHAOS_ESCAPER", tag, GQA_JOB_ID=job) == [], f"processes of job {job} survived it"


def _census(chaos, tag: str) -> str:
    from gqa.models.loader import validate

    raw = {"name": "census", "command": chaos.job_command("census", tag), "workdir": str(chaos.work)}
    [job] = chaos.backend.submitter().submit(validate(raw))
    return job.id
