"""Human units for durations and sizes: `90m`, `4h`, `1d`, `1-12:00:00`, `16Gi`, `512M`."""

import math
import re

from .errors import SpecError
from .limits import MAX_DURATION, MAX_NUMBER_CHARS

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|day|days|w)?\s*$", re.I)
# Slurm's --time forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_SLURM_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
    "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*$", re.I)


def parse_duration(value: object, *, bare_unit: str = "m", most: float | None = MAX_DURATION) -> int:
    """Seconds from `90m`, `4h`, `1d`, `2h30m`, Slurm's `1-12:00:00`, or a bare
    number (minutes, as in Slurm's --time, unless bare_unit says otherwise)."""
    if isinstance(value, bool):
        raise SpecError(f"invalid duration {shown(value)}")
    if isinstance(value, (int, float)):
        seconds = _finite(value, "duration") * _DURATION_UNITS[bare_unit]
        return _positive_duration(seconds, value, most)
    text = str(value).strip()
    if not text:
        raise SpecError("empty duration; use e.g. 90m, 4h or 1d")
    if len(text) > MAX_NUMBER_CHARS:
        raise SpecError(f"invalid duration: longer than {MAX_NUMBER_CHARS} characters")
    if text.isascii() and text.isdigit():
        return _positive_duration(int(text) * _DURATION_UNITS[bare_unit], value, most)
    if ":" in text or "-" in text:
        match = _SLURM_TIME_RE.match(text)
        if match:
            return _positive_duration(_slurm_seconds(text, match), value, most)
    total = 0.0
    rest = text.replace(" ", "")
    parts = re.findall(r"(\d+(?:\.\d+)?)([a-zA-Z]+)", rest)
    if parts and "".join(n + u for n, u in parts) == rest:
        for number, unit in parts:
            m = _DURATION_RE.match(number + unit)
            if not m:
                raise SpecError(f"invalid duration {shown(value)}: unknown unit {unit!r}; use s, m, h, d or w")
            total += float(number) * _DURATION_UNITS[unit[0].lower()]
        return _positive_duration(total, value, most)
    raise SpecError(f"invalid duration {shown(value)}; use e.g. 90m, 4h, 1d or 1-12:00:00")


def _slurm_seconds(text: str, match: re.Match) -> int:
    days, a, b, c = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = int(a), int(b or 0), int(c or 0)
        return int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    if c is not None:  # HH:MM:SS
        return int(a) * 3600 + int(b) * 60 + int(c)
    if b is not None:  # MM:SS
        return int(a) * 60 + int(b)
    return int(a) * 60


def _finite(value: int | float, what: str) -> float:
    """A number as a float, refused when it has none (inf, nan, 10**400)."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise SpecError(f"{what} {shown(value)} is not a finite number")
    return number


def shown(value: object, most: int = 40) -> str:
    """A value for a one-line message: its repr, cut to `most` characters."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else "(a huge number)"
    return text if len(text) <= most else text[:most - 3] + "..."



def _positive_duration(seconds: float, original: object, most: float | None = MAX_DURATION) -> int:
    if not math.isfinite(seconds):  # finite minutes times 60 can still overflow
        raise SpecError(f"duration {shown(original)} is too large")
    if seconds <= 0:
        raise SpecError(f"duration must be positive, got {shown(original)}")
    if most is not None and seconds > most:
        raise SpecError(f"duration {shown(original)} is too large; at most {int(most // 86_400)}d"
                      + (" (100 years)" if most == MAX_DURATION else ""))
    if round(seconds) < 1:
        raise SpecError(f"duration must be at least 1s, got {shown(original)}")
    return int(round(seconds))


def parse_size(value: object, *, bare_unit: str = "mi") -> int:
    """Bytes from `16Gi`, `16G`, `512M`, `1.5Ti`, or a bare number (MiB, as in Slurm's --mem)."""
    if isinstance(value, bool):
        raise SpecError(f"invalid size {shown(value)}")
    if isinstance(value, (int, float)):
        number, unit = _finite(value, "size"), bare_unit
    else:
        text = str(value).strip()
        match = _SIZE_RE.match(text) if len(text) <= MAX_NUMBER_CHARS else None
        if not match:
            raise SpecError(f"invalid size {shown(value)}; use e.g. 16Gi, 512Mi or 64G")
        number = float(match.group(1))
        unit = (match.group(2) or bare_unit).lower()
        if match.group(2) is None and text.lower().endswith("b"):
            unit = "b"
    scaled = number * _SIZE_UNITS[unit]
    if not math.isfinite(scaled):
        raise SpecError(f"size {shown(value)} is too large")
    size = int(scaled)
    if size <= 0:
        raise SpecError(f"size must be positive, got {shown(value)}")
    return size


def format_duration(seconds: float | None) -> str:
    """`1h02m`, `45s`, `3d04h`: short, for tables."""
    if seconds is None:
        return "-"
    s = int(max(0, round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def format_size(size: int | None) -> str:
    if size is None:
        return "-"
    for unit, factor in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if size >= factor:
            value = size / factor
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{size}B"


def to_cents(amount: float) -> float:
    """Money to the cent, halves up ($0.035 is $0.04: a float's round() gives $0.03 or $0.04 by
    how 0.035 is stored)."""
    import decimal

    return float(decimal.Decimal(repr(amount)).quantize(decimal.Decimal("0.01"), decimal.ROUND_HALF_UP))


def format_count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 job`, `2 jobs`, `12,000 jobs`: a count with its noun in the number it takes."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
