"""A report as one self-contained HTML page: each figure embedded as a data:
URI beside the table of its numbers, no external asset, every text escaped;
and the same numbers as one JSON-ready dict for `-o json`."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from html import escape

from ..models.units import format_count, format_duration
from .figures import FIGURES
from .metrics import IDLE_UTIL, Report

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; }
section { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; margin-bottom: 2em; }
section > div { flex: 1 1 420px; }
h2 { flex-basis: 100%; margin: 0; font-size: 1.15em; }
img { max-width: 100%; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 0.2em 0.6em; text-align: right; border-bottom: 1px solid #eee; }
th:first-child, td:first-child { text-align: left; }
p.note { color: #555; margin: 0.2em 0; }
"""


def when(report: Report, at: float) -> str:
    if report.relative:
        return f"+{format_duration(at - report.since)}"
    seconds = ":%S" if report.until - report.since < 3600 else ""
    return datetime.fromtimestamp(at, timezone.utc).strftime(f"%Y-%m-%d %H:%M{seconds} UTC")


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _hours(value: float) -> str:
    """GPU-hours: a tenth of an hour for big figures, three significant digits for small ones."""
    return f"{value:,.1f}" if value >= 10 or value == 0 else f"{value:.3g}"


def tables(report: Report) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Each figure's numbers: (header, rows of cells), by figure name."""
    waits = (["tier", "jobs started", "p50 wait", "p95 wait", "longest", "still waiting"],
             [[w.tier, str(w.total_started), format_duration(w.overall_p50), format_duration(w.overall_p95),
               format_duration(w.longest), str(w.waiting)] for w in report.waits])
    pools = (["pool", "GPUs", "GPU-hours", "mean allocated", "measured utilisation"],
             [[p.name, "-" if p.gpus is None else str(p.gpus), _hours(p.gpu_hours), _pct(p.mean_share),
               "-" if p.mean_measured is None else f"{p.mean_measured:.0f}%"] for p in report.pools])
    teams = (["team", "jobs", "GPU-hours", "spend", "budget for the period", "used"],
             [[t.team, str(t.jobs), _hours(t.gpu_hours), _money(t.cost), _money(t.budget), _pct(t.used)]
              for t in report.teams])
    outcomes = (["outcome", "jobs"], [[label, str(n)] for label, n in report.outcomes])
    reasons = (["waiting for", "jobs", "total", "mean", "longest", "longest job"],
               [[r.why, str(r.jobs), format_duration(r.seconds), format_duration(r.mean), format_duration(r.longest),
                 r.longest_job] for r in report.wait_reasons])
    idle = (["job", "name", "team", "owner", "GPUs", "GPU-hours", "utilisation", "GPU-hours idle"],
            [[j.id, j.name, j.team, j.owner, str(j.gpus), _hours(j.gpu_hours), f"{j.util:.0f}%", _hours(j.wasted)]
             for j in report.idle])
    return {"waits": waits, "pools": pools, "teams": teams, "outcomes": outcomes, "wait_reasons": reasons,
            "idle": idle}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _caption(report: Report, name: str) -> str:
    if name == "idle":
        measured = f"of the {report.measured_jobs} jobs whose GPU utilisation was measured"
        if not report.idle_jobs:
            return f"None {measured} kept its GPUs under {IDLE_UTIL:.0f}% busy on average."
        return (f"{report.idle_jobs} {measured} kept their GPUs under {IDLE_UTIL:.0f}% busy on average, "
                f"{_hours(report.wasted_gpu_hours)} GPU-hours held idle; the {len(report.idle)} that wasted most "
                "are listed.")
    if name == "pools":
        return ("A pool is a GPU type bought on demand or spot. Solid: GPUs allocated to jobs; dotted: the pool's "
                "size; dashed: GPUs busy as measured, where jobs' utilisation was measured.")
    if name == "teams":
        return "A budget is per calendar month; the period's is that budget times the months it spans."
    if name == "wait_reasons":
        return ("Time spent waiting, summed over jobs, by what they waited in. A queued job waited for GPUs or "
                "its team's quota (or its dependency, where it had one); the scheduler does not record which.")
    if name == "waits":
        return ("Submission to first start, of the jobs that started in each interval. Still waiting: the jobs "
                "submitted before the period's end that had not started when the report was made.")
    return ""


def html_page(report: Report, figures: Mapping[str, bytes]) -> str:
    """The page; `figures` by name (render_figures), each shown where it is given."""
    title = escape(report.title)
    period = f"{when(report, report.since)} to {when(report, report.until)}"
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>",
             f"<style>{STYLE}</style></head><body><h1>{title}</h1>",
             f"<p class=\"note\">{escape(period)}: {format_count(report.jobs, 'job')}.</p>"]
    parts += [f"<p class=\"note\">{escape(note)}</p>" for note in report.notes]
    numbers = tables(report)
    for name, heading in FIGURES.items():
        header, rows = numbers[name]
        image = ""
        if name in figures:
            data = base64.b64encode(figures[name]).decode("ascii")
            image = f"<div><img alt=\"{escape(heading)}\" src=\"data:image/png;base64,{data}\"></div>"
        caption = _caption(report, name)
        parts.append(f"<section id=\"{name}\"><h2>{escape(heading)}</h2>{image}<div>"
                     + (f"<p class=\"note\">{escape(caption)}</p>" if caption else "")
                     + (_table(header, rows) if rows else "<p>none</p>") + "</div></section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def as_json(report: Report) -> dict:
    """The report's numbers, times in seconds, shares as fractions."""
    return {
        "title": report.title, "since": report.since, "until": report.until, "jobs": report.jobs,
        "step": report.step,
        "waits": [{"tier": w.tier, "started": w.total_started, "p50": w.overall_p50, "p95": w.overall_p95,
                   "longest": w.longest, "waiting": w.waiting} for w in report.waits],
        "pools": [{"pool": p.name, "gpus": p.gpus, "gpu_hours": round(p.gpu_hours, 3), "allocated": p.mean_share,
                   "measured_utilisation": p.mean_measured} for p in report.pools],
        "teams": [{"team": t.team, "jobs": t.jobs, "gpu_hours": round(t.gpu_hours, 3), "cost": round(t.cost, 2),
                   "budget": None if t.budget is None else round(t.budget, 2),
                   "used": t.used if t.used is None or math.isfinite(t.used) else None} for t in report.teams],
        "outcomes": dict(report.outcomes),
        "wait_reasons": [{"why": r.why, "jobs": r.jobs, "seconds": r.seconds, "longest": r.longest,
                          "longest_job": r.longest_job} for r in report.wait_reasons],
        "idle": {"jobs": report.idle_jobs, "measured": report.measured_jobs,
                 "gpu_hours_wasted": round(report.wasted_gpu_hours, 3),
                 "listed": [{"id": j.id, "name": j.name, "team": j.team, "owner": j.owner, "gpus": j.gpus,
                             "gpu_hours": round(j.gpu_hours, 3), "util": j.util, "wasted": round(j.wasted, 3)}
                            for j in report.idle]},
    }
