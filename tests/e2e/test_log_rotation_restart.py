"""A real daemon rotating its jobs' logs: a running job's log is moved aside
as it writes and read whole; and, killed while a log was half rotated,
`gqa logs` gives each line once even before the daemon is back, and started
again, the daemon settles the rotation, so the files hold each line once too."""

from __future__ import annotations

import sys
from pathlib import Path

from gqa.adapters.local.log_records import sibling
from gqa.adapters.local.log_rotation import LogLimits, parts, rotations_of
from tests.log_crashes import CRASHES, crash

LINES = 400
# a cap the job's 400 lines stay under: the daemon's last look at the ended job's log leaves it whole, for
# the test's own rotation to die in
OPTIONS = ("--log-max-size", "1M", "--log-files", "2")


def test_a_rotation_half_done_when_the_daemon_died_is_settled_at_its_start(make_queue):
    queue = make_queue(start=False)
    queue.start(OPTIONS)
    [job_id] = queue.submit([sys.executable, "-c", f"for n in range({LINES}): print('line', n, flush=True)"])
    assert queue.wait(job_id).state.value == "SUCCEEDED"
    queue.crash()
    log = queue.home / "logs" / f"{job_id}.log"
    crash(log, LogLimits(64, 2), CRASHES["having put the copy at .1"])   # as if the daemon died there
    assert sibling(log, "rotating").exists()
    on_disk = in_files(log)
    assert len(on_disk) > len(set(on_disk)), "the half-done rotation holds no part twice"
    shown = shown_lines(queue, job_id)
    assert shown == [f"line {n}" for n in range(int(shown[0].split()[1]), LINES)]

    queue.start(OPTIONS)
    assert not sibling(log, "rotating").exists()
    assert in_files(log) == list(range(in_files(log)[0], LINES))   # the daemon may have dropped the oldest
    assert shown_lines(queue, job_id) == shown


def in_files(log: Path) -> list[int]:
    return [int(line.split()[1]) for name in parts(log, rotations_of(log))
            for line in name.read_text().splitlines() if line.startswith("line ")]


def shown_lines(queue, job_id: str) -> list[str]:
    return [line for line in queue.cli("logs", job_id, check=True).stdout.splitlines() if line.startswith("line ")]


def test_the_daemon_rotates_a_running_job_s_log_and_gqa_logs_reads_it_whole(make_queue):
    """Over a 1 KiB cap, the daemon's rotations (one as each KiB is written) move the log aside
    while the job writes; `gqa logs` reads the parts and the live file as one log."""
    queue = make_queue(start=False)
    queue.start(("--log-max-size", "1K", "--log-files", "50"))   # keep every part: nothing may go
    written = 400   # 12 s of 50-byte lines: over the cap within a second, and two of the daemon's checks
    job = f"import time\nfor n in range({written}):\n    print('line', n, 'x' * 40, flush=True); time.sleep(0.03)"
    [job_id] = queue.submit([sys.executable, "-c", job])
    assert queue.wait(job_id, timeout=60).state.value == "SUCCEEDED"
    log = queue.home / "logs" / f"{job_id}.log"
    assert rotations_of(log).count >= 1 and len(parts(log)) >= 2
    assert not sibling(log, "rotating").exists()
    shown = shown_lines(queue, job_id)
    numbers = [int(line.split()[1]) for line in shown]
    # a rotation may lose what the job writes in its window (a copy and a cut apart), never more
    assert numbers == sorted(set(numbers)) and numbers[-1] == written - 1 and len(numbers) >= written - 20, numbers
