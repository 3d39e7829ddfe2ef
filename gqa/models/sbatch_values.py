"""The values of sbatch options as Slurm writes them, read into what a spec
holds: GPU requests ([type:]N, gres lists with MIG profiles), memory in
Slurm's units, node counts, mail types, --export lists and --begin times.
Pure: --begin is read against a `now` the caller passes."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

from .errors import SpecError
from .mail_types import mail_types as notice_mail_types
from .units import parse_duration

_COUNT_RE = re.compile(r"^[0-9]{1,6}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MEMORY_RE = re.compile(r"^([0-9]{1,15})(?:([KMGT])B?)?$", re.IGNORECASE)
_MIB_PER_UNIT = {"M": 1, "G": 1024, "T": 1024 * 1024}
MiB = 1024 * 1024


def count(value: str, option: str) -> int:
    """A whole number as Slurm's counts are written."""
    text = value.strip()
    if not _COUNT_RE.match(text):
        raise SpecError(f"{option} needs a whole number, got {value!r}")
    return int(text)


def open_mode(value: str) -> str:
    """--open-mode: sbatch reads only the first letter (a or t, either case)."""
    first = value.strip()[:1].lower()
    if first not in ("a", "t"):
        raise SpecError(f"--open-mode {value!r}: use append or truncate")
    return "append" if first == "a" else "truncate"


def typed_count(value: str, option: str) -> tuple[str | None, int]:
    """`N` or `TYPE:N` (--gpus, --gpus-per-node, --gpus-per-task): the type and the count."""
    gpu_type, _, number = value.strip().rpartition(":")
    return (gpu_type or None), count(number, option)


def gres(value: str) -> tuple[str | None, int]:
    """--gres: `gpu`, `gpu:N`, `gpu:TYPE:N` (a MIG profile is a type: gpu:1g.10gb:1),
    several joined with ','. Several gpu entries add up when they name one type."""
    types: set[str | None] = set()
    total = 0
    for entry in value.split(","):
        parts = entry.strip().split(":")
        name = parts[0].split("/")[-1]                # gres/gpu:2 is the TRES spelling
        if name != "gpu":
            raise SpecError(f"--gres {entry.strip()!r}: gqa gives whole GPUs and nothing else; "
                            "use gpu:N or gpu:TYPE:N")
        if len(parts) == 1:
            types.add(None)
            total += 1
        elif len(parts) == 2:
            if _COUNT_RE.match(parts[1]):
                types.add(None)
                total += int(parts[1])
            else:                                     # gpu:TYPE, one of them
                types.add(parts[1])
                total += 1
        elif len(parts) == 3:
            types.add(parts[1])
            total += count(parts[2], "--gres")
        else:
            raise SpecError(f"--gres {entry.strip()!r}: use gpu:N or gpu:TYPE:N")
    if len(types) > 1:
        named = ", ".join(sorted(t or "any" for t in types))
        raise SpecError(f"--gres {value!r} asks for GPUs of {len(types)} types at once ({named}); "
                        "a gqa job has one type")
    return types.pop(), total


def memory_bytes(value: str, option: str) -> int | None:
    """Slurm's memory (its str_to_mbytes): a whole number, then K, M, G or T in
    either case, binary, which may end in B ("2GB" is 2048 MiB); a bare number
    is MiB and K rounds up to a whole MiB. A size of 0 is None: Slurm's "all
    of the node's memory", which is no limit here."""
    match = _MEMORY_RE.match(value.strip())
    if not match:
        raise SpecError(f"{option} {value!r}: not a size; Slurm writes 16G, 2GB, 512M or a bare number of MiB")
    number, unit = int(match.group(1)), (match.group(2) or "M").upper()
    mib = -(-number // 1024) if unit == "K" else number * _MIB_PER_UNIT[unit]
    return mib * MiB if mib else None


def nodes(value: str) -> None:
    """--nodes N or MIN[-MAX]: one machine is all gqa gives."""
    low, _, high = value.strip().partition("-")
    least = count(low, "--nodes")
    if high:
        count(high, "--nodes")
    if least > 1:
        raise SpecError(f"gqa runs a job on one machine; --nodes {value.strip()} would need {least}")




# Slurm's --time forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_SLURM_TIME_RE = re.compile(r"^(?:[0-9]{1,9}-)?[0-9]{1,9}(?::[0-9]{1,9}){0,2}$")


def time_limit(value: str) -> int:
    """--time and --time-min in seconds. Slurm keeps a limit in whole minutes and
    rounds its own forms up to one (0:10, MM:SS, is a minute, as sbatch makes it);
    gqa's unit forms (30s, 90m) keep their seconds."""
    seconds = parse_duration(value)
    return -(-seconds // 60) * 60 if slurm_time(value) else seconds


def slurm_time(value: str) -> bool:
    """Whether a time is written in one of Slurm's --time forms (MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]])."""
    return bool(_SLURM_TIME_RE.match(value.strip()))


def zero_time(value: str) -> bool:
    """Whether a --time value is zero in one of Slurm's forms (0, 00:00:00, 0-0), which
    Slurm reads as no limit; what is not a Slurm form is left to the parser to refuse."""
    return bool(_SLURM_TIME_RE.match(value)) and not value.strip("0-:")


def mail_types(value: str) -> tuple[list[str], list[str]]:
    """--mail-type: the events gqa sends, and those it has none of (Slurm's, noted);
    the table is models/mail_types.py's."""
    return notice_mail_types(value)


def export(value: str) -> tuple[str, dict[str, str]]:
    """--export ALL | NONE | [ALL,]VAR[=value],...: the spec's `export` (ALL, NONE,
    or the names passed on, after ALL when all are) and the values given."""
    words = [w.strip() for w in value.split(",")]
    if not value.strip() or "" in words:
        raise SpecError(f"--export {value!r}: use ALL, NONE or [ALL,]VAR[=value],...")
    upper = [w.upper() for w in words]
    if upper == ["ALL"] or upper == ["NONE"]:
        return upper[0], {}
    if "NONE" in upper:
        raise SpecError(f"--export {value!r}: NONE takes no variables (Slurm refuses them too)")
    names: list[str] = []
    values: dict[str, str] = {}
    everything = False
    for word in words:
        if word.upper() == "ALL":
            everything = True
            continue
        name, eq, text = word.partition("=")
        if not ENV_NAME.match(name):
            raise SpecError(f"--export: {name!r} is not an environment variable name")
        names.append(name)
        if eq:
            values[name] = text
    return ",".join((["ALL"] if everything else []) + list(dict.fromkeys(names))), values


# -- --begin ------------------------------------------------------------------------------------

_UNITS = {"": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
          "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hour": 3600, "hours": 3600,
          "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_NAMED_HOURS = {"midnight": 0, "elevenses": 11, "noon": 12, "fika": 15, "teatime": 16}
_NOW_RE = re.compile(r"^now(?:\+([0-9]{1,9})([a-z]*))?$")
_CLOCK_RE = re.compile(r"^([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?\s*(am|pm)?$")
_DATE_RE = re.compile(r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:t([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?)?$")
_SLASH_RE = re.compile(r"^([0-9]{1,2})[/.]([0-9]{1,2})(?:[/.]([0-9]{2}))?$")


def begin_time(value: str, now: float) -> float:
    """Slurm's --begin as epoch seconds, read in local time against `now`:
    now[+N[units]], HH:MM[:SS] [AM|PM] (the next such time), midnight, noon,
    elevenses, fika, teatime, today, tomorrow, YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY]."""
    here = datetime.fromtimestamp(now)
    try:
        return _begin(value.strip().lower(), here, now)
    except ValueError:   # a day or hour out of range (2026-02-30, 25:00)
        raise SpecError(f"--begin {value!r} is not a date or time") from None
    except SpecError as exc:
        raise SpecError(f"--begin {value!r}: {exc}") from None


def _begin(text: str, here: datetime, now: float) -> float:
    if match := _NOW_RE.match(text):
        unit = match.group(2) or ""
        if unit not in _UNITS:
            raise SpecError("the unit is one of seconds, minutes, hours, days, weeks")
        return now + int(match.group(1) or 0) * _UNITS[unit]
    if text == "today":
        return datetime.combine(here.date(), datetime.min.time()).timestamp()
    if text == "tomorrow":
        return datetime.combine(here.date() + timedelta(days=1), datetime.min.time()).timestamp()
    if text in _NAMED_HOURS:
        return _next(here, _NAMED_HOURS[text], 0, 0)
    if match := _CLOCK_RE.match(text):
        hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
        if match.group(4):
            if not 1 <= hour <= 12:
                raise ValueError(hour)
            hour = hour % 12 + (12 if match.group(4) == "pm" else 0)
        return _next(here, hour, minute, second)
    if match := _DATE_RE.match(text):
        y, mo, d = (int(match.group(i)) for i in (1, 2, 3))
        h, mi, s = (int(match.group(i) or 0) for i in (4, 5, 6))
        return datetime(y, mo, d, h, mi, s).timestamp()
    if match := _SLASH_RE.match(text):
        mo, d = int(match.group(1)), int(match.group(2))
        year = 2000 + int(match.group(3)) if match.group(3) else here.year
        day = date(year, mo, d)
        if match.group(3) is None and day < here.date():
            day = date(year + 1, mo, d)      # a date without a year that has passed: next year's
        return datetime.combine(day, datetime.min.time()).timestamp()
    raise SpecError("use now+1hour, 16:00, tomorrow, 2026-12-24T08:00 or MM/DD[/YY]")


def _next(here: datetime, hour: int, minute: int, second: int) -> float:
    """The next time the clock reads hour:minute:second: today's if still ahead, else tomorrow's."""
    at = here.replace(hour=hour, minute=minute, second=second, microsecond=0)
    if at <= here:
        at += timedelta(days=1)
    return at.timestamp()


def gpu_fields(gpu_type: str | None, gpus: int) -> dict[str, Any]:
    return {"gpus": gpus, **({"gpu_type": gpu_type} if gpu_type else {})}


def exported_environment(export: str | None, environment: dict[str, str] | None) -> dict[str, str] | None:
    """The submitter's environment a job starts from, as --export says: all of
    it (unset, ALL, ALL,...), none (NONE: None, the queue's own environment,
    as sbatch then loads a login's), or the names listed and Slurm's SLURM_*
    variables. The values --export gives are in the spec's env."""
    if environment is None or export is None or export.split(",")[0] == "ALL":
        return environment
    if export == "NONE":
        return None
    names = set(export.split(","))
    return {k: v for k, v in environment.items() if k in names or k.startswith("SLURM_")}
