"""A pass claims a job as it read it: a `gqa update` of its GPUs or wall time
written between the pass's read and its claim leaves the job QUEUED (the next
pass plans it at its new size) rather than starting it on the GPUs planned for
its old one, charged for those and counted for the new."""

from __future__ import annotations

import pytest

import gqa.services.supervisor as supervisor_module
from gqa.models.job import JobState


@pytest.mark.parametrize("change", [{"gpus": 1}, {"time": 600}], ids=["gpus", "wall-time"])
def test_an_update_between_the_read_and_the_claim_is_planned_by_the_next_pass(queue, monkeypatch, change):
    job = queue.submit_one(resources={"gpus": 2}, limits={"wall_time": "1h"})
    real_plan = supervisor_module.plan

    def plan_then_update(*args, **kwargs):
        decision = real_plan(*args, **kwargs)
        if decision.starts:   # the job was read at 2 GPUs and an hour; the user changes it now
            [result] = queue.control.update(job.id, **change)
            assert result.action == "updated"
        return decision

    monkeypatch.setattr(supervisor_module, "plan", plan_then_update)
    assert queue.supervisor.dispatch() == []
    assert queue.get(job.id).state == JobState.QUEUED

    monkeypatch.setattr(supervisor_module, "plan", real_plan)
    [started] = queue.supervisor.dispatch()
    expected_gpus = change.get("gpus", 2)
    assert (started.gpus, len(started.assigned)) == (expected_gpus, expected_gpus)
    assert started.wall_time == change.get("time", 3600)
