"""What a trace's jobs are, and the readers of the values every trace format shares: numbers that
must be finite, run and wall times within bounds, submit times as seconds or ISO-8601, text that must
be UTF-8. trace.py and sacct.py read their formats with them."""

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..models.priority import Priority

PRIORITIES = tuple(p.value for p in Priority)
PRIORITY_ALIASES = {str(p.rank): p.value for p in Priority}   # a trace may give the rank
# Bounds on a trace's times, in seconds. The longest run in the public traces read here is 145 days
# (an Alibaba pod); a run, or a wall time, of over 10 years is a unit mistake. Submit times may be
# epoch seconds (1.7e9 today); 1e11 is over 3,000 years from 1970, so epoch milliseconds (1.7e12).
MAX_RUN_SECONDS = 10 * 365 * 86400
MAX_SUBMIT_SECONDS = 1e11


class TraceError(ValueError):
    """A trace that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True)   # slots: a trace may hold millions
class TraceJob:
    id: str
    submit_time: float          # seconds (any origin)
    duration: float             # how long it really ran, seconds
    gpus: int
    team: str | None = None
    priority: str | None = None  # high | normal | low
    wall_time: float | None = None
    user: str | None = None
    name: str | None = None
    started: float | None = None  # where the trace records what happened (Slurm's accounting): its first
    ended: float | None = None    # start and its last end, on submit_time's clock
    gpu_type: str | None = None   # the GPU type it ran on (a100), where the trace says
    qos: str | None = None        # the class the trace's scheduler gave it (a Slurm QOS), lower case
    # each attempt's (start, end) where it ran more than once (a requeued job in a Slurm dump with -D):
    # started and ended span the waits between them too, when it held no GPU
    runs: tuple[tuple[float, float], ...] | None = None


@dataclass
class Trace:
    name: str
    format: str                  # csv | sacct | queue-history | itp | alibaba
    jobs: list[TraceJob]
    notes: list[str] = field(default_factory=list)  # what the loader kept and dropped, for the report


def text_of(data: bytes, where: str) -> str:
    """A trace file's text: UTF-8, a byte-order mark (as spreadsheets write) skipped."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:   # its offset is into what follows a byte-order mark
        read, at = exc.object, exc.start
        line = read.count(b"\n", 0, at) + 1
        raise TraceError(f"{where}: line {line}: byte 0x{read[at]:02x} is not UTF-8 (a trace is UTF-8 text)") from None


def number(value: str | None, what: str) -> float:
    """A finite number: float() also reads nan, inf and 1e400 (inf), which no time or count is."""
    if value is None:
        raise ValueError(f"{what} is empty")
    try:
        read = float(value)
    except ValueError:
        raise ValueError(f"{what} is not a number: {value!r}") from None
    if not math.isfinite(read):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return read


def run_seconds(seconds: float, what: str) -> float:
    """A run's length or a wall time, within MAX_RUN_SECONDS."""
    if seconds > MAX_RUN_SECONDS:
        raise ValueError(f"{what} of {seconds:g} s is over 10 years: a trace gives its times in seconds")
    return seconds


def submit_seconds(seconds: float, what: str = "submit_time") -> float:
    """A submit time, within MAX_SUBMIT_SECONDS of the epoch either way."""
    if abs(seconds) > MAX_SUBMIT_SECONDS:
        raise ValueError(f"{what} {seconds:g} is over {MAX_SUBMIT_SECONDS:g} s (3,000 years) from 1970: "
                         "a trace gives its times in seconds, not milliseconds")
    return seconds


def seconds_of(value: str | None, what: str) -> float:
    """Seconds, or a duration with units (90m, 4h, 1-12:00:00)."""
    try:
        return number(value, what)
    except ValueError:
        if value is None or _looks_numeric(value):
            raise
    from ..models.errors import SpecError
    from ..models.units import parse_duration
    try:
        return float(parse_duration(value, bare_unit="s"))
    except SpecError:
        raise ValueError(f"{what} is not seconds or a duration like 90m or 4h: {value!r}") from None


def timestamp(value: str | None) -> float:
    """Seconds, or an ISO-8601 time (a time without a zone is taken as UTC)."""
    try:
        return submit_seconds(number(value, "submit_time"))
    except ValueError:
        if value is None or _looks_numeric(value):
            raise
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"submit_time is not seconds or an ISO-8601 time: {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return submit_seconds(moment.timestamp())


def _looks_numeric(value: str) -> bool:
    """Whether float() reads it (nan and inf too): its refusal is the one to give, not an ISO-8601 one."""
    try:
        float(value)
    except ValueError:
        return False
    return True


def limits_note(jobs: list[TraceJob], without: str) -> str:
    """How many of a trace's jobs carry the limit their user asked; `without` names those that have
    none of their own (they get one from --estimates)."""
    limited = sum(1 for j in jobs if j.wall_time)
    rest = f" (the rest, {without}, get one from --estimates)" if limited < len(jobs) else ""
    return f"time limits as asked for {limited} of {len(jobs)} jobs{rest}"
