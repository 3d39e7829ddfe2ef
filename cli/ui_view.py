"""What `gqa ui`'s page shows, as one JSON-ready snapshot: the GPUs and who
holds them, the running jobs, the pending ones in start order (position,
reason, estimated start), and each team's GPUs against its cap and spend
against its budget. Read through the CLI's backend (cli/backend.py), so the
page shows the local queue, a shared box's or the AWS API's alike; shaped
here (`page_data`, pure) so the browser only places text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gqa.models.units import format_duration

# the page lists at most this many jobs of each kind (100,000 pending would not help anyone read it)
SHOWN = 200

# team colours, in the GPU grid and the plots alike (Tableau 10: distinct, readable on white)
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")


@dataclass
class Reads:
    """What one refresh read: the queue always; the teams' quotas and spend
    where the backend lets the caller read them (each error kept, not fatal)."""

    queue: Any                       # QueueView
    quota: Any = None                # QuotaView, or None with quota_error
    cost: Any = None                 # CostReport, or None with cost_error
    errors: dict[str, str] = field(default_factory=dict)


def read(backend) -> Reads:
    """One refresh's reads; a failed queue read raises (the page shows the error)."""
    from gqa.models.errors import GqaError

    reads = Reads(backend.queries().queue())
    try:
        reads.quota = backend.quota().show()
    except GqaError as exc:
        reads.errors["teams"] = str(exc)
    try:
        reads.cost = backend.cost().report()
    except GqaError as exc:
        reads.errors["cost"] = str(exc)
    return reads


def team_colours(names) -> dict[str, str]:
    """A colour per team, by name order: the same team keeps its colour between refreshes."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def page_data(reads: Reads, now: float, *, source: str) -> dict[str, Any]:
    from .output import PRIORITY

    view = reads.queue
    teams = _teams(reads)
    colours = team_colours([t["team"] for t in teams] + [j.team for j in view.running]
                           + [e.job.team for e in view.pending])
    holder: dict[int, Any] = {}
    for job in view.running:
        for gpu in job.assigned:
            holder[gpu] = job
    cells = [{"index": i, "job": holder[i].id if i in holder else None,
              "team": holder[i].team if i in holder else None, "owner": holder[i].owner if i in holder else None}
             for i in range(view.total_gpus)]
    running = [{"id": j.id, "name": j.name, "team": j.team, "owner": j.owner, "gpus": list(j.assigned),
                "state": j.state.value.lower(),
                # a launched attempt not started yet shows what it waits for, not a run time
                "elapsed": j.reason if j.state.value == "STARTING" else _since(j.started_at, now),
                "attempt": j.attempts} for j in view.running[:SHOWN]]
    pending = [{"position": e.position, "id": e.job.id, "name": e.job.name, "team": e.job.team,
                "owner": e.job.owner, "priority": PRIORITY[e.job.tier], "gpus": e.job.gpus,
                "status": e.job.status.value, "waiting": _since(e.job.submitted_at, now),
                "eta": _eta(e.eta, now), "reason": e.reason} for e in view.pending[:SHOWN]]
    return {
        "at": now,
        "source": source,
        "gpus": {"total": view.total_gpus, "in_use": view.total_gpus - view.free_gpus, "cells": cells},
        "running": running, "running_total": len(view.running),
        "pending": pending, "pending_total": len(view.pending),
        "teams": teams, "period": reads.cost.period if reads.cost is not None else None,
        "colours": colours,
        "errors": reads.errors,
    }


def _teams(reads: Reads) -> list[dict[str, Any]]:
    """Each team's GPUs against its cap and spend against its budget: the
    quota's teams and those with spend this month."""
    rows: dict[str, dict[str, Any]] = {}
    for t in reads.quota.teams if reads.quota is not None else ():
        rows[t.team] = {"team": t.team, "share": t.policy.share, "gpus_in_use": t.gpus_in_use,
                        "max_gpus": t.policy.max_gpus, "budget": t.policy.budget, "spent": 0.0, "used": None}
    for c in reads.cost.teams if reads.cost is not None else ():
        row = rows.setdefault(c.team, {"team": c.team, "share": None, "gpus_in_use": None, "max_gpus": None,
                                       "budget": c.budget, "spent": 0.0, "used": None})
        row.update(spent=round(c.total, 2), budget=c.budget,
                   used=None if c.used is None else round(c.used, 4))
    return [rows[name] for name in sorted(rows)]


def _since(ts: float | None, now: float) -> str:
    return "-" if ts is None else format_duration(now - ts)


def _eta(eta: float | None, now: float) -> str:
    if eta is None:
        return "-"
    return "now" if eta - now <= 1 else f"in {format_duration(eta - now)}"
