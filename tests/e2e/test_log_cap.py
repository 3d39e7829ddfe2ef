"""A job writing its log as fast as it can, against a small cap: the daemon
rotates the log as it is written, so no part of it, the live file included
once the job has ended, holds more than the bound the README states (the
cap and as much again, 1 MiB at least), and the job's last line is kept."""

from __future__ import annotations

import sys
import time

from gqa.adapters.local.log_rotation import parts, rotations_of

CAP = 64 << 10
BOUND = CAP + max(CAP, 1 << 20)       # README: "a part holds at most the cap and as much again, 1 MiB at least"
# its last line comes a moment after the flood, as a job's summary or traceback does: one written within
# a fraction of a millisecond of a write the rotation could not keep up with may go with the cut (README)
FLOOD = """
import os, time
block, written, start = b"x" * 65535 + b"\\n", 0, time.monotonic()
while time.monotonic() - start < 1.0:
    written += os.write(1, block)
elapsed = time.monotonic() - start
time.sleep(0.05)
print(f"wrote {written} bytes in {elapsed:.2f} s", flush=True)
"""


def test_a_job_writing_as_fast_as_it_can_keeps_every_part_of_its_log_within_the_bound(make_queue):
    queue = make_queue(start=False)
    queue.start(("--log-max-size", "64K", "--log-files", "2"))
    [job_id] = queue.submit([sys.executable, "-c", FLOOD])
    assert queue.wait(job_id, timeout=60).state.value == "SUCCEEDED"
    log = queue.home / "logs" / f"{job_id}.log"
    deadline = time.monotonic() + 5    # the last look at an ended job's log comes a turn after its exit
    while log.stat().st_size > BOUND and time.monotonic() < deadline:
        time.sleep(0.05)
    sizes = {name.name: name.stat().st_size for name in parts(log)}
    assert max(sizes.values()) <= BOUND, sizes
    [last] = queue.cli("logs", job_id, "-n", "1", check=True).stdout.splitlines()
    written = int(last.split()[1])
    assert last.startswith("wrote ") and written > 20 * BOUND, last   # it did write far past the cap
    assert rotations_of(log).count >= 3
