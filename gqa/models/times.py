"""Points in time as people write them for a window (`gqa history`, `gqa
report`: --since and --until), read one way everywhere, and the window's
checks with both ends as UTC dates.

The grammar, as `sacct -S` and `journalctl --since` read times:

- `now`;
- a time back from now: a number and its unit, `90s`, `30m`, `12h`, `7d`,
  `2w`, or several (`1d12h`). A number alone is refused: it could be
  seconds (sacct's default) as well as hours;
- a date, `2026-11-30` (local midnight), with a time, `2026-11-30T14:00`,
  `2026-11-30 14:00:05`, in local time unless an offset follows the time
  (`2026-11-30T14:00Z`, `2026-11-30T14:00+02:00`);
- a time of today, `14:00` or `14:00:05`, local.

A time must fall from 1970-01-01 00:00 UTC (no job ran before) to a year
after now. Pure: `now` is passed in, local time is the process's zone."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from .errors import SpecError

__all__ = ["AHEAD", "EARLIEST", "check_window", "time_of", "utc"]

EARLIEST = 0.0               # 1970-01-01 00:00 UTC
AHEAD = 366 * 86400.0        # the latest time taken is this far after now

USE = "use a time back from now (90m, 12h, 7d), a date (2026-11-30, 2026-11-30T14:00) or a time today (14:00)"

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_DIGITS = re.compile(r"^\d+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)([a-z]+)")
_UNITS = {**dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
          **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
          **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
          **dict.fromkeys(("d", "day", "days"), 86400), **dict.fromkeys(("w", "week", "weeks"), 604800)}
MAX_CHARS = 64               # a time back from now, as written


def time_of(text: str, now: float, *, what: str) -> float:
    """Epoch seconds of `text` (the module's grammar), read against `now`;
    SpecError naming `what` (the option) for anything else, or for a time
    before 1970 or more than a year after now."""
    raw = text.strip()
    if raw.lower() == "now":
        return now
    at = _date(raw.upper(), text, what)
    if at is None:
        at = _clock(raw, now, text, what)
    if at is None:
        at = _ago(raw, now, text, what)
    if at < EARLIEST:
        raise SpecError(f"{what} {text!r} is before {utc(EARLIEST)}, earlier than any job: give a later date "
                        "or a shorter time back")
    if at > now + AHEAD:
        raise SpecError(f"{what} {text!r} is after {utc(now + AHEAD)}, a year from now: give an earlier date")
    return at


def _date(raw: str, text: str, what: str) -> float | None:
    match = _DATE.match(raw)
    if match is None:
        return None
    iso = raw.replace(" ", "T")
    if iso.endswith("Z"):
        iso = iso[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(iso)      # without an offset: this machine's time zone
    except ValueError:
        raise SpecError(f"{what} {text!r} is not a date: use 2026-11-30, 2026-11-30T14:00 or "
                        "2026-11-30T14:00+02:00") from None
    try:
        return moment.timestamp()
    except (ValueError, OverflowError, OSError):   # a date the platform's clock cannot place: out of bounds
        return -math.inf if moment.year < 1970 else math.inf


def _clock(raw: str, now: float, text: str, what: str) -> float | None:
    match = _CLOCK.match(raw)
    if match is None:
        return None
    hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise SpecError(f"{what} {text!r} is not a time of day: use 14:00 or 14:00:05 (today, local)")
    return datetime.fromtimestamp(now).replace(hour=hour, minute=minute, second=second, microsecond=0).timestamp()


def _ago(raw: str, now: float, text: str, what: str) -> float:
    if _DIGITS.match(raw):
        day = _compact_date(raw)
        if day is not None:
            raise SpecError(f"{what} {text!r}: write the date as {day}")
        raise SpecError(f"{what} {text!r} needs a unit: {raw}h, {raw}m or {raw}s back from now (or a date, "
                        "2026-11-30)")
    spaced = raw.lower().replace(" ", "")
    parts = _PART.findall(spaced) if len(spaced) <= MAX_CHARS else []
    if not parts or "".join(n + u for n, u in parts) != spaced or any(u not in _UNITS for _, u in parts):
        raise SpecError(f"{what} {text!r}: {USE}")
    return now - sum(float(n) * _UNITS[u] for n, u in parts)


def _compact_date(digits: str) -> str | None:
    """`2026-12-07` for `20261207`, where those eight digits are a date."""
    if len(digits) != 8:
        return None
    try:
        return datetime.strptime(digits, "%Y%m%d").strftime("%Y-%m-%d")
    except ValueError:
        return None


def utc(at: float) -> str:
    """`2026-12-06 10:17:09 UTC`; the epoch seconds where the calendar has no such date."""
    try:
        return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, OverflowError, OSError):
        return f"{at:.6g} s from 1970-01-01 UTC" if math.isfinite(at) else str(at)


def check_window(since: float, until: float | None, now: float | None = None, *, what: str = "window") -> None:
    """SpecError, with both ends as UTC dates, for a window [since, until) that
    holds no time; `until` None ends it at `now` (not checked where None)."""
    if until is not None:
        if until <= since:
            raise SpecError(f"the {what} ends ({utc(until)}) at or before it begins ({utc(since)}): "
                            "--until must be later than --since")
    elif now is not None and now <= since:
        raise SpecError(f"the {what} ends now ({utc(now)}), at or before it begins ({utc(since)}): "
                        "--since must be earlier than now, or give a later --until")
