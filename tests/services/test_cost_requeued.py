"""`gqa cost` of a requeued job through the real control loop: its ended
attempt's GPU-hours count with its money while it waits, runs again and after
it ends, and its GPU-hours and money come from the same attempts."""

import pytest

from gqa.ports import Inventory
from gqa.scheduling import Gpu
from gqa.services.cost import CostService

PRICE = 2.0   # per GPU-hour


def test_a_requeued_jobs_hour_on_two_gpus_counts_while_it_waits_runs_again_and_after(queue):
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(4))))
    job = queue.start(team="vision", resources={"gpus": 2})
    queue.clock.advance(3600)                                     # attempt 1: 2 GPU-hours, $4
    queue.control.requeue([job.id])
    queue.supervisor.carry_out_requests()
    queue.exit(job.id, None, 15)
    cost = CostService(queue.store, queue.clock, history=queue.store)

    def seen() -> tuple[float, float, list[tuple[float, float]]]:
        report = cost.report(gpu_hours=True, jobs=5)
        return (report.gpu_hours["vision"], report.total,
                [(round(j.gpu_hours, 6), round(j.cost, 6)) for j in report.jobs])

    assert seen() == (pytest.approx(2.0), pytest.approx(4.0), [(2.0, 4.0)])        # back in the queue
    queue.clock.advance(600)
    queue.supervisor.promote_retries()
    queue.supervisor.dispatch()
    queue.clock.advance(1800)                                      # attempt 2: 30 min so far, 1 GPU-hour, $2
    assert seen() == (pytest.approx(3.0), pytest.approx(6.0), [(3.0, 6.0)])
    queue.exit(job.id, 0)
    assert seen() == (pytest.approx(3.0), pytest.approx(6.0), [(3.0, 6.0)])
