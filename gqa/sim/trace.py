"""Cluster traces: what happened, as published. Five formats:

- generic CSV: `submit_time,duration,gpus` plus optional `id,team,priority,wall_time,user,name,gpu_type`;
- Slurm's accounting, as `sacct --parsable2` prints it (sacct.py): a site's own history;
- gqa's own, as `gqa history -o csv` writes it (queue_history.py);
- Microsoft ITP 2021 (ElasticFlow raw traces): `raw-traces.tar.gz` or its extracted
  folder, `clusterNN.csv` with `job_id,submission_time,duration,num_gpu`;
- Alibaba GPU v2023 ("openb"): `openb_pod_list_default.csv`.

Loaders keep only what the trace says; `workload.derive` fills in the rest."""

import csv
import io
import os
import re
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..models.priority import Priority
from ..models.units import format_count
from .queue_history import is_queue_history, load_queue_history
from .sacct import is_sacct, load_sacct
from .trace_fields import (MAX_RUN_SECONDS, MAX_SUBMIT_SECONDS, PRIORITIES, PRIORITY_ALIASES, Trace, TraceError,
                           TraceJob, number, run_seconds, seconds_of, submit_seconds, text_of, timestamp)

__all__ = ["MAX_RUN_SECONDS", "MAX_SUBMIT_SECONDS", "PRIORITIES", "Trace", "TraceError", "TraceJob", "load_alibaba",
           "is_alibaba", "is_itp", "load_csv", "load_itp", "load_queue_history", "load_sacct", "load_trace",
           "read_input", "read_stream", "records_runs"]

_ITP_MEMBER = re.compile(r"(?:^|/)(cluster\d+)\.csv$")


def load_trace(path: str | Path) -> Trace:
    """Detects the format. `PATH:cluster04,cluster07` picks ITP clusters
    (all ten, merged, by default). A trace given as a pipe already open (/dev/stdin, /dev/fd/N:
    `<(zcat t.csv.gz)`) is read once, at most MAX_STREAM_BYTES, into a private copy the loaders read."""
    path, select = _split_selection(str(path))
    if _stream(path) is None:
        return _load_file(path, select)
    with tempfile.TemporaryDirectory(prefix="gqa-trace-") as folder:
        copy = Path(folder) / (path.name or "stdin")   # the trace is named as given: /dev/stdin is stdin
        with copy.open("xb") as f:
            for chunk in read_stream(path):
                f.write(chunk)
        try:
            trace = _load_file(copy, select)
        except TraceError as exc:   # named as the user gave it, not by the copy
            raise TraceError(str(exc).replace(str(copy), str(path))) from None
    trace.notes = [line.replace(str(copy), str(path)) for line in trace.notes]
    return trace


def _load_file(path: Path, select: list[str] | None) -> Trace:
    """A regular file's or a folder's trace, by its format (refused where it is neither)."""
    if path.is_dir():
        if any(path.glob("openb_pod_list*.csv")):
            _only_itp(path, select, "the Alibaba pod list")
            return load_alibaba(_regular(sorted(path.glob("openb_pod_list*.csv"))[0]))
        if any(path.glob("cluster[0-9]*.csv")):
            return load_itp(path, select)
        raise TraceError(f"{path}: no clusterNN.csv (ITP) or openb_pod_list*.csv (Alibaba) in this folder")
    _regular(path)
    if path.name.endswith((".tar.gz", ".tgz")):
        return load_itp(path, select)
    packed = _compression(path)
    if packed:   # read as text, it would be refused at its first byte as not UTF-8, which says not why
        name, tool = packed
        raise TraceError(f"{path}: compressed with {name}; {tool} it first (a trace is text)")
    first = _first_line(path)
    if path.name.startswith("openb_pod_list") and path.suffix == ".csv" or is_alibaba(first):
        _only_itp(path, select, "the Alibaba pod list")
        return load_alibaba(path)
    if is_itp(first):   # one clusterNN.csv, taken out of the tarball, under any name
        return load_itp(path, select)
    if is_sacct(first):
        _only_itp(path, select, "Slurm's accounting (sacct)")
        return load_sacct(path)
    if is_queue_history(first):
        _only_itp(path, select, "gqa history")
        return load_queue_history(path)
    _only_itp(path, select, "a CSV trace")
    return load_csv(path)


def _only_itp(path: Path, select: list[str] | None, format_name: str) -> None:
    """Refuses a cluster selection on a trace that has no clusters: replaying the whole file instead
    would answer another question than the one asked."""
    if select:
        raise TraceError(f"{path}: :{','.join(select)} picks clusters of an ITP trace, and this is "
                         f"{format_name}, which has none; give the path alone")


# A trace read from a stream: at most this much (a pipe holds no more than the writer sends, and a
# device read as one, /dev/zero, would never end)
MAX_STREAM_BYTES = 256 << 20


def _stream(path: Path) -> int | None:
    """The descriptor to read `path` from, where it names a pipe (or socket) this process already
    has open: /dev/stdin, /dev/fd/N, /proc/self/fd/N. None for a regular file or a folder. Anything
    else is refused by its path without opening it: a FIFO by name (nobody may ever write to it, and
    opening it would wait for a writer), a device (/dev/zero never ends). A pipe already open was
    handed over on purpose (`<(...)`, `cat t.csv | gqa simulate /dev/stdin`): it is read from where
    it is, and ends when its writer closes it."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file or directory") from None
    except ValueError:   # a NUL in the path
        raise TraceError(f"{path}: no such file or directory") from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    fd = _open_descriptor(path)
    if fd is not None:
        try:
            open_mode = os.fstat(fd).st_mode
        except OSError:
            open_mode = mode
        if stat.S_ISFIFO(open_mode) or stat.S_ISSOCK(open_mode):
            return fd
        mode = open_mode
    raise TraceError(f"{path}: not a regular file ({_kind(mode)}); give a file, or a pipe as /dev/stdin or <(...)")


_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd|proc/thread-self/fd)/(\d+)")


def _open_descriptor(path: Path) -> int | None:
    """The descriptor number a path names, where it names one of this process's own."""
    text = os.path.normpath(os.path.abspath(path))
    if text == "/dev/stdin":
        return 0
    match = _FD_PATH.fullmatch(text)
    return int(match.group(1)) if match else None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def _regular(path: Path) -> Path:
    """`path`, a regular file (a FIFO or a device in a trace's folder is refused unopened)."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise TraceError(f"{path}: not a regular file ({_kind(mode)})")
    return path


def read_stream(path: Path, limit: int | None = None,
                too_much: str = "save it to a file and give its path") -> Iterator[bytes]:
    """The bytes of a pipe already open that `path` names (see _stream), a chunk at a time, read
    once and at most `limit` of them: TraceError beyond that, saying `too_much`."""
    fd = _stream(path)
    if fd is None:
        raise TraceError(f"{path}: not a pipe")
    limit = MAX_STREAM_BYTES if limit is None else limit
    read = 0
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except OSError as exc:
            raise TraceError(f"{path}: {exc.strerror or exc}") from None
        if not chunk:
            return
        read += len(chunk)
        if read > limit:
            raise TraceError(f"{path}: more than {_size(limit)} through a pipe; {too_much}")
        yield chunk


def read_input(path: str | Path, limit: int, what: str) -> bytes:
    """A small input's bytes (`what`: a pools file): a regular file, or a pipe already open (see
    _stream); TraceError where it is neither, or holds more than `limit` bytes."""
    from ..models.regular_file import Unreadable, read_regular

    path = Path(path)
    if _stream(path) is not None:
        return b"".join(read_stream(path, limit, f"more than {what} holds"))
    if path.is_dir():
        raise TraceError(f"{path}: a folder, not a file")
    try:
        data = read_regular(str(path), str(path), limit)
    except Unreadable as exc:
        raise TraceError(str(exc)) from None
    if len(data) > limit:
        raise TraceError(f"{path}: more than {_size(limit)}, more than {what} holds")
    return data


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _columns(first: str) -> set[str]:
    return {c.strip().lower() for c in first.strip().split(",")}


def is_itp(first: str) -> bool:
    """Whether a CSV's first line is an ITP 2021 clusterNN.csv's header."""
    return set(ITP_COLUMNS.split(",")) <= _columns(first)


def is_alibaba(first: str) -> bool:
    """Whether a CSV's first line is the Alibaba v2023 pod list's header."""
    return {"name", "num_gpu", "qos", "pod_phase", "creation_time", "deletion_time"} <= _columns(first)


def records_runs(path: Path) -> bool:
    """Whether the file is of a format that records each job's start and end (Slurm's accounting,
    gqa's history), told from its first line."""
    if not path.is_file():
        return False
    first = _first_line(path)
    return is_sacct(first) or is_queue_history(first)


# how a compressed file begins, by its format, and the tool that undoes it
_COMPRESSED = ((re.compile(rb"\x1f\x8b"), "gzip", "gunzip"), (re.compile(rb"BZh[1-9]1AY&SY"), "bzip2", "bunzip2"),
               (re.compile(rb"\xfd7zXZ\x00"), "xz", "unxz"), (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd", "unzstd"),
               (re.compile(rb"PK\x03\x04"), "zip", "unzip"))


def _compression(path: Path) -> tuple[str, str] | None:
    """The compression a file is in (its format, the tool that undoes it), or None."""
    with path.open("rb") as f:
        head = f.read(10)
    return next(((name, tool) for magic, name, tool in _COMPRESSED if magic.match(head)), None)


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
    reader = csv.DictReader(io.StringIO(text_of(path.read_bytes(), str(path))))
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
    gpus = number(text("gpus"), "gpus")
    if gpus != int(gpus) or gpus < 1:
        raise ValueError(f"gpus must be a whole number >= 1, got {text('gpus')!r}")
    duration = run_seconds(seconds_of(text("duration"), "duration"), "duration")
    if duration <= 0:
        raise ValueError(f"duration must be positive, got {text('duration')!r}")
    wall = run_seconds(seconds_of(text("wall_time"), "wall_time"), "wall_time") if text("wall_time") else None
    if wall is not None and wall <= 0:
        raise ValueError(f"wall_time must be positive, got {text('wall_time')!r}")
    priority = text("priority")
    if priority is not None:
        priority = PRIORITY_ALIASES.get(priority, priority.lower())
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be high, normal or low (or 0, 1, 2), got {text('priority')!r}")
    return TraceJob(id=text("id") or f"job{line - 1}", submit_time=timestamp(text("submit_time")),
                    duration=duration, gpus=int(gpus), team=text("team"), priority=priority,
                    wall_time=wall, user=text("user"), name=text("name"), gpu_type=text("gpu_type"))


# -- Microsoft ITP 2021 -------------------------------------------------------------

def load_itp(path: str | Path, select: list[str] | None = None) -> Trace:
    """All clusters merged into one queue by default: the submit times share an
    origin (the start of the collection), so the merge is one busy cluster."""
    path = Path(path)
    members: dict[str, bytes] = {}
    if path.is_dir():
        for f in sorted(path.glob("cluster[0-9]*.csv")):
            members[f.stem] = _regular(f).read_bytes()
    elif is_itp(_first_line(path)):   # one cluster's file, named by its stem
        members[path.stem] = path.read_bytes()
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
        reader = csv.DictReader(io.StringIO(text_of(members[cluster], where)))
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
    # what the trace says never ran, each reason counted (a row with neither counted once, as no duration)
    no_duration = sum(1 for r in rows if r[3].duration == 0)
    no_gpus = sum(1 for r in rows if r[3].duration > 0 and r[3].gpus == 0)
    if no_duration:
        notes.append(f"dropped {format_count(no_duration, 'job')} with no duration (0 s)")
    if no_gpus:
        notes.append(f"dropped {format_count(no_gpus, 'job')} with no GPUs (num_gpu 0)")
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
    """One row of a clusterNN.csv; a row with no duration or no GPUs is read (and dropped later, counted);
    a negative one, which no published trace has, is refused as the generic CSV refuses it."""
    gpus = number(row["num_gpu"], "num_gpu")
    if gpus != int(gpus):
        raise ValueError(f"num_gpu must be a whole number, got {row['num_gpu']!r}")
    if gpus < 0:
        raise ValueError(f"num_gpu must be 0 or more, got {row['num_gpu']!r}")
    submitted = _moment(row, "submission_time")
    duration = run_seconds(number(row["duration"], "duration"), "duration")
    if duration < 0:
        raise ValueError(f"duration must be 0 or more, got {row['duration']!r}")
    return TraceJob(id=row["job_id"], submit_time=submitted, duration=duration, gpus=int(gpus))


def _moment(row: dict, column: str) -> float:
    """A published trace's time of an event, in seconds."""
    return submit_seconds(number(row[column], column), column)


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
    and are dropped, and so are pods deleted as they were created (no run time),
    each counted; one deleted before it was created is refused with its line.
    duration = deletion_time - creation_time, as the trace's README defines run time."""
    path = Path(path)
    jobs, total, unscheduled, lifeless = [], 0, 0, 0
    reader = csv.DictReader(io.StringIO(text_of(path.read_bytes(), str(path))))
    for row in _rows(reader, str(path)):
        total += 1
        try:
            gpus, qos, phase = number(row["num_gpu"], "num_gpu"), row["qos"], row["pod_phase"]
            if gpus != int(gpus):
                raise ValueError(f"num_gpu must be a whole number, got {row['num_gpu']!r}")
            if gpus < 1 or not (phase == "Succeeded" or qos in ("BE", "Burstable")):
                continue
            if not (row.get("scheduled_time") or "").strip():
                unscheduled += 1
                continue
            created = _moment(row, "creation_time")
            deleted = number(row["deletion_time"], "deletion_time")
            if deleted < created:
                raise ValueError(f"deletion_time {row['deletion_time'].strip()} is before creation_time "
                                 f"{row['creation_time'].strip()}")
            duration = run_seconds(deleted - created, "a pod's life")
        except (KeyError, TypeError, ValueError) as exc:
            raise _row_error(f"{path}: line {reader.line_num}", exc, ALIBABA_COLUMNS) from None
        if duration == 0:
            lifeless += 1
            continue
        jobs.append(TraceJob(id=row["name"], submit_time=created, duration=duration, gpus=int(gpus),
                             priority=ALIBABA_TIERS.get(qos, Priority.NORMAL.value), name=row["name"]))
    jobs.sort(key=lambda j: j.submit_time)
    lifeless_said = f" and {lifeless} with no run time (deleted as created)" if lifeless else ""
    notes = [f"Alibaba v2023: kept {len(jobs)} of {total} pods (GPU pods that succeeded or are BE/Burstable; "
             f"{unscheduled} never scheduled{lifeless_said} dropped); GPU fractions count as 1 GPU",
             "priority from qos: LS/Guaranteed -> high, Burstable -> normal, BE -> low"]
    return Trace(name=path.name, format="alibaba", jobs=jobs, notes=notes)
