"""A live log cut by collapsing its head (collapse.py, log_rotation.py): a job
writing flat out through rotations loses nothing and has no line torn, the
part and the live file meeting where the collapse cut; where the file system
refuses, the live file is truncated as before."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gqa.adapters.local import collapse
from gqa.adapters.local.log_rotation import LogLimits, parts, rotate_if_needed, rotations_of
from gqa.adapters.local.log_stream import JobLog
from tests.log_crashes import collapses


def numbered(first: int, last: int) -> bytes:
    return b"".join(b"line %d\n" % i for i in range(first, last + 1))


def read_all(path: Path) -> bytes:
    return b"".join(JobLog(path).start(0))


@pytest.fixture
def log(tmp_path) -> Path:
    if not collapses(tmp_path):
        pytest.skip("this file system does not collapse a file's head (fallocate COLLAPSE_RANGE): "
                    "rotation truncates there, as the fallback tests check")
    return tmp_path / "12.log"


# numbered lines, one write each, as fast as it can until told to stop; then its last line
FLAT_OUT = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
n = 0
while not os.path.exists(sys.argv[2]):
    for _ in range(100):
        os.write(fd, b"line %d\n" % n)
        n += 1
os.write(fd, b"last %d\n" % n)
"""


def test_a_job_writing_flat_out_through_rotations_keeps_every_line_once_and_whole(log):
    stop = log.with_name("stop")
    writer = subprocess.Popen([sys.executable, "-c", FLAT_OUT, str(log), str(stop)])
    limits = LogLimits(64 << 10, keep=100)     # nothing dropped: every line is to be read back
    rotations, deadline = 0, time.monotonic() + 60
    try:
        while rotations < 50 and time.monotonic() < deadline:
            rotations += rotate_if_needed(log, limits)
    finally:
        stop.touch()
        assert writer.wait(timeout=30) == 0
    assert rotations == 50, f"only {rotations} rotations in a minute"
    assert rotations_of(log).count == 50 and len(parts(log)) == 51
    *lines, last = read_all(log).decode().splitlines()
    assert last.startswith("last ")
    written = int(last.split()[1])
    # a job written faster than the part's bound has its middle cut, on purpose and marked: lines that
    # go missing anywhere else, or come twice, or torn, were lost to a rotation
    expected, lost = 0, []
    for line in lines:
        if line.startswith("--- gqa: ") and " bytes cut here" in line:
            expected = None
            continue
        word, number = line.split(" ")
        assert word == "line" and line == f"line {int(number)}", f"a torn line: {line!r}"
        if expected is not None and int(number) != expected:
            lost.append((expected, int(number)))
        expected = int(number) + 1
    assert not lost, f"lines lost or repeated (expected, found): {lost[:5]}"
    assert expected == written


def test_the_part_ends_at_a_block_and_the_live_file_goes_on_from_there(log):
    with open(log, "ab", buffering=0) as job:
        block = collapse.granularity(job.fileno())
        job.write(numbered(1, 1000))            # 8,893 bytes: two blocks and some
        assert rotate_if_needed(log, LogLimits(100, 1)) is True
        job.write(b"after\n")
    part = log.with_name("12.log.1").read_bytes()
    assert len(part) % block == 0 and len(part) > 0
    assert part + log.read_bytes() == numbered(1, 1000) + b"after\n"
    assert read_all(log) == numbered(1, 1000) + b"after\n"


def test_a_log_under_a_block_is_truncated(log):
    with open(log, "ab", buffering=0) as job:
        job.write(numbered(1, 100))
        assert rotate_if_needed(log, LogLimits(100, 1)) is True
        job.write(b"after\n")
    assert log.with_name("12.log.1").read_bytes() == numbered(1, 100)
    assert log.read_bytes() == b"after\n"


@pytest.mark.parametrize("refusal", [errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS])
def test_where_the_file_system_refuses_the_live_file_is_truncated_as_before(tmp_path, monkeypatch, refusal):
    """tmpfs, btrfs, NFS, overlay: the copy is whole (the bytes cut back for the collapse copied
    again), the live file truncated, the job's next write at its start."""
    calls = []

    def refused(fd, mode, offset, length):
        calls.append((mode, offset, length))
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(collapse, "fallocate", refused)
    log = tmp_path / "12.log"
    with open(log, "ab", buffering=0) as job:
        job.write(numbered(1, 1000))
        assert rotate_if_needed(log, LogLimits(100, 1)) is True
        job.write(b"after\n")
    assert calls and calls[0][:2] == (collapse.FALLOC_FL_COLLAPSE_RANGE, 0)
    assert log.with_name("12.log.1").read_bytes() == numbered(1, 1000)
    assert log.read_bytes() == b"after\n"


def test_an_error_other_than_a_refusal_is_raised_with_the_live_log_whole(tmp_path, monkeypatch):
    def failed(fd, mode, offset, length):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(collapse, "fallocate", failed)
    log = tmp_path / "12.log"
    log.write_bytes(numbered(1, 1000))
    with pytest.raises(OSError):
        rotate_if_needed(log, LogLimits(100, 1))
    assert read_all(log) == numbered(1, 1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["12.log"]


@pytest.mark.parametrize("reads", ["after every rotation", "after every third rotation", "between them"])
def test_a_follower_reads_every_line_once_across_collapsed_rotations(log, reads):
    """`gqa logs -f`: a follower that read past where a collapse cut goes on in the next file at the
    same distance past its start (it read 5,933 lines of 5,000, 5 torn, when it took the live file
    as begun anew)."""
    job = open(log, "ab", buffering=0)
    follower = JobLog(log)
    got = b"".join(follower.start(0))
    for r in range(9):
        job.write(numbered(r * 1000, r * 1000 + 999))
        if reads == "between them" or r % (1 if reads == "after every rotation" else 3) == 0:
            got += b"".join(follower.new())
        rotate_if_needed(log, LogLimits(4096, 10))
        if reads == "between them":
            job.write(b"between %d\n" % r)
            got += b"".join(follower.new())
    got += b"".join(follower.new())
    job.close()
    assert rotations_of(log).continued and all(rotations_of(log).continued)   # each rotation collapsed
    assert got == read_all(log)                                                # as one read of the whole
    lines = got.splitlines()
    assert [line for line in lines if line.startswith(b"line ")] == numbered(0, 8999).splitlines()


def test_a_record_written_before_parts_were_continued_is_read_as_truncations(log):
    from gqa.adapters.local.log_records import Rotations

    assert Rotations.from_json({"count": 3, "dropped": 0, "cap": "4 KiB x 2", "keep": 2}).took(1) == 0
    assert Rotations(keep=2).after(8192, 2, "c").after(0, 2, "c").after(4096, 2, "c").continued == (4096, 0, 8192)
    assert Rotations(keep=1).after(8192, 1, "c").after(0, 1, "c").after(4096, 1, "c").continued == (4096, 0)


def _lines_of(data: bytes) -> list[bytes]:
    return [line for line in data.splitlines() if line.startswith(b"line ")]


def test_a_follower_reading_by_the_intent_goes_on_where_the_collapse_cut(log, monkeypatch):
    """The record could not be written (a full disk): readers go by the intent, which says how much the
    collapse cut (it said 0 and the follower gave a block again, the first line torn)."""
    from gqa.adapters.local import log_rotation

    job = open(log, "ab", buffering=0)
    follower = JobLog(log)
    got = b"".join(follower.start(0))
    job.write(numbered(0, 1999))
    got += b"".join(follower.new())

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(log_rotation, "record", full)
    assert rotate_if_needed(log, LogLimits(4096, 2))
    job.write(numbered(2000, 2049))
    got += b"".join(follower.new())
    job.close()
    assert _lines_of(got) == numbered(0, 2049).splitlines()
    assert all(line.startswith((b"line ", b"--- gqa")) for line in got.splitlines())


@pytest.mark.parametrize("keep", [1, 3])
def test_a_follower_behind_by_more_rotations_than_are_kept_gives_nothing_twice(log, keep):
    job = open(log, "ab", buffering=0)
    follower = JobLog(log)
    got = b"".join(follower.start(0))
    n = 0
    for r in range(keep + 2):
        job.write(numbered(n, n + 999))
        n += 1000
        if r == 0:
            got += b"".join(follower.new())   # read to the end, then left behind
        rotate_if_needed(log, LogLimits(4096, keep))
    got += b"".join(follower.new())
    job.close()
    lines = _lines_of(got)
    assert len(lines) == len(set(lines)) and lines[-1] == b"line %d" % (n - 1)
    assert lines == sorted(lines, key=lambda line: int(line.split()[1]))
    assert all(line.startswith((b"line ", b"--- gqa")) for line in got.splitlines())   # none torn


@pytest.mark.parametrize("keep", [1, 3])
def test_once_older_parts_are_dropped_the_log_begins_at_a_whole_line(log, keep):
    """Parts end at block boundaries: the oldest kept began with the end of a line dropped, shown as
    half a line after the marker."""
    from gqa.adapters.local.log_pages import _Log

    with open(log, "ab", buffering=0) as job:
        for r in range(keep + 3):
            job.write(numbered(r * 1000, r * 1000 + 999))
            rotate_if_needed(log, LogLimits(4096, keep))
    shown = read_all(log).splitlines()
    assert shown[0].startswith(b"--- gqa: ") and shown[1].startswith(b"line ")
    dropped = int(shown[0].split()[2].replace(b",", b""))
    first = int(shown[1].split()[1])
    assert dropped == len(numbered(0, first - 1))        # the marker counts what is not shown, to the byte
    whole = _Log.open(log)
    try:
        assert next(whole.lines(whole.kept)) == shown[1] + b"\n"   # the API's pages begin there too
    finally:
        whole.close()
