"""A job that has run and waits to run again (requeued, or waiting to retry
after an error) on a personal queue, driven through the supervisor with fake
compute: `gqa history` lists it with its status and the GPU-hours and money
of its ended attempt, `--state requeued` names it, and `gqa report` counts
its spend in its team's and the job never started as still waiting."""

from __future__ import annotations

import time

import pytest

from gqa.models.job import JobState
from gqa.ports import Exit, Inventory
from gqa.scheduling.snapshot import Gpu
from gqa.services.control import ControlService
from gqa.services.submit import SubmitService
from gqa.services.supervisor import Supervisor
from tests.builders import spec
from tests.services.fakes import CountingWaker, FakeClock, FakeCompute, FixedRandom

PRICE = 2.0    # per GPU-hour


@pytest.fixture
def jobs(cli):
    """Three hours ago: `requeued` (vision, 2 GPUs) and `retrying` (nlp, 1 GPU) start; half an hour
    later the first is requeued by its owner and goes back to the queue; an hour after that the
    second fails and waits to retry. `held` (vision, low) was held at submission and never ran."""
    store = cli.store
    inventory = Inventory(gpus=tuple(Gpu(i, "a10g", price=PRICE) for i in range(4)), cpus=8, memory=64 << 30)
    store.set_inventory(inventory)
    clock = FakeClock(time.time() - 3 * 3600)
    compute = FakeCompute(inventory)
    supervisor = Supervisor(store, compute, clock, FixedRandom(0.5), grace=7.0)
    submit = SubmitService(store, clock, CountingWaker()).submit
    [requeued] = submit(spec(name="requeued", team="vision", resources={"gpus": 2}))
    [retrying] = submit(spec(name="retrying", team="nlp", resources={"gpus": 1}, retries={"on_error": 3}))
    [held] = submit(spec(name="held", team="vision", priority="low", hold=True))
    supervisor.dispatch()
    clock.advance(1800)
    ControlService(store, clock).requeue([requeued.id])
    supervisor.carry_out_requests()
    supervisor.on_exits([Exit(requeued.id, 1, 143, None)])
    clock.advance(3600)
    supervisor.on_exits([Exit(retrying.id, 1, 3, None)])
    assert [store.get(j.id).state for j in (requeued, retrying, held)] == [
        JobState.QUEUED, JobState.RETRY_WAIT, JobState.HELD]
    return {"requeued": requeued.id, "retrying": retrying.id, "held": held.id}


def test_history_lists_the_jobs_between_attempts_with_their_spend(cli, jobs):
    rows = {r["name"]: r for r in cli.json("history")["jobs"]}
    assert sorted(rows) == ["requeued", "retrying"]          # the held job never ran: `gqa queue` shows it
    requeued, retrying = rows["requeued"], rows["retrying"]
    assert (requeued["status"], requeued["ended_at"], requeued["attempts"]) == ("pending", None, 1)
    assert requeued["gpu_hours"] == pytest.approx(2 * 0.5, abs=0.01)
    assert requeued["cost"] == pytest.approx(2 * PRICE * 0.5, abs=0.05)
    assert (retrying["status"], retrying["exit"]) == ("retrying", "3")
    assert retrying["gpu_hours"] == pytest.approx(1.5, abs=0.01)
    assert retrying["cost"] == pytest.approx(PRICE * 1.5, abs=0.05)
    assert [r["name"] for r in cli.json("history", "--state", "requeued")["jobs"]] == ["retrying", "requeued"]
    assert cli.json("history", "--state", "running,completed")["jobs"] == []
    code, out, err = cli("history")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("0 finished, 0 running, 2 requeued, from ")
    assert out.splitlines()[-1].endswith(": 2.50 GPU-hours, $5.00")


def test_report_counts_their_spend_and_the_job_still_waiting(cli, jobs, tmp_path):
    report = cli.json("report", "--out", str(tmp_path / "out"))["report"]
    teams = {t["team"]: t for t in report["teams"]}
    assert teams["vision"]["gpu_hours"] == pytest.approx(1.0, abs=0.01)
    assert teams["vision"]["cost"] == pytest.approx(2 * PRICE * 0.5, abs=0.05)
    assert teams["nlp"]["cost"] == pytest.approx(PRICE * 1.5, abs=0.05)
    waits = {w["tier"]: w for w in report["waits"]}
    assert (waits["low"]["waiting"], waits["low"]["started"]) == (1, 0)        # held, never started
    assert (waits["normal"]["waiting"], waits["normal"]["started"]) == (0, 2)
    assert report["jobs"] == 3 and report["outcomes"]["running or waiting"] == 3
