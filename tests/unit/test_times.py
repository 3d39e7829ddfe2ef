"""The one grammar of --since and --until (`gqa history`, `gqa report`): each
form read against a fixed now, what is refused and how the message reads, and
a window that holds no time, with both ends as UTC dates."""

import time

import pytest

from gqa.models.errors import SpecError
from gqa.models.times import check_window, time_of, utc

NOW = 1_796_000_000.0    # 2026-11-30 00:53:20 UTC
H, D = 3600.0, 86400.0


@pytest.fixture(autouse=True)
def utc_here(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")    # a date without an offset is local time
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("text, expected", [
    ("now", NOW), (" NOW ", NOW),
    ("90s", NOW - 90), ("90m", NOW - 90 * 60), ("24h", NOW - 24 * H), ("7d", NOW - 7 * D), ("2w", NOW - 14 * D),
    ("1d12h", NOW - 36 * H), ("1.5h", NOW - 1.5 * H), ("2 hours", NOW - 2 * H), ("3days", NOW - 3 * D),
    ("0s", NOW),
    ("2026-11-01", 1_793_491_200.0),                          # midnight, here
    ("2026-11-01T08:30", 1_793_521_800.0), ("2026-11-01 08:30", 1_793_521_800.0),
    ("2026-11-01 08:30:05", 1_793_521_805.0),
    ("2026-11-01T08:30Z", 1_793_521_800.0), ("2026-11-01t08:30z", 1_793_521_800.0),
    ("2026-11-01T08:30+02:00", 1_793_521_800.0 - 2 * H), ("2026-11-01T08:30-0500", 1_793_521_800.0 + 5 * H),
    ("00:30", NOW - 23 * 60 - 20), ("00:53:20", NOW), ("23:00", NOW + 22 * H + 6 * 60 + 40),   # today, here
    ("1970-01-01", 0.0), ("2027-11-30", NOW + 365 * D - 53 * 60 - 20),
])
def test_each_form_is_read_against_now(text, expected):
    assert time_of(text, NOW, what="--since") == pytest.approx(expected)


def test_a_date_without_an_offset_is_local_time(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Kolkata")    # UTC+05:30, no daylight saving
    time.tzset()
    assert time_of("2026-11-01T08:30", NOW, what="--since") == 1_793_521_800.0 - 5.5 * H
    assert time_of("2026-11-01T08:30Z", NOW, what="--since") == 1_793_521_800.0


@pytest.mark.parametrize("text, message", [
    # a number alone could be seconds (sacct) or hours: refused, with what to write
    ("24", "--since '24' needs a unit: 24h, 24m or 24s back from now (or a date, 2026-11-30)"),
    ("20261207", "--since '20261207': write the date as 2026-12-07"),
    ("yesterday", "--since 'yesterday': use a time back from now (90m, 12h, 7d), a date (2026-11-30, "
                  "2026-11-30T14:00) or a time today (14:00)"),
    ("1-12:00:00", "--since '1-12:00:00': use a time back from now"),
    ("-2h", "--since '-2h': use a time back from now"),
    ("3x", "--since '3x': use a time back from now"),
    ("", "--since '': use a time back from now"),
    ("2026-13-01", "--since '2026-13-01' is not a date: use 2026-11-30, 2026-11-30T14:00 or 2026-11-30T14:00+02:00"),
    ("0000-01-01", "--since '0000-01-01' is not a date"),
    ("25:00", "--since '25:00' is not a time of day: use 14:00 or 14:00:05 (today, local)"),
    # before any job, or more than a year ahead
    ("800000d", "--since '800000d' is before 1970-01-01 00:00:00 UTC, earlier than any job: give a later date or "
                "a shorter time back"),
    ("9" * 60 + "w", "is before 1970-01-01 00:00:00 UTC"),
    ("1969-12-31T23:59", "is before 1970-01-01 00:00:00 UTC"),
    ("0001-01-01", "is before 1970-01-01 00:00:00 UTC"),
    ("9999-12-31", "--since '9999-12-31' is after 2027-12-01 00:53:20 UTC, a year from now: give an earlier date"),
    ("2027-12-02", "is after 2027-12-01 00:53:20 UTC"),
])
def test_anything_else_is_refused_in_one_line_saying_what_to_write(text, message):
    with pytest.raises(SpecError) as refused:
        time_of(text, NOW, what="--since")
    assert message in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("since, until, now, what, message", [
    (NOW - 2 * H, NOW - D, None, "window", "the window ends (2026-11-29 00:53:20 UTC) at or before it begins "
                                           "(2026-11-29 22:53:20 UTC): --until must be later than --since"),
    (NOW, NOW, None, "period", "the period ends (2026-11-30 00:53:20 UTC) at or before it begins "
                               "(2026-11-30 00:53:20 UTC): --until must be later than --since"),
    (NOW + H, None, NOW, "window", "the window ends now (2026-11-30 00:53:20 UTC), at or before it begins "
                                   "(2026-11-30 01:53:20 UTC): --since must be earlier than now, or give a later "
                                   "--until"),
])
def test_a_window_that_holds_no_time_names_both_ends_in_utc(since, until, now, what, message):
    with pytest.raises(SpecError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        check_window(since, until, now, what=what)


@pytest.mark.parametrize("since, until, now", [(NOW - H, NOW, None), (NOW - H, None, NOW), (NOW + H, None, None),
                                               (NOW + H, NOW + 2 * H, NOW)])
def test_a_window_that_holds_time_passes(since, until, now):
    check_window(since, until, now)


@pytest.mark.parametrize("at, shown", [(0.0, "1970-01-01 00:00:00 UTC"), (NOW, "2026-11-30 00:53:20 UTC"),
                                       (1e20, "1e+20 s from 1970-01-01 UTC"), (-1e300, "-1e+300 s from 1970-01-01 UTC"),
                                       (float("nan"), "nan")])
def test_utc_dates_and_numbers_no_calendar_holds(at, shown):
    assert utc(at) == shown
