"""Slurm's accounting as a trace: what `sacct --parsable2` prints, one job a row.

    sacct -a -X -P -S 2026-01-01 -E now -o JobID,Submit,Eligible,Start,End,ElapsedRaw,AllocTRES,ReqTRES,\\
        TimelimitRaw,Account,QOS,User,JobName,State > jobs.txt

A row that ran on GPUs becomes a job: its arrival (Eligible where the dump has it, as a job held back by
--begin or a dependency could not start before; else Submit), the time it ran (ElapsedRaw, else Elapsed,
else End - Start), its GPUs (gres/gpu in AllocTRES, else in ReqTRES; their type where one is named), the
time limit its user asked (TimelimitRaw, minutes, else Timelimit; none where UNLIMITED or the
partition's), its account as its team, its user, its name, and its QOS as its tier where the QOS is
named high, normal or low. The rest is left out and counted: job steps (`12.batch`, `12.0`; -X leaves
them out), jobs that never started (still waiting at the dump, or cancelled waiting, which sacct gives a
start at its end and no AllocTRES), jobs still running at the dump (no End yet, or RUNNING with the
dump's end as its End, as -T prints it), jobs that asked no GPU, and runs of 0 seconds. A row that
started before it arrived, or ended before it started (a daylight-saving change in a dump of local
times), or ran a negative time is refused with its line. A requeued job's row is its last attempt,
submitted when it was requeued (a job whose last row is REQUEUED waits again at the dump); with -D it
has a row per attempt, and its attempts become one job, arriving with its first and running as long as
all together. Rows with one id are attempts of one job only where each before the next was requeued
(REQUEUED) or they share a Submit time; else they are jobs of their own (Slurm gives an id again after
its counter wraps or its database is reset), and so are jobs of two clusters (a Cluster column, as
`sacct -M all` prints it): each replayed, the later ones' ids marked with a '. Dumps put together with
`cat` read as one: a repeated header is skipped, and an attempt repeated by overlapping periods read
once, as the row that got furthest has it (waiting, then running, then ended; of two as far, the
later)."""

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from ..models.errors import SpecError
from ..models.priority import Priority
from ..models.units import format_count, parse_duration
from .queue_history import own_ids
from .trace_fields import (PRIORITIES, Trace, TraceError, TraceJob, limits_note, run_seconds, submit_seconds,
                           text_of, timestamp)

DUMP = ("sacct -a -X -P -S START -E now -o JobID,Submit,Eligible,Start,End,ElapsedRaw,AllocTRES,ReqTRES,TimelimitRaw,"
        "Account,QOS,User,JobName,State")
# what a row must give, each as any one of its columns
NEEDED = {"the job's id": ("JobID", "JobIDRaw"), "its submit time": ("Submit",), "its start": ("Start",),
          "its run time": ("ElapsedRaw", "Elapsed", "End"), "its GPUs": ("AllocTRES", "ReqTRES")}
NO_TIME = {"", "unknown", "none"}                     # a time sacct has not got
NO_LIMIT = {"unlimited", "partition_limit", "invalid", ""}
STILL_GOING = {"RUNNING", "SUSPENDED"}               # a state of a job not ended at the dump, whatever its End
_ZERO = re.compile(r"^[0:-]+$")                       # 00:00:00, 0-00:00:00
_EPOCH = datetime(1970, 1, 1)
READ = {"jobid", "jobidraw", "submit", "eligible", "start", "end", "elapsedraw", "elapsed", "alloctres", "reqtres",
        "timelimitraw", "timelimit", "account", "qos", "user", "jobname", "state", "cluster"}


def is_sacct(first_line: str) -> bool:
    """Whether a file's first line is sacct's parsable header (`JobID|Submit|...`)."""
    names = {name.strip().lower() for name in first_line.split("|")}
    return "|" in first_line and bool(names & {"jobid", "jobidraw"})


@dataclass(slots=True)
class _Row:
    """One row of a job that is not a step: one attempt, as the dump has it."""
    queued: float           # Submit: an attempt's own, the same in every dump (Eligible may be Unknown while it waits)
    submit: float           # its arrival: Eligible, else Submit
    start: float | None
    running: bool           # no end yet: still running at the dump
    requeued: bool          # this attempt was requeued: another follows (or waits, if this row is the last)
    qos: str
    seconds: float
    job: TraceJob | None    # None: asked no GPU


class _Columns:
    """The header's columns by name (sacct's names, in any case), and a row's values by them."""

    def __init__(self, header: str, where: str):
        names = [n.strip().lower() for n in header.rstrip("\r\n").split("|")]
        if names and names[-1] == "":   # --parsable (not --parsable2) ends each line with the delimiter
            names.pop()
        self.count, self.at = len(names), {n: i for i, n in enumerate(names)}
        self.wanted = [(n, i) for n, i in self.at.items() if n in READ]
        missing = [what for what, options in NEEDED.items() if not any(o.lower() in self.at for o in options)]
        if missing:
            needs = ", ".join(f"{what} ({' or '.join(NEEDED[what])})" for what in missing)
            raise TraceError(f"{where}: line 1: Slurm's accounting needs {needs}; dump it with: {DUMP}")

    def values(self, line: str) -> list[str]:
        fields = line.rstrip("\r\n").split("|")
        if len(fields) == self.count + 1 and fields[-1] == "":
            fields.pop()
        if len(fields) != self.count:
            raise ValueError(f"{len(fields)} fields where the header has {self.count} (a job name with a '|' "
                             "in it? sacct then needs another --delimiter, which this reader does not take)")
        return fields

    def read(self, fields: list[str]) -> dict[str, str]:
        """The row's values of the columns read here, stripped, by their names in lower case."""
        return {name: fields[i].strip() for name, i in self.wanted}


def load_sacct(path: str | Path) -> Trace:
    path = Path(path)
    # each id's attempts, by cluster and id: dumps of overlapping periods put together (`cat`) repeat an
    # attempt's row, which says how far it had got by each dump's end (waiting, running, ended)
    rows: dict[tuple[str, str], list[_Row]] = {}
    steps = repeats = 0
    with path.open("rb") as f:   # a line at a time: a year of a busy cluster is millions of rows
        header = text_of(f.readline(), str(path))
        columns = _Columns(header, str(path))
        for number, line in enumerate(_lines(f, path), start=2):
            if not line.strip() or line.strip() == header.strip():   # a blank line; the next dump's header
                continue
            try:
                fields = columns.values(line)
                values = columns.read(fields)
                job_id = values.get("jobid", values.get("jobidraw")) or ""
                if not job_id:
                    raise ValueError("the job's id is empty")
                if "." in job_id:   # a step of a job (12.batch, 12.extern, 12.0): the job's row counts it
                    steps += 1
                    continue
                row = _row(values.get, job_id)
            except ValueError as exc:
                raise TraceError(f"{path}: line {number}: {exc}") from None
            attempts = rows.setdefault((values.get("cluster") or "", job_id), [])
            # a job has a few attempts at most: a walk is cheaper than a dict per job
            same = next((i for i, r in enumerate(attempts) if _same_attempt(r, row)), None)
            if same is None:
                attempts.append(row)
            else:
                repeats += 1
                if _progress(row) >= _progress(attempts[same]):
                    attempts[same] = row
    return _trace(path, rows, steps, repeats)


def _same_attempt(a: _Row, b: _Row) -> bool:
    """Whether two rows are one attempt: its Submit, and its start once it has one (a requeue's attempt
    has a Submit of its own). A row of it waiting has no start yet, and maybe no Eligible."""
    return a.queued == b.queued and (a.start == b.start or a.start is None or b.start is None)


def _jobs_of(attempts: list[_Row]) -> Iterator[list[_Row]]:
    """One id's attempts, each job's together, in the order they were submitted: an attempt is its job's
    next where the one before it was requeued, or shares its Submit; else it starts a job of its own."""
    attempts = sorted(attempts, key=lambda r: (r.queued, float("inf") if r.start is None else r.start))
    job = [attempts[0]]
    for row in attempts[1:]:
        if job[-1].requeued or row.queued == job[-1].queued:
            job.append(row)
        else:
            yield job
            job = [row]
    yield job


def _progress(row: _Row) -> int:
    """How far an attempt had got at its dump's end: never started (0), running (1), ended (2). A row
    repeated by another dump gives way to one that got as far or further, whichever order they come in."""
    return 0 if row.start is None else 1 if row.running else 2


def _lines(f: BinaryIO, path: Path) -> Iterator[str]:
    """The file's lines after the header, as text; one that is not UTF-8 named by its number."""
    for number, raw in enumerate(f, start=2):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceError(f"{path}: line {number}: byte 0x{raw[exc.start]:02x} is not UTF-8 "
                             "(a trace is UTF-8 text)") from None


def _row(get: Callable[[str], str | None], job_id: str) -> _Row:
    submit = _time(get("submit"), "Submit")
    eligible = _time(get("eligible"), "Eligible")
    start = _time(get("start"), "Start")
    end_text = get("end")
    state = (get("state") or "").split(" ")[0].upper()
    # running: started with no end yet, or still going with the dump's end as its End (sacct -T prints
    # one); requeued: REQUEUED, REQUEUE_HOLD or REQUEUE_FED (as a job's last row, it waits to run again)
    running = start is not None and ((end_text is not None and end_text.lower() in NO_TIME)
                                     or state in STILL_GOING)
    requeued = state.startswith("REQUEUE")
    if submit is None:
        raise ValueError("Submit is empty")
    arrival = max(submit, eligible) if eligible is not None else submit
    seconds = 0.0
    if start is not None and not running:
        end = _time(end_text, "End")
        if end is not None and end < start:
            raise ValueError(_before("End", end_text, "Start", get("start")))
        seconds = run_seconds(_elapsed(get, start, end), "the run")
        if seconds == 0 and get("alloctres") == "":
            start = None   # nothing allocated: cancelled waiting (sacct gives it a start at its end)
        elif start < submit:
            raise ValueError(_before("Start", get("start"), "Submit", get("submit")))
        elif start < arrival:
            raise ValueError(_before("Start", get("start"), "Eligible", get("eligible")))
    gpus, gpu_type = _gpus(get("alloctres"), "AllocTRES")
    if not gpus:
        gpus, gpu_type = _gpus(get("reqtres"), "ReqTRES")
    qos = (get("qos") or "").lower()
    if not gpus:
        return _Row(submit, arrival, start, running, requeued, qos, seconds, None)
    job = TraceJob(id=job_id, submit_time=arrival, duration=seconds, gpus=gpus, team=get("account") or None,
                   priority=qos if qos in PRIORITIES else None, wall_time=_limit(get),
                   user=get("user") or None, name=get("jobname") or None,
                   started=start, ended=None if start is None else start + seconds, gpu_type=gpu_type,
                   qos=qos or None)
    return _Row(submit, arrival, start, running, requeued, qos, seconds, job)


def _before(later: str, later_text: str | None, earlier: str, earlier_text: str | None) -> str:
    """Why a row whose times run backwards is refused: its wait or run would be negative."""
    why = f"{later} {later_text} is before {earlier} {earlier_text}"
    if not (later_text or "").isdigit():   # not epoch seconds: the cluster's local time
        why += " (a daylight-saving change? dump with SLURM_TIME_FORMAT=%s for epoch seconds)"
    return why


def _time(text: str | None, what: str) -> float | None:
    """Seconds: sacct's own format (2026-12-07T04:36:13, the cluster's local time, read as UTC as a
    trace's times without a zone are), or what SLURM_TIME_FORMAT made of it (epoch seconds: %s)."""
    if text is None or text.lower() in NO_TIME:
        return None
    try:
        if len(text) == 19 and text[10] == "T":   # the common case, read at once: a dump may have millions
            return submit_seconds((datetime.fromisoformat(text) - _EPOCH).total_seconds(), what)
        return timestamp(text)
    except ValueError:
        raise ValueError(f"{what} is not a time: {text!r}") from None


def _elapsed(get: Callable[[str], str | None], start: float, end: float | None) -> float:
    """Seconds the row's job ran: ElapsedRaw, else Elapsed ([D-]HH:MM:SS), else End - Start (End not
    before Start: the row checks it)."""
    raw = get("elapsedraw")
    if raw:
        if not raw.isdigit():
            raise ValueError(f"ElapsedRaw is not whole seconds: {raw!r}")
        return float(raw)
    text = get("elapsed")
    if text:
        return 0.0 if _ZERO.match(text) else float(_slurm_time(text, "Elapsed", bare_unit="s"))
    if end is None:
        raise ValueError("End is empty for a job that ended")
    return end - start


def _limit(get: Callable[[str], str | None]) -> float | None:
    """The time limit the job asked, in seconds; None where it has none of its own."""
    raw = get("timelimitraw")
    if raw is not None and raw.lower() not in NO_LIMIT:
        if not raw.isdigit():
            raise ValueError(f"TimelimitRaw is not whole minutes: {raw!r}")
        return run_seconds(int(raw) * 60.0, "the time limit") or None
    text = get("timelimit")
    if raw is None and text is not None and text.lower() not in NO_LIMIT:
        return run_seconds(float(_slurm_time(text, "Timelimit", bare_unit="m")), "the time limit")
    return None


def _slurm_time(text: str, what: str, bare_unit: str) -> int:
    try:
        return parse_duration(text, bare_unit=bare_unit)
    except SpecError:
        raise ValueError(f"{what} is not a Slurm time ([D-]HH:MM:SS): {text!r}") from None


def _gpus(text: str | None, what: str) -> tuple[int, str | None]:
    """GPUs in a TRES list (`cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=8G`): gres/gpu's count, else the sum
    of its typed counts; 0 where it names none. And their type, where one type is named."""
    untyped, typed, types = None, 0, set()
    for item in (text or "").split(","):
        key, _, value = item.partition("=")
        key = key.strip().lower()
        if key != "gres/gpu" and not key.startswith("gres/gpu:"):
            continue
        if not value.strip().isdigit():
            raise ValueError(f"{what}: {key} is not a whole number: {value!r}")
        if key == "gres/gpu":
            untyped = int(value)
        else:
            typed += int(value)
            types.add(key.partition(":")[2])
    return (untyped if untyped is not None else typed), (types.pop() if len(types) == 1 else None)


def _trace(path: Path, rows: dict[tuple[str, str], list[_Row]], steps: int, repeats: int) -> Trace:
    jobs: list[TraceJob] = []
    other_qos: Counter = Counter()
    never = running = cpu_only = zero = requeued = 0
    for attempts in (job for one_id in rows.values() for job in _jobs_of(one_id)):
        last = attempts[-1]
        ran = [r for r in attempts if r.start is not None and not r.running]
        if last.running or last.requeued or (last.start is None and ran):
            running += 1    # still going, or requeued and waiting again, at the dump
        elif not ran:
            never += 1
        elif last.job is None:
            cpu_only += 1
        elif sum(r.seconds for r in ran) <= 0:
            zero += 1
        else:
            requeued += len(ran) > 1
            if last.qos and last.qos not in PRIORITIES:
                other_qos[last.qos] += 1
            jobs.append(last.job if len(attempts) == 1 else _joined(last.job, ran))
    jobs.sort(key=lambda j: j.submit_time)
    jobs, renamed = own_ids(jobs)   # the replay and the `as it ran` row know a job by its id
    no_gpu = ("that asked no GPU (no gres/gpu in AllocTRES or ReqTRES"
              + ("; none has one: is gres/gpu in the cluster's AccountingStorageTRES?)" if not jobs else ")"))
    left = [text for n, text in (
        (steps, format_count(steps, "job step") + " (sacct -X leaves steps out)"),
        (repeats, format_count(repeats, "row") + " repeated (dumps of overlapping periods: each read once, "
                                                 "as it stood last)"),
        (never, f"{never:,} that never started"), (running, f"{running:,} running or requeued at the dump"),
        (cpu_only, f"{cpu_only:,} {no_gpu}"), (zero, f"{zero:,} that ran 0 s")) if n]
    kept = f"Slurm accounting: {format_count(len(jobs), 'job')} that ran on GPUs"
    notes = [kept + (f"; left out: {', '.join(left)}" if left else "")]
    if requeued:
        notes.append(f"{format_count(requeued, 'job')} requeued: each replayed as one job, "
                     "its attempts' run times together")
    if renamed:
        notes.append(f"{format_count(renamed, 'job')} with the id of an earlier job (another cluster's, or an id "
                     "Slurm gave again): each replayed as its own, its id marked with a '")
    notes.append(limits_note(jobs, "UNLIMITED or the partition's"))
    if other_qos:
        named = ", ".join(f"{q} ({n})" for q, n in sorted(other_qos.items()))
        notes.append(f"priority from QOS high, normal and low; other QOS read as {Priority.NORMAL.value}: {named} "
                     "(--qos-tiers NAME=TIER says otherwise)")
    return Trace(name=path.name, format="sacct", jobs=jobs, notes=notes)


def _joined(last: TraceJob, ran: list[_Row]) -> TraceJob:
    """A job from the attempts that ran: arriving with the first, running as long as all together. What
    happened: the first one's start, the last one's end (as the last row has it), and each attempt's
    run, as only they held its GPUs (not while it waited to run again)."""
    runs = sorted((r.start, r.start + r.seconds) for r in ran if r.start is not None)
    return replace(last, submit_time=min(r.submit for r in ran), duration=sum(r.seconds for r in ran),
                   started=runs[0][0], runs=tuple(runs) if len(runs) > 1 else None)
