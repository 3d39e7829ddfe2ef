"""Cluster traces: what happened, as published. Four formats:

- generic CSV: `submit_time,duration,gpus` plus optional `id,team,priority,wall_time,user,name,gpu_type`;
- Slurm's accounting, as `sacct --parsable2` prints it (sacct.py): a site's own history;
- Microsoft ITP 2021 (ElasticFlow raw traces): `raw-traces.tar.gz` or its extracted
  folder, `clusterNN.csv` with `job_id,submission_time,duration,num_gpu`;
- Alibaba GPU v2023 ("openb"): `openb_pod_list_default.csv`.

Loaders keep only what the trace says; `workload.derive` fills in the rest."""

import csv
import io
import math
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..models.priority import Priority

PRIORITIES = tuple(p.value for p in Priority)
_PRIORITY_ALIASES = {str(p.rank): p.value for p in Priority}   # a trace may give the rank
_ITP_MEMBER = re.compile(r"(?:^|/)(cluster\d+)\.csv$")
# Bounds on a trace's times, in seconds. The longest run in the public traces read here is 145 days
# (an Alibaba pod); a run, or a wall time, of over 10 years is a unit mistake. Submit times may be
# epoch seconds (1.7e9 today); 1e11 is over 3,000 years from 1970, so epoch milliseconds (1.7e12).
MAX_RUN_SECONDS = 10 * 365 * 86400
MAX_SUBMIT_SECONDS = 1e11


class TraceError(ValueError):
    """A trace that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
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


@dataclass
class Trace:
    name: str
    format: str                  # csv | sacct | itp | alibaba
    jobs: list[TraceJob]
    notes: list[str] = field(default_factory=list)  # what the loader kept and dropped, for the report


def load_trace(path: str | Path) -> Trace:
    """Detects the format. `PATH:cluster04,cluster07` picks ITP clusters
    (all ten, merged, by default)."""
    path, select = _split_selection(str(path))
    if not path.exists():
        raise TraceError(f"{path}: no such file or directory")
    if path.is_dir():
        if any(path.glob("openb_pod_list*.csv")):
            return load_alibaba(sorted(path.glob("openb_pod_list*.csv"))[0])
        if any(path.glob("cluster[0-9]*.csv")):
            return load_itp(path, select)
        raise TraceError(f"{path}: no clusterNN.csv (ITP) or openb_pod_list*.csv (Alibaba) in this folder")
    if path.name.endswith((".tar.gz", ".tgz")):
        return load_itp(path, select)
    if path.name.startswith("openb_pod_list") and path.suffix == ".csv":
        return load_alibaba(path)
    from .sacct import is_sacct, load_sacct   # here: sacct.py builds on this module's readers
    if is_sacct(_first_line(path)):
        return load_sacct(path)
    return load_csv(path)


def _first_line(path: Path) -> str:
    """The file's first line, as far as a header goes (a byte-order mark skipped, bytes that are not
    UTF-8 left for the loader to name)."""
    with path.open("rb") as f:
        return f.readline(65536).decode("utf-8-sig", errors="replace")


def _split_selection(text: str) -> tuple[Path, list[str] | None]:
    if not Path(text).exists() and ":" in text:
        base, _, names = text.rpartition(":")
        if names and all(re.fullmatch(r"cluster\d+", n) for n in names.split(",")):
            return Path(base), names.split(",")
    return Path(text), None


# -- generic CSV --------------------------------------------------------------------

def load_csv(path: str | Path) -> Trace:
    path = Path(path)
    reader = csv.DictReader(io.StringIO(_text(path.read_bytes(), str(path))))
    header = _header(reader, str(path))
    missing = [c for c in ("submit_time", "duration", "gpus") if c not in header]
    if missing and {"jobid", "jobidraw"} & {h.lower() for h in header}:
        raise TraceError(f"{path}: line 1: this reads as Slurm's accounting with ',' between its columns; "
                         "dump it with -P (--parsable2), '|' between them")
    if missing:
        raise TraceError(f"{path}: line 1: the header needs submit_time,duration,gpus "
                         f"(missing {','.join(missing)}); optional: id,team,priority,wall_time,user,name,gpu_type")
    reader.fieldnames = header
    jobs = []
    for row in _rows(reader, str(path)):
        line = reader.line_num
        try:
            jobs.append(_csv_job(row, line))
        except ValueError as exc:
            raise TraceError(f"{path}: line {line}: {exc}") from None
    jobs.sort(key=lambda j: j.submit_time)  # stable: equal times keep file order
    return Trace(name=path.name, format="csv", jobs=jobs)


def _text(data: bytes, where: str) -> str:
    """A trace file's text: UTF-8, a byte-order mark (as spreadsheets write) skipped."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:   # its offset is into what follows a byte-order mark
        read, at = exc.object, exc.start
        line = read.count(b"\n", 0, at) + 1
        raise TraceError(f"{where}: line {line}: byte 0x{read[at]:02x} is not UTF-8 (a trace is UTF-8 text)") from None


def _header(reader: csv.DictReader, where: str) -> list[str]:
    try:
        return [h.strip() for h in (reader.fieldnames or [])]
    except csv.Error as exc:
        raise TraceError(f"{where}: line 1: {exc}") from None


def _rows(reader: csv.DictReader, where: str) -> Iterator[dict]:
    """The rows; one the csv module refuses (a field over its size limit) named by its line (the
    reader counts the lines it has read whole)."""
    try:
        yield from reader
    except csv.Error as exc:
        raise TraceError(f"{where}: line {reader.line_num + 1}: {exc}") from None


def _csv_job(row: dict, line: int) -> TraceJob:
    def text(name: str) -> str | None:
        value = (row.get(name) or "").strip()
        return value or None

    if None in row:
        raise ValueError("more fields than the header has")
    gpus = _number(text("gpus"), "gpus")
    if gpus != int(gpus) or gpus < 1:
        raise ValueError(f"gpus must be a whole number >= 1, got {text('gpus')!r}")
    duration = _run_seconds(_seconds(text("duration"), "duration"), "duration")
    if duration <= 0:
        raise ValueError(f"duration must be positive, got {text('duration')!r}")
    wall = _run_seconds(_seconds(text("wall_time"), "wall_time"), "wall_time") if text("wall_time") else None
    if wall is not None and wall <= 0:
        raise ValueError(f"wall_time must be positive, got {text('wall_time')!r}")
    priority = text("priority")
    if priority is not None:
        priority = _PRIORITY_ALIASES.get(priority, priority.lower())
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be high, normal or low (or 0, 1, 2), got {text('priority')!r}")
    return TraceJob(id=text("id") or f"job{line - 1}", submit_time=_timestamp(text("submit_time")),
                    duration=duration, gpus=int(gpus), team=text("team"), priority=priority,
                    wall_time=wall, user=text("user"), name=text("name"), gpu_type=text("gpu_type"))


def _number(value: str | None, what: str) -> float:
    """A finite number: float() also reads nan, inf and 1e400 (inf), which no time or count is."""
    if value is None:
        raise ValueError(f"{what} is empty")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{what} is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return number


def _run_seconds(seconds: float, what: str) -> float:
    """A run's length or a wall time, within MAX_RUN_SECONDS."""
    if seconds > MAX_RUN_SECONDS:
        raise ValueError(f"{what} of {seconds:g} s is over 10 years: a trace gives its times in seconds")
    return seconds


def _submit_seconds(seconds: float, what: str = "submit_time") -> float:
    """A submit time, within MAX_SUBMIT_SECONDS of the epoch either way."""
    if abs(seconds) > MAX_SUBMIT_SECONDS:
        raise ValueError(f"{what} {seconds:g} is over {MAX_SUBMIT_SECONDS:g} s (3,000 years) from 1970: "
                         "a trace gives its times in seconds, not milliseconds")
    return seconds


def _seconds(value: str | None, what: str) -> float:
    """Seconds, or a duration with units (90m, 4h, 1-12:00:00)."""
    try:
        return _number(value, what)
    except ValueError:
        if value is None or _looks_numeric(value):
            raise
    from ..models.errors import SpecError
    from ..models.units import parse_duration
    try:
        return float(parse_duration(value, bare_unit="s"))
    except SpecError:
        raise ValueError(f"{what} is not seconds or a duration like 90m or 4h: {value!r}") from None


def _timestamp(value: str | None) -> float:
    """Seconds, or an ISO-8601 time (a time without a zone is taken as UTC)."""
    try:
        return _submit_seconds(_number(value, "submit_time"))
    except ValueError:
        if value is None or _looks_numeric(value):
            raise
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"submit_time is not seconds or an ISO-8601 time: {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return _submit_seconds(moment.timestamp())


def _looks_numeric(value: str) -> bool:
    """Whether float() reads it (nan and inf too): its refusal is the one to give, not an ISO-8601 one."""
    try:
        float(value)
    except ValueError:
        return False
    return True


# -- Microsoft ITP 2021 -------------------------------------------------------------

def load_itp(path: str | Path, select: list[str] | None = None) -> Trace:
    """All clusters merged into one queue by default: the submit times share an
    origin (the start of the collection), so the merge is one busy cluster."""
    path = Path(path)
    members: dict[str, bytes] = {}
    if path.is_dir():
        for f in sorted(path.glob("cluster[0-9]*.csv")):
            members[f.stem] = f.read_bytes()
    else:
        try:
            with tarfile.open(path, "r:*") as tar:
                for info in tar.getmembers():
                    match = _ITP_MEMBER.search(info.name)
                    member = tar.extractfile(info) if match and info.isfile() else None
                    if match and member is not None:
                        members[match.group(1)] = member.read()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise TraceError(f"{path}: not a readable tar.gz ({exc})") from None
    if not members:
        raise TraceError(f"{path}: no clusterNN.csv files in it")
    if select:
        unknown = [s for s in select if s not in members]
        if unknown:
            raise TraceError(f"{path}: no {', '.join(unknown)}; it has {', '.join(sorted(members))}")
        members = {name: members[name] for name in select}
    rows = []
    for cluster in sorted(members):
        where = f"{path}: {cluster}.csv"
        reader = csv.DictReader(io.StringIO(_text(members[cluster], where)))
        for row in _rows(reader, where):
            try:
                job = _itp_job(row)
            except (KeyError, TypeError, ValueError) as exc:
                raise _row_error(f"{where}: line {reader.line_num}", exc, ITP_COLUMNS) from None
            rows.append((job.submit_time, cluster, reader.line_num, job))
    rows.sort(key=lambda r: r[:3])
    jobs = [r[3] for r in rows if r[3].duration > 0 and r[3].gpus > 0]
    name = path.name + (":" + ",".join(select) if select else "")
    notes = [f"ITP 2021: {len(members)} cluster(s) merged into one queue ({', '.join(sorted(members))})"]
    if len(jobs) < len(rows):
        notes.append(f"dropped {len(rows) - len(jobs)} jobs with no duration or no GPUs")
    return Trace(name=name, format="itp", jobs=jobs, notes=notes)


ITP_COLUMNS = "job_id,submission_time,duration,num_gpu"


def _row_error(where: str, exc: Exception, columns: str) -> TraceError:
    """A published trace's row that cannot be read: a column missing (KeyError), a row with fewer
    fields than the header (a None value: TypeError), or a value out of bounds (ValueError)."""
    if isinstance(exc, KeyError):
        return TraceError(f"{where}: no {exc.args[0]} column (expected {columns})")
    if isinstance(exc, TypeError):
        return TraceError(f"{where}: fewer fields than the header has (expected {columns})")
    return TraceError(f"{where}: {exc} (expected {columns})")


def _itp_job(row: dict) -> TraceJob:
    """One row of a clusterNN.csv; a row with no duration or no GPUs is read (and dropped later)."""
    gpus = _number(row["num_gpu"], "num_gpu")
    if gpus != int(gpus):
        raise ValueError(f"num_gpu must be a whole number, got {row['num_gpu']!r}")
    return TraceJob(id=row["job_id"], submit_time=_moment(row, "submission_time"),
                    duration=_run_seconds(_number(row["duration"], "duration"), "duration"), gpus=int(gpus))


def _moment(row: dict, column: str) -> float:
    """A published trace's time of an event, in seconds."""
    return _submit_seconds(_number(row[column], column), column)


# -- Alibaba GPU v2023 ----------------------------------------------------------------

# qos as a priority tier: latency-sensitive (LS) and Guaranteed pods are what the
# cluster protects, best-effort (BE) is what it fills in with
ALIBABA_TIERS = {"LS": Priority.HIGH.value, "Guaranteed": Priority.HIGH.value, "Burstable": Priority.NORMAL.value,
                 "BE": Priority.LOW.value}


ALIBABA_COLUMNS = "the openb pod list's name,num_gpu,qos,pod_phase,creation_time,deletion_time,..."


def load_alibaba(path: str | Path) -> Trace:
    """Training-like pods only: at least one GPU (a GPU fraction counts as one),
    and either finished (Succeeded) or best-effort/burstable; many LS pods are
    long-running inference. Pods never scheduled (no scheduled_time) never ran
    and are dropped. duration = deletion_time - creation_time, as the trace's
    README defines run time."""
    path = Path(path)
    jobs, total, unscheduled = [], 0, 0
    reader = csv.DictReader(io.StringIO(_text(path.read_bytes(), str(path))))
    for row in _rows(reader, str(path)):
        total += 1
        try:
            gpus, qos, phase = _number(row["num_gpu"], "num_gpu"), row["qos"], row["pod_phase"]
            if gpus != int(gpus):
                raise ValueError(f"num_gpu must be a whole number, got {row['num_gpu']!r}")
            if gpus < 1 or not (phase == "Succeeded" or qos in ("BE", "Burstable")):
                continue
            if not (row.get("scheduled_time") or "").strip():
                unscheduled += 1
                continue
            created = _moment(row, "creation_time")
            duration = _run_seconds(_number(row["deletion_time"], "deletion_time") - created, "a pod's life")
        except (KeyError, TypeError, ValueError) as exc:
            raise _row_error(f"{path}: line {reader.line_num}", exc, ALIBABA_COLUMNS) from None
        if duration > 0:
            jobs.append(TraceJob(id=row["name"], submit_time=created, duration=duration, gpus=int(gpus),
                                 priority=ALIBABA_TIERS.get(qos, Priority.NORMAL.value), name=row["name"]))
    jobs.sort(key=lambda j: j.submit_time)
    notes = [f"Alibaba v2023: kept {len(jobs)} of {total} pods (GPU pods that succeeded or are BE/Burstable; "
             f"{unscheduled} never scheduled dropped); GPU fractions count as 1 GPU",
             "priority from qos: LS/Guaranteed -> high, Burstable -> normal, BE -> low"]
    return Trace(name=path.name, format="alibaba", jobs=jobs, notes=notes)
