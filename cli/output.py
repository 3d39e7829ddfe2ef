"""Printing: tables for people, JSON for scripts, errors to stderr with exit 2."""

import contextlib
import json
import sys
import time
from typing import Any, NoReturn

import typer

from gqa.models.priority import Priority


def fail(message: str, code: int = 2) -> NoReturn:
    sys.stderr.write(f"gqa: error: {message}\n")
    raise typer.Exit(code)


def note(message: str) -> None:
    sys.stderr.write(message + "\n")


@contextlib.contextmanager
def user_errors():
    """Domain errors become one clear line on stderr and exit code 2 (or the
    error's own `exit_code`: 1 for a transient one, such as a database locked
    past its timeout). A storage fault on a named file that no adapter
    translated (disk full, read-only, permission denied) is reported the same way."""
    from gqa.models.errors import GqaError

    try:
        yield
    except GqaError as exc:
        fail(str(exc), getattr(exc, "exit_code", 2))
    except OSError as exc:
        from gqa.adapters.local.storage_errors import translate

        error = translate(exc, exc.filename) if exc.filename else None
        if error is None:
            raise
        fail(str(error), getattr(error, "exit_code", 2))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def console():
    from rich.console import Console

    return Console(highlight=False)


def job_dict(job, *, history: bool = False) -> dict[str, Any]:
    data = {
        "id": job.id, "group": job.group, "name": job.name, "team": job.team, "owner": job.owner,
        "priority": Priority.of_rank(job.tier).value, "state": job.state.value, "status": job.status.value,
        "gpus": job.gpus, "gpu_type": job.gpu_type, "assigned_gpus": list(job.assigned),
        "array_index": job.array_index, "attempts": job.attempts, "error_retries": job.error_retries,
        "interruptions": job.interruptions, "submitted_at": job.submitted_at, "started_at": job.started_at,
        "ended_at": job.ended_at, "exit_code": job.exit_code, "signal": job.signal, "reason": job.reason,
        "gpu_seconds": round(job.gpu_seconds, 3), "cost": round(job.cost, 4),
        "gpu_util": job.gpu_util, "gpu_memory": job.gpu_memory,   # mean %, peak MiB; None where not measured
    }
    if history:
        data["history"] = [{"state": t.state.value, "at": t.at, "reason": t.reason} for t in job.history]
    return data


def gpu_use(util: float | None, memory: float | None) -> str:
    """`63% mean utilisation, 17.2 GiB peak memory`: a job's GPU figures as measured (NVML locally)."""
    parts = [f"{util:.0f}% mean utilisation" if util is not None else "utilisation not measured"]
    if memory is not None:
        parts.append(f"{memory / 1024:.1f} GiB peak memory" if memory >= 1024 else f"{memory:.0f} MiB peak memory")
    return ", ".join(parts)


def now() -> float:
    """The time every view's ages, time left and ETAs are counted from (tests fix it here)."""
    return time.time()


def ago(ts: float | None, now: float | None = None) -> str:
    from gqa.models.units import format_duration

    if ts is None:
        return "-"
    return format_duration((now or time.time()) - ts)


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def exit_words(code: int | None, signal: int | None) -> str:
    """How a job ended, in words: `code 3`, `signal 15 (SIGTERM)`, the signal named as
    `gqa history`'s exit column names it; "-" before an exit."""
    from gqa.models.outcome import signal_name

    parts = [] if code is None else [f"code {code}"]
    if signal:
        name = signal_name(signal)     # "signal N" for no signal of this machine's: its number alone
        parts.append(f"signal {signal} ({name})" if name.startswith("SIG") else name)
    return ", ".join(parts) or "-"


# a tier rank -> its name, for tables
PRIORITY = tuple(Priority.of_rank(rank).value for rank in range(len(Priority)))


def gpu_slots(view) -> list[tuple[int, str, str, Any]]:
    """Every GPU `gqa top` and `gqa ui` show of an Overview, as (index, pool, type, the job on it
    or None): the queue's own, then those its jobs hold beyond them, pool "outside" (a daemon
    restarted with fewer GPUs adopts the jobs still running on the others, seen until they end)."""
    slots = [(g.index, "spot" if g.spot else "on-demand", g.type, g.job) for g in view.gpus]
    outside = view.outside_gpus
    if outside:
        on_gpu = {i: j for j in view.running for i in j.gpus}
        slots += [(i, "outside", "-", on_gpu[i]) for i in outside]
    return slots


NEAR_BUDGET = 80.0   # percent of a budget from which a team's row is marked near it


def cents(amount: float) -> float:
    """Money to the cent, halves up (units.to_cents). Parts shown are rounded first and a total
    shown is their sum, so what a table shows adds up."""
    from gqa.models.units import to_cents

    return to_cents(amount)


def money(amount: float) -> str:
    """`$1,234.57`: money as every table shows it, to the cent, halves up (cents)."""
    return f"${cents(amount):,.2f}"


def gpu_hours_text(hours: float) -> str:
    """GPU-hours as tables show them: two decimals, so a few minutes on a GPU is not 0.0."""
    return f"{hours:,.2f}"


def budget_used(spent: float, budget: float | None) -> tuple[str, str]:
    """A team's spend against its budget as `gqa cost`, `gqa top` and `gqa ui` all show it:
    the text (`used_text`: rounded down, "-" without a budget, a $0 budget "0%" until anything
    is spent) and its level, "over" once the budget is reached, "near" from NEAR_BUDGET, else ""."""
    from gqa.scheduling.budget import used_percent, used_text

    percent = used_percent(spent, budget)
    level = "" if percent is None else "over" if percent >= 100 else "near" if percent >= NEAR_BUDGET else ""
    return used_text(spent, budget), level


STATUS_STYLE = {
    "pending": "yellow", "awaiting approval": "magenta", "held": "magenta", "starting": "cyan",
    "running": "cyan", "retrying": "yellow", "completed": "green", "failed": "red", "timed out": "red",
    "cancelled": "dim", "rejected": "red",
}


def print_results(results, fmt: str) -> None:
    """What cancel, requeue, approve and deny did, job by job."""
    if fmt == "json":
        print_json([{"id": r.job.id, "action": r.action, "state": r.job.state.value, "detail": r.detail}
                    for r in results])
        return
    for r in results:
        sys.stdout.write(f"{r.action} {r.job.id}" + (f" ({r.detail})" if r.detail else "") + "\n")


def daemon_down(be) -> bool:
    """A workstation queue whose daemon is not running: nothing starts, nothing is signalled."""
    return bool(be.local) and be.daemon_pid() is None


def tell_troubles(be) -> bool:
    """Say on stderr what the queue daemon says is failing now (a full disk keeps jobs' ends from
    being recorded: they read as running), with how long and its error; whether anything was."""
    from gqa.models.units import format_duration

    troubles = be.troubles() if hasattr(be, "troubles") else []
    for trouble in troubles:
        since = trouble.get("since")
        how_long = f" for {format_duration(max(0.0, now() - since))}" if isinstance(since, (int, float)) else ""
        note(f"note: the queue daemon has failed at {trouble.get('step', 'its work')}{how_long} "
             f"({trouble.get('error', '')}): jobs start, and their ends are recorded, only once it works again")
    return bool(troubles)


def until_the_daemon_runs(be, results) -> None:
    """A running job asked to stop on a workstation whose daemon is down is signalled only
    when it starts again: say so, rather than let "stopping its processes" stand."""
    if any(r.action in ("cancelling", "requeueing") for r in results) and daemon_down(be):
        note("note: the queue daemon is not running; running jobs are signalled when `gqa local start` runs "
             "(until then they keep running)")


SUMMARISED_OVER = 20   # a group with more jobs than this prints one line, not one per job (100,000 would scroll)


def summarised(results, line=lambda r: f"{r.action} {r.job.id}") -> list[str]:
    """What cancel, hold, release or update did: `line(result)` (and its detail)
    per job, but one line per group of more than SUMMARISED_OVER jobs:
    `array 12: 99,990 cancelled, 8 cancelling (stopping its processes)`."""
    from collections import Counter

    groups: dict[str, list] = {}
    for r in results:
        groups.setdefault(r.job.group, []).append(r)
    lines = []
    for group, members in groups.items():
        if len(members) <= SUMMARISED_OVER:
            lines += [line(r) + (f" ({r.detail})" if r.detail else "") for r in members]
            continue
        counts = Counter((r.action, r.detail) for r in members)
        lines.append(f"array {group}: " + ", ".join(f"{n:,} {action}" + (f" ({detail})" if detail else "")
                                                    for (action, detail), n in counts.items()))
    return lines
