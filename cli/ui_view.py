"""What `gqa ui`'s page shows, as one JSON-ready snapshot of the backend's
Overview (gqa/services/overview.py): the GPUs and the job on each, the
running jobs, the pending ones in start order (position, reason, estimated
start), each team's GPUs against its cap and spend against its budget, and
the latest transitions. Read through the CLI's backend (cli/backend.py), so
the page shows the local queue, a shared box's or the AWS API's alike; shaped
here (`page_data`, pure) so the browser only places text."""

from __future__ import annotations

import math
from typing import Any

from gqa.models.units import format_duration

# the page lists at most this many pending jobs (the most an overview carries; it counts them all)
SHOWN = 200
EVENTS = 15        # latest transitions listed

# team colours, in the GPU grid and the tables alike (Tableau 10: distinct, readable on white)
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")


def read(backend):
    """One refresh's read: the overview, with as many pending jobs as the page lists."""
    return backend.overview().overview(head=SHOWN, events=EVENTS)


def team_colours(names) -> dict[str, str]:
    """A colour per team, by name order: the same team keeps its colour between refreshes."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def page_data(view, *, source: str) -> dict[str, Any]:
    """The Overview `view` as the page shows it, its times as of when it was read."""
    from gqa.models.job import user_status

    from .output import PRIORITY, budget_used, gpu_slots
    from .queue_table import outside_text

    now = view.at
    colours = team_colours([t.team for t in view.teams] + [j.team for j in view.running]
                           + [e.team for e in view.head])
    # the queue's own GPUs, then those its jobs still hold beyond them (pool "outside"), as gqa top shows them
    cells = [{"index": index, "type": gpu_type, "spot": pool == "spot", "pool": pool, "job": j.id if j else None,
              "team": j.team if j else None, "owner": j.owner if j else None,
              "util": _percent(j.gpu_util) if j else None} for index, pool, gpu_type, j in gpu_slots(view)]
    outside = len(view.outside_gpus)
    running = [{"id": j.id, "name": j.name, "team": j.team, "owner": j.owner, "gpus": list(j.gpus),
                "status": j.status,
                # a launched attempt not started yet shows what it waits for, not a run time
                "elapsed": j.reason if j.started_at is None else format_duration(j.elapsed),
                "left": format_duration(j.time_left) if j.time_left is not None else "-",
                "util": _percent(j.gpu_util), "memory": _mib(j.gpu_memory)} for j in view.running]
    pending = [{"position": e.position, "id": e.id, "name": e.name, "team": e.team, "owner": e.owner,
                "priority": PRIORITY[e.tier], "gpus": e.gpus, "status": e.status,
                "waiting": format_duration(now - e.submitted_at), "eta": _eta(e.eta, now), "reason": e.reason}
               for e in view.head]
    teams = [_team(t, *budget_used(t.spend, t.budget)) for t in view.teams]
    events = [{"ago": format_duration(now - e.at), "id": e.job_id, "name": e.name,
               "status": user_status(e.state).value, "reason": e.reason} for e in view.events]
    return {
        "at": now, "source": source, "period": view.period,
        "gpus": {"total": len(view.gpus), "in_use": len(view.gpus) - view.free_gpus, "cells": cells,
                 "outside": outside, "outside_text": outside_text(outside) if outside else ""},
        "running": running, "pending": pending, "pending_total": view.pending,
        "teams": teams, "events": events, "colours": colours,
    }


def _team(t, used: str, level: str) -> dict[str, Any]:
    """A team's row: its spend against its budget as `gqa cost` and `gqa top` say it (`used`, `level`)."""
    from gqa.scheduling.budget import used_percent

    from .output import cents

    percent = used_percent(t.spend, t.budget)
    # money to the cent as the CLI shows it (cents): the page only prints it
    return {"team": t.team, "gpus_in_use": t.gpus_held, "max_gpus": t.max_gpus, "spent": cents(t.spend),
            "budget": None if t.budget is None else cents(t.budget), "used_text": used, "level": level,
            # the fraction: none without a budget, or for spend against a budget of 0 (JSON holds no inf)
            "used": None if percent is None or math.isinf(percent) else round(percent / 100, 4)}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _mib(value: float | None) -> str:
    return "-" if value is None else (f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value:.0f} MiB")


def _eta(eta: float | None, now: float) -> str:
    if eta is None:
        return "-"
    return "now" if eta - now <= 1 else f"in {format_duration(eta - now)}"
