"""benchmarks/plan_scaling.py's queue with a share of it waiting for a --begin time or on a running
job, and its refusals."""

import subprocess
import sys
from pathlib import Path

import pytest

from gqa.scheduling import plan

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import plan_scaling  # noqa: E402


def test_a_share_of_the_queue_waits_for_its_begin_and_the_rest_is_the_same_queue():
    plain = plan_scaling.snapshot(400, 50, 200, "gqa")
    begun = plan_scaling.snapshot(400, 50, 200, "gqa", begin_share=0.5)
    waiting = [job for job in begun.pending if job.begin is not None]
    assert 150 < len(waiting) < 250
    assert all(begun.now + 60 <= job.begin <= begun.now + 2 * 86400 for job in waiting)
    assert [job.id for job in begun.pending] == [job.id for job in plain.pending]
    assert [job for job in begun.pending if job.begin is None] == \
        [job for job in plain.pending if job.id not in {w.id for w in waiting}]
    assert begun.running == plain.running
    decided = plan(begun, explain=False)
    assert decided.starts and not {s.job_id for s in decided.starts} & {job.id for job in waiting}


def test_a_share_of_the_queue_waits_on_running_jobs():
    begun = plan_scaling.snapshot(400, 50, 200, "gqa", dependency_share=0.5)
    waiting = [job for job in begun.pending if job.dependency]
    assert 150 < len(waiting) < 250
    decided = plan(begun)
    assert decided.starts and not {s.job_id for s in decided.starts} & {job.id for job in waiting}
    told = [decided.waiting[job.id] for job in waiting if job.id in decided.waiting]
    assert told and all(reason.startswith("waits for job ") for reason in told)


@pytest.mark.parametrize("option", ["--begin", "--dependency"])
def test_a_share_out_of_range_is_refused(option):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "plan_scaling.py"), option, "1.5"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and option in done.stderr and not done.stdout
