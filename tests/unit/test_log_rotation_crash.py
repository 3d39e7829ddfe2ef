"""A daemon killed in the middle of a log's rotation: whatever step it died
after, once the rotation is settled (at the daemon's start, or at the next
rotation) the log reads as written, each line once and in order, and the
marker counts exactly the bytes that are no longer there."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from gqa.adapters.local import log_records, log_recovery, log_rotation
from gqa.adapters.local.log_pages import LocalLogFiles
from gqa.adapters.local.log_recovery import FINISHED, UNDONE, finish, finish_all, intent_of
from gqa.adapters.local.log_rotation import LogLimits, parts, rotate_if_needed, rotations_of
from gqa.adapters.local.log_stream import JobLog
from gqa.adapters.local.paths import StatePaths
from gqa.models.job import JobState
from tests.builders import history, job_record
from tests.log_crashes import COLLAPSE_CRASHES, CRASHES, collapses, crash, die_after, refuse_collapse


class Log:
    """Job 12's log: lines written through an O_APPEND descriptor, as the job writes."""

    def __init__(self, tmp_path: Path, keep: int = 2):
        self.paths = StatePaths(tmp_path)
        self.paths.logs.mkdir(parents=True)
        self.path = self.paths.log_for("12")
        self.limits = LogLimits(40, keep)
        self.written = 0

    def write(self, lines: int) -> None:
        with open(self.path, "ab", buffering=0) as job:
            for _ in range(lines):
                job.write(b"line %d\n" % self.written)
                self.written += 1

    def numbers_and_marker(self) -> tuple[list[int], int]:
        text = b"".join(JobLog(self.path).start(0)).decode()
        marked, numbers = 0, []
        for line in text.splitlines():
            if line.startswith("--- gqa: "):
                marked = int(line.split()[2].replace(",", ""))
            else:
                numbers.append(int(line.split()[1]))
        return numbers, marked

    def check_reading(self) -> list[int]:
        """Each line once, in order, none missing after the first kept, and
        the marker counts the bytes of the lines before it; a page of the
        attempt gives the same lines. The numbers read."""
        numbers, marked = self.numbers_and_marker()
        assert numbers == list(range(numbers[0] if numbers else self.written, self.written)), numbers
        assert marked == sum(len(b"line %d\n" % n) for n in range(numbers[0] if numbers else self.written))
        assert [line for line in self.page() if not line.startswith("---")] == [f"line {n}" for n in numbers]
        return numbers

    def check(self) -> None:
        """As check_reading, and settled: the record counts what the marker
        does, and the parts are numbered from `.1` with no gap."""
        numbers = self.check_reading()
        assert rotations_of(self.path).dropped == sum(len(b"line %d\n" % n) for n in range(numbers[0]))
        older = sorted(int(p.name.rsplit(".", 1)[1]) for p in self.path.parent.iterdir()
                       if p.name.rsplit(".", 1)[1].isdigit())
        assert older == list(range(1, len(older) + 1)) and len(older) <= self.limits.keep, older

    def raw(self) -> list[int]:
        """The line numbers in the files as they lie, oldest part first."""
        return [int(line.split()[1]) for name in parts(self.path, rotations_of(self.path))
                for line in name.read_bytes().decode().splitlines()]

    def page(self) -> list[str]:
        job = job_record(id="12", group="12", state=JobState.RUNNING, attempts=1,
                         spec={"command": ["t"]}, history=history("RUNNING@0"))
        files = LocalLogFiles(self.paths)
        return list(files.read(files.attempt(job, 1), "0", 10_000).lines)


def rotated(log: Log, times: int) -> None:
    for _ in range(times):
        log.write(6)
        assert rotate_if_needed(log.path, log.limits) is True


# what each crash leaves (where the copy is, if an intent names one) and how it is settled
LEFT = {
    "during the long copy": (None, None),
    "after writing its intent": ("12.log.1.tmp", UNDONE),
    "having dropped the oldest part only": ("12.log.1.tmp", UNDONE),
    "having shifted the parts": ("12.log.1.tmp", UNDONE),
    "having put the copy at .1": ("12.log.1", UNDONE),
    "after the catch-up copy": ("12.log.1", UNDONE),
    "having cut the live file": ("12.log.1", FINISHED),
    "having written its record": ("12.log.1", None),
}


def test_every_crash_is_told_what_it_leaves():
    assert set(LEFT) == set(CRASHES)


@pytest.mark.parametrize("step", list(CRASHES))
@pytest.mark.parametrize("more", [0, 3], ids=["nothing written since", "written on since"])
def test_a_rotation_killed_at_any_step_is_settled_at_the_daemon_s_start(tmp_path, step, more):
    log = Log(tmp_path)
    rotated(log, 3)                      # .1 and .2 there, so the rotation drops the oldest
    log.write(6)
    crash(log.path, log.limits, CRASHES[step])
    copy_at, outcome = LEFT[step]
    intent = intent_of(log.path)
    assert (intent is not None) == (copy_at is not None)
    if intent is not None:
        assert (log.path.parent / copy_at).stat().st_ino == intent.copy
    log.write(more)                      # the job goes on while the daemon is down
    log.check_reading()                  # readers read it as it will be settled
    assert dict(finish_all(log.paths.logs)) == {log.path: outcome}
    assert not [p for p in log.path.parent.iterdir() if p.name.endswith((".tmp", ".rotating"))]
    log.check()
    rotated(log, 3)                      # and rotation goes on as before
    log.check()
    assert not [p for p in log.path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("step, outcome", [("after writing its intent", UNDONE),
                                           ("having cut the live file", FINISHED)])
def test_the_next_rotation_settles_it_first_when_the_daemon_never_restarted_it(tmp_path, step, outcome, monkeypatch):
    log = Log(tmp_path)
    rotated(log, 2)
    log.write(6)
    crash(log.path, log.limits, CRASHES[step])
    calls = []
    real = log_recovery.finish
    monkeypatch.setattr(log_recovery, "finish", lambda path: calls.append(real(path)))
    rotated(log, 1)
    assert calls[0] == outcome
    log.check()


@pytest.mark.parametrize("step, outcome", [("after writing its intent", UNDONE),
                                           ("having cut the live file", FINISHED)])
def test_keeping_no_parts_a_killed_rotation_counts_what_it_cut(tmp_path, step, outcome):
    log = Log(tmp_path, keep=0)
    log.write(6)
    crash(log.path, log.limits, CRASHES[step])
    log.write(2)
    assert finish(log.path) == outcome
    log.check()


def test_a_record_the_full_disk_refused_is_written_at_the_next_call(tmp_path, monkeypatch):
    log = Log(tmp_path)
    rotated(log, 1)
    real = log_rotation.record

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(log_rotation, "record", full)
    rotated(log, 1)
    assert rotations_of(log.path).count == 1 and log_records.sibling(log.path, "rotating").exists()
    monkeypatch.setattr(log_rotation, "record", real)
    log.write(1)
    assert rotate_if_needed(log.path, log.limits) is False      # under the cap: only settled
    assert rotations_of(log.path).count == 2 and not log_records.sibling(log.path, "rotating").exists()
    log.check()


def planted(log: Log) -> None:
    log_records.sibling(log.path, "rotating").write_text("{not json")


@pytest.mark.parametrize("leave", [lambda log: crash(log.path, log.limits, CRASHES["having written its record"]),
                                   planted], ids=["its record written", "not written by a rotation"])
def test_an_intent_with_nothing_left_to_settle_is_only_removed(tmp_path, leave):
    log = Log(tmp_path)
    rotated(log, 2)
    log.write(6)
    leave(log)
    names = sorted(p.name for p in log.path.parent.iterdir())
    assert finish(log.path) is None
    assert sorted(p.name for p in log.path.parent.iterdir()) == [n for n in names if n != "12.log.rotating"]
    log.check()


def test_the_intent_of_a_log_since_deleted_is_removed(tmp_path):
    log = Log(tmp_path)
    rotated(log, 1)
    log.write(6)
    crash(log.path, log.limits, CRASHES["having put the copy at .1"])
    for part in parts(log.path):
        part.unlink()
    assert dict(finish_all(log.paths.logs)) == {log.path: None}
    assert not log_records.sibling(log.path, "rotating").exists()


def test_a_full_disk_while_settling_leaves_the_intent_for_the_next_try(tmp_path, monkeypatch):
    log = Log(tmp_path)
    rotated(log, 1)
    log.write(6)
    crash(log.path, log.limits, CRASHES["having cut the live file"])
    real = log_recovery.record

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(log_recovery, "record", full)
    [(path, outcome)] = finish_all(log.paths.logs)
    assert isinstance(outcome, OSError) and log_records.sibling(log.path, "rotating").exists()
    monkeypatch.setattr(log_recovery, "record", real)
    assert dict(finish_all(log.paths.logs)) == {log.path: FINISHED}
    log.check()


@pytest.mark.parametrize("step", ["having put the copy at .1", "after the catch-up copy"])
def test_the_files_a_half_done_rotation_leaves_hold_a_part_twice_which_no_reader_shows(tmp_path, step):
    log = Log(tmp_path)
    rotated(log, 2)
    log.write(6)
    crash(log.path, log.limits, CRASHES[step])
    raw = log.raw()
    assert len(raw) > len(set(raw))
    log.check_reading()


@pytest.mark.parametrize("step", list(CRASHES))
def test_a_follower_reads_each_line_once_through_a_half_done_rotation_and_its_settling(tmp_path, step):
    log = Log(tmp_path)
    rotated(log, 2)
    follower = JobLog(log.path)
    got = b"".join(follower.start(0))
    log.write(6)
    crash(log.path, log.limits, CRASHES[step])
    got += b"".join(follower.new())
    log.write(2)
    got += b"".join(follower.new())
    finish(log.path)
    got += b"".join(follower.new())
    for _ in range(3):
        rotated(log, 1)
        got += b"".join(follower.new())
    numbers = [int(line.split()[1]) for line in got.decode().splitlines() if line.startswith("line ")]
    assert numbers == list(range(numbers[0], log.written))


# a log far past the part's bound (40 bytes + 1 MiB): its copy is cut in the middle, so it is no longer the
# start of the live file; the intent names the head, the copy's bytes that are
CUT_CRASHES = {
    "having made the cut copy": (lambda: die_after("_copy", log_rotation, nth=2), UNDONE),
    "having truncated the live file": (lambda: (refuse_collapse(),
                                                die_after("ftruncate", os, when=lambda fd, length: length == 0)),
                                       FINISHED),
    **{step: (how, UNDONE if "copy back" in step else FINISHED) for step, how in COLLAPSE_CRASHES.items()},
}


@pytest.mark.parametrize("step", list(CUT_CRASHES))
def test_a_rotation_that_cuts_the_middle_killed_before_or_after_the_live_file_is_cut_is_settled_right(tmp_path,
                                                                                                     step):
    if step in COLLAPSE_CRASHES and not collapses(tmp_path):
        pytest.skip("this file system does not collapse a file's head (fallocate COLLAPSE_RANGE)")
    log = Log(tmp_path)
    log.write(150_000)
    how, outcome = CUT_CRASHES[step]
    crash(log.path, log.limits, how)
    assert "bytes cut here" in log_records.sibling(log.path, 1).read_text()
    log.write(3)                         # the job goes on while the daemon is down
    assert finish(log.path) == outcome
    text = b"".join(JobLog(log.path).start(0)).decode().splitlines()
    numbers = [int(line.split()[1]) for line in text if line.startswith("line ")]
    if outcome == UNDONE:                # the live file whole, the copy gone: each line once
        assert numbers == list(range(log.written)) and len(text) == log.written
    else:                                # the part and what came since: the head, the cut, the newest
        [at] = [i for i, line in enumerate(text) if "bytes cut here" in line]
        head = len(text[:at])
        assert numbers == [*range(head), *range(numbers[head], log.written)]
        assert text[at].startswith(f"--- gqa: {sum(len(b'line %d' % n) + 1 for n in range(head, numbers[head])):,} ")


def test_the_intent_is_the_log_owner_s_file_with_the_log_s_mode(tmp_path):
    """A root daemon rotates its users' logs: what it writes beside one is as private as the log."""
    log = Log(tmp_path)
    log.write(6)
    os.chmod(log.path, 0o640)
    crash(log.path, log.limits, CRASHES["after writing its intent"])
    intent = log_records.sibling(log.path, "rotating").stat()
    assert (intent.st_mode & 0o777, intent.st_uid) == (0o640, log.path.stat().st_uid)


@pytest.mark.parametrize("rotations", [0, 2], ids=["no older part", "older parts"])
def test_a_reader_whose_copy_is_undone_as_it_looks_reads_the_log_as_undone(tmp_path, monkeypatch, rotations):
    """The daemon's start settles a half-done rotation while a reader lays the log out: the
    copy it found may be gone when it opens it, or an older part numbered `.1` in its place."""
    log = Log(tmp_path)
    rotated(log, rotations)
    log.write(6)
    crash(log.path, log.limits, CRASHES["having put the copy at .1"])
    real, undone = log_recovery._part_with, []

    def found_then_undone(path, inode, names):
        found = real(path, inode, names)
        if found is not None and found.name == "12.log.1" and not undone:
            undone.append(None)   # marked before finish(), which looks for parts through this too
            undone[0] = finish(log.path)
        return found

    monkeypatch.setattr(log_recovery, "_part_with", found_then_undone)
    assert log_rotation.rotations_as_read(log.path).count == rotations
    assert undone == [UNDONE]
    log.check()


@pytest.mark.parametrize("step", list(COLLAPSE_CRASHES))
@pytest.mark.parametrize("more", [0, 3], ids=["nothing written since", "written on since"])
def test_a_rotation_killed_around_the_collapse_of_the_live_file_is_settled_right(tmp_path, step, more):
    """Killed with the copy cut back to a block, the live file whole: undone. Killed once the
    live file's head was collapsed, before the record: finished, the part and the live file
    meeting where the collapse cut (inside a line, read whole)."""
    if not collapses(tmp_path):
        pytest.skip("this file system does not collapse a file's head (fallocate COLLAPSE_RANGE)")
    log = Log(tmp_path, keep=10)
    log.limits = LogLimits(4096, 10)
    log.write(1000)
    assert rotate_if_needed(log.path, log.limits) is True
    log.write(1000)
    crash(log.path, log.limits, COLLAPSE_CRASHES[step])
    outcome = UNDONE if "copy back" in step else FINISHED
    part = log_records.sibling(log.path, 1)
    assert part.stat().st_ino == intent_of(log.path).copy
    assert part.stat().st_size % os.statvfs(tmp_path).f_frsize == 0
    log.write(more)                      # the job goes on while the daemon is down
    log.check_reading()                  # readers read it as it will be settled
    assert finish(log.path) == outcome
    log.check()
    assert rotations_of(log.path).count == (1 if outcome == UNDONE else 2)
    log.write(1000)
    assert rotate_if_needed(log.path, log.limits) is True
    log.check()
