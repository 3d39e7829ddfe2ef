"""The log cap's watch (gqa/adapters/local/log_watch.py): when a log being
written is looked at again (`pause`), and the watch's turns over real files
and the kernel's inotify, with the clock in the test's hands."""

from __future__ import annotations

import errno
import logging
import time
from pathlib import Path

import pytest

from gqa.adapters.local import log_watch
from gqa.adapters.local.log_rotation import LogLimits, rotations_of
from gqa.adapters.local.log_watch import FASTEST, POLL_EVERY, QUICKEST, RETRY, SLOWEST, LogWatch, pause

MiB, GiB = 1 << 20, 1 << 30


@pytest.mark.parametrize("headroom, rate, seconds", [
    (0, 0.0, QUICKEST),                                           # at the cap: as soon as it may
    (-5 * MiB, 0.0, QUICKEST),                                    # past it (a rotation failed): the same
    (64 << 10, 0.0, QUICKEST + (64 << 10) / GiB),                 # a small cap: hardly later
    (100 * MiB, 0.0, QUICKEST + 100 / 1024),                      # the default cap, just rotated: 0.108 s
    (100 * MiB, 50.0 * MiB, QUICKEST + 100 / 1024),               # seen writing slower than FASTEST: FASTEST counts
    (100 * MiB, 4.0 * GiB, QUICKEST + 100 / 1024 / 8),            # seen writing faster: twice its rate counts
    (2 * GiB, 0.0, SLOWEST),                                      # however far below: at most SLOWEST
])
def test_a_log_is_looked_at_again_sooner_the_nearer_it_is_to_its_cap_and_the_faster_it_grew(headroom, rate, seconds):
    assert pause(headroom, rate) == pytest.approx(seconds)


@pytest.mark.parametrize("headroom", [0, 4 << 10, 64 << 10, MiB, 100 * MiB, 10 * GiB])
@pytest.mark.parametrize("rate", [0.0, 1e3, 100.0 * MiB, 3.0 * GiB])
def test_a_job_writing_no_faster_than_assumed_passes_its_cap_by_quickest_s_worth_at_most(headroom, rate):
    """The bound the README states: at its fastest assumed pace (FASTEST, or twice
    the rate it was seen at), what the job writes until the next look, less the
    headroom, is at most what it writes in QUICKEST."""
    fastest = max(FASTEST, 2 * rate)
    assert fastest * pause(headroom, rate) - headroom <= fastest * QUICKEST * (1 + 1e-9)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


CAP = 1000


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def looked(monkeypatch) -> list[str]:
    """The logs the watch looked at, in order."""
    seen: list[str] = []
    real = LogWatch._look

    def look(self, entry, now, **kwargs):
        seen.append(Path(entry.path).name)
        return real(self, entry, now, **kwargs)

    monkeypatch.setattr(LogWatch, "_look", look)
    return seen


def logs(tmp_path: Path, *names: str) -> list[Path]:
    for name in names:
        (tmp_path / name).write_bytes(b"")
    return [tmp_path / name for name in names]


def write(path: Path, size: int) -> None:
    with open(path, "ab", buffering=0) as job:
        job.write(b"x" * (size - 1) + b"\n")


def watched(watch: LogWatch) -> set[int]:
    """The inodes the kernel watches for the watch, as /proc tells."""
    assert watch._inotify is not None
    lines = Path(f"/proc/self/fdinfo/{watch._inotify.fileno()}").read_text().splitlines()
    return {int(word[4:], 16) for line in lines if line.startswith("inotify ")
            for word in line.split() if word.startswith("ino:")}


def test_a_log_written_past_its_cap_is_rotated_at_the_next_turn_and_one_not_written_is_not_looked_at(
        tmp_path, clock, looked):
    busy, idle = logs(tmp_path, "1.log", "2.log")
    watch = LogWatch(LogLimits(CAP, 2), clock=clock)
    watch.follow([str(busy), str(idle)])
    watch.turn(wait=False)
    assert sorted(looked) == ["1.log", "2.log"]          # once each, as they are handed over
    assert watched(watch) == {busy.stat().st_ino, idle.stat().st_ino}
    looked.clear()
    write(busy, 3 * CAP)
    clock.now += 1
    watch.turn(wait=False)
    assert rotations_of(busy).count == 1 and busy.stat().st_size == 0
    assert "2.log" not in looked
    assert watched(watch) == {idle.stat().st_ino}        # being written: looked at on time, its writes unwatched
    for _ in range(5):                                     # nothing written: nothing looked at
        clock.now += 60
        watch.turn(wait=False)
    # 1.log: as it was written (and rotated), then once more, to find it quiet and watch it again
    assert "2.log" not in looked and looked == ["1.log", "1.log"]
    assert watched(watch) == {busy.stat().st_ino, idle.stat().st_ino}
    watch.stop()


def test_writes_during_the_pause_are_looked_at_when_it_ends(tmp_path, clock):
    [log] = logs(tmp_path, "1.log")
    watch = LogWatch(LogLimits(CAP, 2), clock=clock)
    watch.follow([str(log)])
    watch.turn(wait=False)
    write(log, 3 * CAP)
    watch.turn(wait=False)
    assert rotations_of(log).count == 1
    write(log, 3 * CAP)                                    # within the pause that rotation began
    watch.turn(wait=False)
    assert rotations_of(log).count == 1
    clock.now += pause(CAP, 0.0)
    watch.turn(wait=False)
    assert rotations_of(log).count == 2
    watch.stop()


def test_the_log_of_an_attempt_that_ended_gets_a_last_look(tmp_path, clock):
    [log] = logs(tmp_path, "1.log")
    watch = LogWatch(LogLimits(CAP, 2), clock=clock)
    watch.follow([str(log)])
    watch.turn(wait=False)
    write(log, 3 * CAP)                                    # its last burst, just before it ended
    watch.follow([])
    watch.turn(wait=False)
    assert rotations_of(log).count == 1
    write(log, 3 * CAP)                                    # no longer followed: left alone
    clock.now += 60
    watch.turn(wait=False)
    assert rotations_of(log).count == 1
    watch.stop()


def test_without_inotify_logs_are_looked_at_every_poll_and_that_is_said(tmp_path, clock, caplog):
    def unavailable():
        raise OSError(errno.EMFILE, "Too many open files")

    [log] = logs(tmp_path, "1.log")
    with caplog.at_level(logging.WARNING, logger="gqa.daemon"):
        watch = LogWatch(LogLimits(CAP, 2), clock=clock, inotify=unavailable)
    assert f"looked at every {POLL_EVERY:g} s" in caplog.text
    watch.follow([str(log)])
    watch.turn(wait=False)
    write(log, 3 * CAP)
    clock.now += POLL_EVERY / 2
    watch.turn(wait=False)
    assert rotations_of(log).count == 0
    clock.now += POLL_EVERY / 2
    watch.turn(wait=False)
    assert rotations_of(log).count == 1
    watch.stop()


def test_a_rotation_that_fails_is_said_once_and_tried_again_after_retry(tmp_path, clock, monkeypatch, caplog):
    [log] = logs(tmp_path, "1.log")
    tries = []
    real = log_watch.rotate_if_needed

    def full_disk_twice(path, limits):
        tries.append(clock.now)
        if len(tries) <= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, limits)

    monkeypatch.setattr(log_watch, "rotate_if_needed", full_disk_twice)
    watch = LogWatch(LogLimits(CAP, 2), clock=clock)
    watch.follow([str(log)])
    watch.turn(wait=False)
    write(log, 3 * CAP)
    with caplog.at_level(logging.INFO, logger="gqa.daemon"):
        for _ in range(3):
            watch.turn(wait=False)
            clock.now += RETRY / 2
        for _ in range(4):
            watch.turn(wait=False)
            clock.now += RETRY / 2
    assert tries == [1000.0, 1000.0 + RETRY, 1000.0 + 2 * RETRY]
    assert caplog.text.count("cannot rotate") == 1 and caplog.text.count("works again") == 1
    assert rotations_of(log).count == 1
    watch.stop()


def test_the_thread_caps_a_log_as_it_is_written_and_stops(tmp_path):
    [log] = logs(tmp_path, "1.log")
    watch = LogWatch(LogLimits(CAP, 2))
    watch.start()
    watch.follow([str(log)])
    write(log, 3 * CAP)
    deadline = time.monotonic() + 5
    while rotations_of(log).count == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    watch.stop()
    assert rotations_of(log).count == 1 and log.stat().st_size == 0
    assert watch._thread is not None and not watch._thread.is_alive()
