"""Local job logs: the cap and its rotation, and reading the parts as one
log from its end or as it grows."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from gqa.adapters.local import log_records, log_rotation
from gqa.adapters.local.log_rotation import LogLimits, human_size, parts, rotate_if_needed, rotations_of
from gqa.adapters.local.log_stream import JobLog
from tests.builders import line_writer
from gqa.models.errors import SpecError


def numbered(first: int, last: int) -> bytes:
    return b"".join(b"line %d\n" % i for i in range(first, last + 1))


def read_all(path: Path, tail: int = 0, block: int = 1 << 20) -> bytes:
    return b"".join(JobLog(path, block).start(tail))


@pytest.fixture
def log(tmp_path) -> Path:
    return tmp_path / "12.log"


# -- limits ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, keep, max_bytes, cap", [
    ("100M", 2, 100 << 20, "100 MiB x 2"),
    ("1G", 3, 1 << 30, "1 GiB x 3"),
    ("512Ki", 1, 512 << 10, "512 KiB x 1"),
    ("64k", 0, 64 << 10, "64 KiB x 0"),
    ("10", 2, 10 << 20, "10 MiB x 2"),          # a bare number is MiB
    ("1000B", 2, 1000, "1000 bytes x 2"),
])
def test_limits_parse_sizes_as_binary_units(text, keep, max_bytes, cap):
    limits = LogLimits.parse(text, keep)
    assert (limits.max_bytes, limits.keep, limits.cap) == (max_bytes, keep, cap)


@pytest.mark.parametrize("make", [lambda: LogLimits.parse("lots"), lambda: LogLimits(0),
                                  lambda: LogLimits(100, keep=-1)])
def test_bad_limits_are_one_line_errors(make):
    with pytest.raises(SpecError):
        make()


def test_the_defaults_and_their_description():
    assert LogLimits() == LogLimits(100 << 20, 2)
    assert LogLimits().describe() == ("job logs capped at 100 MiB, the 2 latest earlier parts kept "
                                      "(log cap 100 MiB x 2)")
    assert LogLimits(1 << 20, 0).describe() == "job logs capped at 1 MiB, earlier output dropped (log cap 1 MiB x 0)"
    assert human_size(1536) == "1536 bytes"


# -- rotation --------------------------------------------------------------------------------------

def test_a_log_within_its_cap_is_left_alone(log):
    log.write_bytes(b"x" * 100)
    assert rotate_if_needed(log, LogLimits(100, 2)) is False
    assert parts(log) == [log] and rotations_of(log).count == 0


@pytest.mark.parametrize("where", ["12.log", "gone/12.log"])
def test_a_log_that_does_not_exist_is_no_error(tmp_path, where):
    assert rotate_if_needed(tmp_path / where, LogLimits(10, 2)) is False


def test_rotation_shifts_parts_and_drops_beyond_keep(log):
    limits = LogLimits(10, 2)
    for n, content in enumerate([b"first part\n", b"second part\n", b"third part\n"], 1):
        log.write_bytes(content)
        assert rotate_if_needed(log, limits) is True
        assert rotations_of(log).count == n
    log.write_bytes(b"live\n")
    assert [p.name for p in parts(log)] == ["12.log.2", "12.log.1", "12.log"]
    assert (log.with_name("12.log.2").read_bytes(), log.with_name("12.log.1").read_bytes()) == \
        (b"second part\n", b"third part\n")
    assert rotations_of(log).dropped == len(b"first part\n")
    assert read_all(log) == (b"--- gqa: 11 bytes of earlier output rotated away (log cap 10 bytes x 2)\n"
                             b"second part\nthird part\nlive\n")


def test_keeping_nothing_truncates_and_counts_what_was_dropped(log):
    log.write_bytes(numbered(1, 5))
    assert rotate_if_needed(log, LogLimits(10, keep=0)) is True
    assert parts(log) == [log] and log.read_bytes() == b""
    assert rotations_of(log).dropped == len(numbered(1, 5))


def test_the_writer_s_next_append_lands_at_the_new_start(log):
    """The job's descriptor is O_APPEND: after the truncation it writes at offset 0, leaving no hole."""
    with open(log, "ab", buffering=0) as job:
        job.write(numbered(1, 100))
        assert rotate_if_needed(log, LogLimits(100, 1)) is True
        job.write(b"after\n")
    assert log.read_bytes() == b"after\n"
    assert log.with_name("12.log.1").read_bytes() == numbered(1, 100)


@pytest.mark.parametrize("fail_at", [1, 2])
def test_a_failed_copy_leaves_the_live_log_whole_and_no_copy(log, monkeypatch, fail_at):
    log.write_bytes(numbered(1, 50))
    real, calls = log_rotation._copy, []

    def copy(*args):
        calls.append(1)
        if len(calls) == fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args)

    monkeypatch.setattr(log_rotation, "_copy", copy)
    with pytest.raises(OSError):
        rotate_if_needed(log, LogLimits(10, 2))
    assert log.read_bytes() == numbered(1, 50)
    assert sorted(p.name for p in log.parent.iterdir()) == ["12.log"]
    assert read_all(log) == numbered(1, 50)


@pytest.mark.parametrize("trap", ["symlink", "link"])
def test_a_log_that_is_a_link_to_another_file_is_never_rotated(log, tmp_path, trap):
    """A root daemon rotates users' logs: it must not truncate a file a log was pointed at."""
    precious = tmp_path / "precious"
    precious.write_bytes(numbered(1, 100))
    getattr(os, trap)(precious, log)
    assert rotate_if_needed(log, LogLimits(10, 2)) is False
    assert precious.read_bytes() == numbered(1, 100)


def test_a_link_planted_where_the_copy_goes_is_replaced_not_followed(log, tmp_path):
    precious = tmp_path / "precious"
    precious.write_bytes(b"keep me\n")
    os.symlink(precious, log.with_name("12.log.1.tmp"))
    log.write_bytes(numbered(1, 20))
    os.chmod(log, 0o640)
    assert rotate_if_needed(log, LogLimits(10, 2)) is True
    assert precious.read_bytes() == b"keep me\n"
    first = log.with_name("12.log.1")
    assert first.read_bytes() == numbered(1, 20) and not first.is_symlink()
    assert (first.stat().st_mode & 0o777, first.stat().st_uid) == (0o640, log.stat().st_uid)


def test_copying_falls_back_to_reads_and_writes_where_the_kernel_refuses(log, monkeypatch):
    def refuse(*args):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    log.write_bytes(numbered(1, 1000))
    assert rotate_if_needed(log, LogLimits(100, 1)) is True
    # the part ends where the live file goes on (at a block boundary, where the head was collapsed)
    assert log.with_name("12.log.1").read_bytes() + log.read_bytes() == numbered(1, 1000)
    assert log.with_name("12.log.1").stat().st_size > 0


@pytest.mark.parametrize("cap, lines", [(64 << 10, 400_000), (4 << 20, 1_200_000)], ids=["small cap", "4 MiB cap"])
def test_a_log_far_past_its_cap_keeps_its_head_and_newest_lines_within_the_part_bound(log, cap, lines):
    """A job that wrote faster than its log was looked at: the part holds at most
    part_bytes (the cap and as much again, 1 MiB at least), its head and its newest
    lines whole, and between them a line counting exactly the bytes cut."""
    limits = LogLimits(cap, 2)
    log.write_bytes(numbered(1, lines))
    assert rotate_if_needed(log, limits) is True
    part = log.with_name("12.log.1").read_bytes()
    assert len(part) <= limits.part_bytes == cap + max(cap, 1 << 20)
    # where the live file's head was collapsed, the part ends at a block boundary and the live file, under
    # a block, goes on with the newest lines
    live = log.read_bytes()
    assert len(live) < os.statvfs(log).f_frsize * 2
    text = (part + live).decode().splitlines()
    [at] = [i for i, line in enumerate(text) if line.startswith("--- gqa: ")]
    head, newest = ([int(line.split()[1]) for line in side] for side in (text[:at], text[at + 1:]))
    assert head == list(range(1, len(head) + 1)) and len(numbered(1, len(head))) >= cap
    assert newest == list(range(newest[0], lines + 1)), "the newest lines, the last one included"
    assert text[at] == log_records.cut_marker(len(numbered(len(head) + 1, newest[0] - 1)), limits.cap).decode().strip()
    assert rotations_of(log).dropped == 0


def test_a_dropped_part_counts_the_bytes_its_middle_cut_took_as_rotated_away(log):
    # a log far past its cap (a daemon down a while) leaves a part that stands for more than its
    # size; dropped later, "N bytes of earlier output rotated away" counted only its size
    limits = LogLimits(64 << 10, 1)
    log.write_bytes(numbered(1, 400_000))
    assert rotate_if_needed(log, limits) is True
    first = log.with_name("12.log.1").read_bytes()
    live = log.read_bytes()
    [cut_line] = [line for line in first.splitlines() if line.startswith(b"--- gqa: ")]
    stood_for = len(first) - len(cut_line) - 1 + int(cut_line.split()[2].replace(b",", b""))   # the job's bytes
    assert stood_for + len(live) == len(numbered(1, 400_000))
    log.write_bytes(live + numbered(400_001, 410_000))      # the live file goes on, past its cap again
    assert rotate_if_needed(log, limits) is True             # the part with the cut is dropped
    assert rotations_of(log).dropped == stood_for
    shown = read_all(log)
    first_kept = int(shown.splitlines()[1].split()[1])    # the line after "N bytes ... rotated away"
    told = len(numbered(1, first_kept - 1))               # the part and the partial line the live file began with
    assert shown.startswith(b"--- gqa: %s bytes of earlier output rotated away" % f"{told:,}".encode())


def test_rotating_while_a_process_writes_keeps_order_and_loses_at_most_the_window(log):
    total = 60_000
    limits = LogLimits(64 << 10, keep=1000)   # keep everything, to count what the windows lost
    writer = line_writer(log, total, pause_every=200)
    rotations = 0
    while writer.poll() is None:
        rotations += rotate_if_needed(log, limits)
        time.sleep(0.002)
    assert writer.wait() == 0
    # The writer's pace against the rotator's polls depends on the machine's load
    # (a busy 2-core runner managed 4 of the ~10 possible); two mid-write rotations
    # are enough to race the writer.
    assert rotations >= 2, f"only {rotations} rotations while the writer ran"
    rotations += rotate_if_needed(log, limits)
    lines = read_all(log).splitlines()
    numbers = [int(line.split()[1]) for line in lines]
    assert numbers == sorted(set(numbers)), "lines repeated or out of order"
    assert all(line == b"line %d" % n for line, n in zip(lines, numbers)), "a line was torn"
    # What a rotation can lose is what the job wrote between its last copy and the truncation: one
    # run of consecutive lines per rotation, the job's very last lines included when it ends inside it.
    kept = [-1, *numbers, total]
    gaps = [after - before - 1 for before, after in zip(kept, kept[1:]) if after - before > 1]
    assert len(gaps) <= rotations, f"{len(gaps)} runs of lines lost in {rotations} rotations"
    lost = total - len(numbers)
    assert lost <= 100 * rotations, f"{lost} lines lost in {rotations} rotations"   # a window of a few ms


# -- reading from the end ---------------------------------------------------------------------------

@pytest.mark.parametrize("content, n, shown", [
    (numbered(1, 10), 3, numbered(8, 10)),
    (numbered(1, 10), 10, numbered(1, 10)),
    (numbered(1, 10), 50, numbered(1, 10)),
    (numbered(1, 10) + b"partial", 2, b"line 10\npartial"),
    (b"a\n\n\nb\n", 2, b"\nb\n"),
    (b"", 5, b""),
])
@pytest.mark.parametrize("block", [3, 64 << 10])
def test_tail_gives_the_last_lines_exactly(log, content, n, shown, block):
    log.write_bytes(content)
    assert read_all(log, tail=n, block=block) == shown


def test_tail_reads_across_rotated_parts_and_marks_dropped_output_only_when_it_reaches_it(log):
    for chunk in (numbered(1, 10), numbered(11, 20), numbered(21, 30)):
        log.write_bytes(chunk)
        rotate_if_needed(log, LogLimits(10, keep=2))
    log.write_bytes(numbered(31, 33))
    assert read_all(log, tail=5, block=7) == numbered(29, 33)
    assert read_all(log, tail=100) == marker_of(log) + numbered(11, 33)


def marker_of(log: Path) -> bytes:
    r = rotations_of(log)
    return log_rotation.marker(r.dropped, r.cap)


def test_tail_of_a_big_log_reads_a_few_blocks_only(log, monkeypatch):
    with open(log, "wb") as fh:
        fh.truncate(512 << 20)             # 512 MiB, sparse: costs nothing to make
        fh.seek(0, 2)
        fh.write(numbered(1, 5))
    read = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: read.append(n) or real(fd, n, at))
    assert read_all(log, tail=3) == numbered(3, 5)
    assert sum(read) <= 64 << 10


# -- following ----------------------------------------------------------------------------------------

def follow(log: JobLog) -> bytes:
    return b"".join(log.new())


def test_follow_reads_only_what_was_appended(log, monkeypatch):
    log.write_bytes(numbered(1, 3))
    reader = JobLog(log)
    assert b"".join(reader.start()) == numbered(1, 3)
    assert follow(reader) == b""
    with open(log, "ab") as fh:
        fh.write(numbered(4, 5))
    offsets = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: offsets.append(at) or real(fd, n, at))
    assert follow(reader) == numbered(4, 5)
    assert offsets[0] == len(numbered(1, 3))


@pytest.mark.parametrize("rotations, keep, missed", [
    (1, 2, None),      # what we had not read yet is in .1
    (2, 2, None),      # ... in .2, then .1
    (3, 2, True),      # the file we were reading was dropped: a marker, then what is kept
])
def test_follow_across_rotations_gives_each_line_once(log, rotations, keep, missed):
    limits = LogLimits(1, keep)
    log.write_bytes(numbered(1, 3))
    reader = JobLog(log)
    got = b"".join(reader.start())
    next_line = 4
    with open(log, "ab", buffering=0) as job:
        job.write(numbered(4, 6))
        for _ in range(rotations):
            rotate_if_needed(log, limits)
            job.write(numbered(next_line + 3, next_line + 5))
            next_line += 3
    got += follow(reader)
    if missed:
        assert got.startswith(numbered(1, 3) + b"--- gqa: ")
        assert got.endswith(b"".join(log.with_name(f"12.log.{n}").read_bytes() for n in (2, 1)) + log.read_bytes())
    else:
        assert got == numbered(1, next_line + 2)
    assert follow(reader) == b""


def test_follow_waits_a_read_on_a_shorter_file_then_starts_over(log):
    log.write_bytes(numbered(1, 5))
    reader = JobLog(log)
    b"".join(reader.start())
    log.write_bytes(b"new\n")                   # truncated and rewritten by someone else
    assert follow(reader) == b""                # a rotation may be half done: wait one read
    assert follow(reader) == b"new\n"
