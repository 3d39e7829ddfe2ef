"""A real daemon killed while a job's log was half rotated: started again, it
settles the rotation before anyone reads the log, so `gqa logs` gives each
line once and the marker counts what was dropped."""

from __future__ import annotations

import sys

from gqa.adapters.local.log_records import sibling
from gqa.adapters.local.log_rotation import LogLimits
from gqa.adapters.local.log_stream import JobLog
from tests.log_crashes import CRASHES, crash

LINES = 400
OPTIONS = ("--log-max-size", "1K", "--log-files", "2")


def test_a_rotation_half_done_when_the_daemon_died_is_settled_at_its_start(make_queue):
    queue = make_queue(start=False)
    queue.start(OPTIONS)
    [job_id] = queue.submit([sys.executable, "-c", f"for n in range({LINES}): print('line', n, flush=True)"])
    assert queue.wait(job_id).state.value == "SUCCEEDED"
    queue.crash()
    log = queue.home / "logs" / f"{job_id}.log"
    crash(log, LogLimits(64, 2), CRASHES["having put the copy at .1"])   # as if the daemon died there
    assert sibling(log, "rotating").exists()
    before = numbers(log)
    assert len(before) > len(set(before)), "the half-done rotation shows no repeat"

    queue.start(OPTIONS)
    assert not sibling(log, "rotating").exists()
    after = numbers(log)
    assert after == list(range(after[0], LINES))     # the daemon may have dropped the oldest as the job ran
    shown = [line for line in queue.cli("logs", job_id, check=True).stdout.splitlines() if line.startswith("line ")]
    assert shown == [f"line {n}" for n in after]


def numbers(log) -> list[int]:
    return [int(line.split()[1]) for line in b"".join(JobLog(log).start(0)).decode().splitlines()
            if line.startswith("line ")]
