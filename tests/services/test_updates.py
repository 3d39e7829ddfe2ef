"""ControlService.update: a pending job's wall time, priority or GPUs,
within the limits a submission must keep, spec and columns in one write."""

import pytest

from gqa.models.errors import InvalidTransition, Rejected, SpecError
from gqa.models.job import JobState
from gqa.scheduling import Policy, TeamPolicy
from gqa.services import control
from gqa.services.control import ControlService
from tests.services.test_control import StaleReads, setup

S = JobState


def test_an_update_changes_the_columns_and_the_spec_together(queue):
    job = queue.submit_one(resources={"gpus": 2}, limits={"wall_time": "4h"})
    before = queue.get(job.id)

    [result] = queue.control.update(job.id, time=2 * 3600, priority="high", gpus=1)

    stored = queue.get(job.id)
    assert (result.action, result.detail) == ("updated", "wall time 4h00m -> 2h00m, priority normal -> high, "
                                                         "GPUs 2 -> 1")
    assert (stored.wall_time, stored.tier, stored.gpus) == (7200, 0, 1)
    assert (stored.spec.limits.wall_time, stored.spec.priority.value, stored.spec.resources.gpus) == (7200, "high", 1)
    assert stored.spec.command == before.spec.command and stored.spec.owner == "alice"   # the rest as it was
    assert (stored.state, stored.history, stored.seq) == (S.QUEUED, before.history, before.seq)
    assert queue.waker.named[-1] == [job.id]


def test_an_update_to_the_values_a_job_has_changes_nothing(queue):
    job = queue.submit_one(resources={"gpus": 2})
    before = queue.get(job.id)

    [result] = queue.control.update(job.id, gpus=2, priority="normal")

    assert (result.action, result.detail) == ("unchanged", "already has priority normal, 2 GPUs")
    assert queue.get(job.id) == before


def test_a_held_job_is_updated_and_stays_held(queue):
    job = queue.submit_one()
    queue.control.hold([job.id])

    [result] = queue.control.update(job.id, time=600)

    stored = queue.get(job.id)
    assert result.action == "updated"
    assert (stored.state, stored.user_hold, stored.wall_time) == (S.HELD, True, 600)


@pytest.mark.parametrize("policy, team, change, words", [
    (Policy(), None, {"gpus": 9}, "job 1 cannot be updated: it asks for 9 GPUs; the queue has 4"),
    (Policy(max_gpus_per_job=2), None, {"gpus": 3}, "asks for 3 GPUs; the limit per job is 2"),
    (Policy(max_wall_time=3600), None, {"time": 7200}, "asks for 2h00m wall time; the limit is 1h00m"),
    (Policy(), TeamPolicy(max_gpus=2), {"gpus": 3}, "asks for 3 GPUs; team default may hold at most 2"),
])
def test_an_update_over_a_hard_limit_is_refused_with_the_numbers(queue, policy, team, change, words):
    queue.store.set_policy(policy)
    if team is not None:
        queue.store.set_team("default", team)
    job = queue.submit_one(resources={"gpus": 1}, limits={"wall_time": "1h"})
    before = queue.get(job.id)

    with pytest.raises(Rejected, match=words):
        queue.control.update(job.id, **change)

    assert queue.get(job.id) == before


def test_an_update_that_would_need_approval_is_refused_with_the_numbers(queue):
    queue.store.set_policy(Policy(approval_gpus=2, approval_gpu_hours=10))
    job = queue.submit_one(resources={"gpus": 2}, limits={"wall_time": "4h"})
    before = queue.get(job.id)

    with pytest.raises(Rejected, match=r"job 1 cannot be updated: it would then need approval: asks for 3 GPUs "
                                       r"\(approval needed over 2\); up to 12.0 GPU-hours \(approval needed over 10\)"):
        queue.control.update(job.id, gpus=3)
    with pytest.raises(Rejected, match=r"up to 16.0 GPU-hours \(approval needed over 10\)"):
        queue.control.update(job.id, time=8 * 3600)
    assert queue.get(job.id) == before


def test_an_approved_job_may_shrink(queue):
    queue.store.set_policy(Policy(approval_gpus=2))
    job = queue.submit_one(resources={"gpus": 4})
    queue.control.approve([job.id])

    [result] = queue.control.update(job.id, gpus=3)             # still over 2, but less than approved

    assert (result.action, queue.get(job.id).gpus) == ("updated", 3)
    with pytest.raises(Rejected, match="would then need approval: asks for 4 GPUs"):
        queue.control.update(job.id, gpus=4)                     # growing back asks an approver again


@pytest.mark.parametrize("state, words", [
    (S.RUNNING, "job 1 is running; only a pending job can be updated"),
    (S.RETRY_WAIT, "job 1 is retrying; only a queued or held job can be updated"),
    (S.FAILED, "job 1 already failed"),
])
def test_a_job_that_is_not_pending_cannot_be_updated(queue, state, words):
    job = setup(queue, state)
    before = queue.get(job.id)
    with pytest.raises(InvalidTransition, match=words):
        queue.control.update(job.id, time=60)
    assert queue.get(job.id) == before


def test_a_job_awaiting_approval_is_judged_at_the_size_it_was_submitted_with(queue):
    queue.store.set_policy(Policy(approval_gpus=1))
    job = queue.submit_one(resources={"gpus": 2})
    with pytest.raises(InvalidTransition, match="job 1 is awaiting approval"):
        queue.control.update(job.id, gpus=1)
    assert queue.get(job.id).gpus == 2


@pytest.mark.parametrize("change, words", [
    ({}, "nothing to update"),
    ({"priority": "urgent"}, "unknown priority 'urgent'; use high, normal or low"),
    ({"gpus": -1}, "number of GPUs must be a whole number, 0 or more"),
    ({"time": 0}, "wall time must be a positive number of seconds"),
])
def test_a_malformed_update_is_a_spec_error(queue, change, words):
    job = queue.submit_one()
    with pytest.raises(SpecError, match=words):
        queue.control.update(job.id, **change)


def test_an_update_the_spec_cannot_hold_names_what_breaks(queue):
    job = queue.submit_one(resources={"gpus": 4, "tasks": 2, "gpus_per_task": 2})
    with pytest.raises(SpecError, match="2 tasks of 2 GPUs need 4"):
        queue.control.update(job.id, gpus=2)
    assert queue.get(job.id).gpus == 4


def test_an_array_update_changes_every_pending_task(make_queue, monkeypatch):
    monkeypatch.setattr(control, "CHUNK", 2)
    queue = make_queue(1)
    queue.submit(array="0-4", limits={"wall_time": "1h"})
    queue.supervisor.dispatch()                              # 1_0 starts
    queue.control.hold(["1_4"])

    results = queue.control.update("1", time=1800)

    assert [(r.job.id, r.action) for r in results] == [("1_0", "unchanged")] + \
        [(f"1_{i}", "updated") for i in range(1, 5)]
    assert results[0].detail == "not pending (running)"
    assert [queue.get(f"1_{i}").wall_time for i in range(5)] == [3600] + [1800] * 4
    assert {queue.get(f"1_{i}").spec_json for i in range(1, 5)} == {queue.get("1_1").spec_json}
    assert queue.state("1_4") == S.HELD


def test_an_update_that_races_a_dispatch_leaves_the_started_job_as_it_runs(queue):
    """Read while queued, written after the claim: refused as if read after it, never a quiet "unchanged"."""
    job = queue.submit_one(limits={"wall_time": "1h"})
    seen = queue.store.resolve(job.id)
    queue.supervisor.dispatch()

    with pytest.raises(InvalidTransition, match=f"job {job.id} is running; only a pending job can be updated"):
        ControlService(StaleReads(queue.store, seen), queue.clock).update(job.id, time=60)

    assert queue.get(job.id).wall_time == 3600


def test_the_next_pass_starts_the_job_with_what_it_now_asks(queue):
    queue.submit_one(resources={"gpus": 3})
    assert len(queue.supervisor.dispatch()) == 1               # one GPU of 4 left
    waiting = queue.submit_one(resources={"gpus": 2})
    assert queue.supervisor.dispatch() == []

    queue.control.update(waiting.id, gpus=1)

    [started] = queue.supervisor.dispatch()
    assert (started.id, len(started.assigned)) == (waiting.id, 1)


@pytest.mark.parametrize("option, memory, gpus, after, words", [
    ("--mem-per-gpu", "20GiB", 4, 40 << 30, ", memory 20,480 MiB -> 40,960 MiB"),   # 10 GiB a GPU, as asked
    ("--mem-per-gpu", "20GiB", 1, 10 << 30, ", memory 20,480 MiB -> 10,240 MiB"),
    ("--mem-per-cpu", "20GiB", 4, 20 << 30, ""),    # per CPU: the GPUs leave it alone
    (None, "20GiB", 4, 20 << 30, ""),                # --mem: the job's whole
])
def test_memory_asked_per_gpu_follows_the_gpus(queue, option, memory, gpus, after, words):
    """sbatch --gpus=2 --mem-per-gpu=10G, then gqa update --gpus 4: it ran with 20 GiB and SLURM_MEM_PER_GPU=5120."""
    job = queue.submit_one(resources={"gpus": 2, "memory": memory, "memory_option": option})

    [result] = queue.control.update(job.id, gpus=gpus)

    stored = queue.get(job.id)
    assert result.detail == f"GPUs 2 -> {gpus}{words}"
    assert stored.memory == stored.spec.resources.memory == after
