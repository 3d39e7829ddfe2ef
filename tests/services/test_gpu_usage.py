"""Each running job's GPU figures from readings of the GPUs, over the SQLite
store and a fake clock: attribution by the attempt's GPUs, the mean and the
peak, writes at most once a minute and at the end, a job that moved on."""

from __future__ import annotations

from gqa.models.job import JobState
from gqa.ports.observe import GpuReading
from gqa.services.control import ControlService
from gqa.services.gpu_usage import GpuUsage

EVERY = 15.0


def reading(at: float, **by_gpu: tuple[float | None, float | None]) -> dict[int, GpuReading]:
    """reading(t, g0=(util, memory MiB), g3=(...))"""
    return {int(k[1:]): GpuReading(int(k[1:]), at, util, memory, 24000.0) for k, (util, memory) in by_gpu.items()}


def running(queue):
    return queue.store.list([JobState.RUNNING])


def usage_of(queue, **kw) -> GpuUsage:
    return GpuUsage(queue.store, queue.clock, sample_every=EVERY, **kw)


def test_figures_are_attributed_by_the_attempts_gpus_and_written_once_a_minute(queue):
    a = queue.start(resources={"gpus": 2})
    b = queue.start(resources={"gpus": 1})
    assert a.state == b.state == JobState.RUNNING
    ga, gb = a.assigned, b.assigned
    usage = usage_of(queue)
    t = queue.clock.now()
    usage.observe({**reading(t, **{f"g{ga[0]}": (80, 1000), f"g{ga[1]}": (60, 3000)}),
                   **reading(t, **{f"g{gb[0]}": (5, 500)})}, running(queue))
    assert usage.write() == 2
    assert (queue.get(a.id).gpu_util, queue.get(a.id).gpu_memory) == (70.0, 4000.0)   # mean of its GPUs, summed MiB
    assert (queue.get(b.id).gpu_util, queue.get(b.id).gpu_memory) == (5.0, 500.0)

    queue.clock.advance(EVERY)
    t = queue.clock.now()
    usage.observe(reading(t, **{f"g{ga[0]}": (20, 500), f"g{ga[1]}": (20, 500)}), running(queue))
    assert usage.write() == 0                        # within the minute: nothing written
    queue.clock.advance(60)
    usage.observe(reading(t, **{f"g{ga[0]}": (0, 0), f"g{ga[1]}": (0, 0)}), running(queue))  # the same reading again
    assert usage.write() == 1
    job = queue.get(a.id)
    assert (job.gpu_util, job.gpu_memory) == (45.0, 4000.0)   # (70 + 20) / 2; the peak stays; a stale reading ignored
    assert usage.recent([a.id, b.id], window=30, now=t) == {a.id: 45.0, b.id: 5.0}
    assert usage.recent([a.id, b.id], window=10, now=t) == {a.id: 20.0}     # b: no sample in the window
    assert usage.recent([a.id], window=30, now=t + 60) == {}


def test_an_ending_attempt_is_written_at_once_and_a_job_that_moved_on_is_skipped(queue):
    a = queue.start(resources={"gpus": 1})
    b = queue.start(resources={"gpus": 1})
    usage = usage_of(queue)
    t = queue.clock.now()
    usage.observe(reading(t, **{f"g{a.assigned[0]}": (90, 100), f"g{b.assigned[0]}": (10, 100)}), running(queue))
    assert usage.write() == 2
    queue.clock.advance(5)
    usage.observe(reading(t + 5, **{f"g{a.assigned[0]}": (50, 900), f"g{b.assigned[0]}": (30, 900)}), running(queue))
    ControlService(queue.store, queue.clock).cancel([b.id])
    queue.exit(b.id, None, 15)                          # settled while its figures were waiting to be written
    assert usage.write(ended=[a.id, b.id]) == 1         # a's final figures; b moved on: skipped
    assert (queue.get(a.id).gpu_util, queue.get(a.id).gpu_memory) == (70.0, 900.0)
    assert queue.get(b.id).gpu_util == 10.0


def test_a_job_first_seen_mid_run_carries_on_from_its_stored_figures(queue):
    job = queue.start(resources={"gpus": 1})
    first = usage_of(queue)
    first.observe(reading(queue.clock.now(), **{f"g{job.assigned[0]}": (90, 2000)}), running(queue))
    first.write()
    queue.clock.advance(9 * EVERY)                     # the daemon restarts after 9 samples' worth of running
    again = usage_of(queue)
    again.observe(reading(queue.clock.now(), **{f"g{job.assigned[0]}": (0, 100)}), running(queue))
    again.write(ended=[job.id])
    stored = queue.get(job.id)
    assert stored.gpu_util == 81.0                     # (90 * 9 + 0) / 10: weighted by the time it had run
    assert stored.gpu_memory == 2000.0


def test_cpu_only_jobs_and_gpus_without_figures_write_nothing(queue):
    cpu = queue.start(resources={"gpus": 0, "cpus": 1})
    job = queue.start(resources={"gpus": 1})
    usage = usage_of(queue)
    usage.observe(reading(queue.clock.now(), **{f"g{job.assigned[0]}": (None, None)}), running(queue))
    assert usage.write(ended=[cpu.id, job.id]) == 0
    assert queue.get(job.id).gpu_util is None and queue.get(cpu.id).gpu_util is None
