"""A report's figures as PNG bytes, one per section, drawn with matplotlib's
Agg canvas (no display). matplotlib is imported on the first figure only:
it takes about a second to load, which `gqa --help` must not pay."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from typing import Any

from ..models.units import format_count, format_duration
from .metrics import Report

WIDTH, HEIGHT, DPI = 8.0, 3.6, 100      # inches and dots per inch: 800 x 360 pixels
# name -> title; the order a report shows them in
FIGURES = {
    "waits": "Queue wait per tier (p50 and p95, by start time)",
    "pools": "GPUs allocated per pool",
    "teams": "GPU-hours and spend per team",
    "outcomes": "How jobs ended",
    "wait_reasons": "Why jobs waited",
    "idle": "Jobs that held GPUs idle",
}
TEAMS_DRAWN = 12       # the teams that spent most; the table lists them all
TIER_COLOURS = {"high": "#d62728", "normal": "#1f77b4", "low": "#7f7f7f"}


def render_figures(report: Report) -> dict[str, bytes]:
    """Every figure of the report, by name (FIGURES' order)."""
    return {name: render_figure(report, name) for name in FIGURES}


def render_figure(report: Report, name: str) -> bytes:
    """One named figure as PNG bytes; KeyError for a name FIGURES lacks. A figure of its own,
    not pyplot's: nothing global, so a web page's worker threads may draw at once."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    draw = _DRAW[name]
    fig = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI)
    FigureCanvasAgg(fig)
    if not draw(report, fig):
        fig.clear()
        fig.text(0.5, 0.5, "nothing to show in this period", ha="center", va="center", fontsize=12,
                 color="#555555")
    fig.suptitle(FIGURES[name], fontsize=11)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _x(report: Report) -> list[Any]:
    """Bucket middles: hours from the start for a simulated trace, dates otherwise."""
    middles = [t + report.step / 2 for t in report.times]
    if report.relative:
        unit = _relative_unit(report)[1]
        return [(t - report.since) / unit for t in middles]
    return [datetime.fromtimestamp(t, timezone.utc) for t in middles]


def _relative_unit(report: Report) -> tuple[str, float]:
    return ("hours", 3600.0) if report.until - report.since >= 3 * 3600 else ("minutes", 60.0)


def _time_axis(report: Report, ax: Any) -> None:
    """The whole period, whatever part of it has points."""
    if report.relative:
        name, unit = _relative_unit(report)
        ax.set_xlim(0, (report.until - report.since) / unit)
        ax.set_xlabel(f"{name} from the trace's start")
        return
    ax.set_xlim(datetime.fromtimestamp(report.since, timezone.utc), datetime.fromtimestamp(report.until, timezone.utc))
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("UTC")


def _duration_unit(longest: float) -> tuple[str, float]:
    """The unit a scale up to `longest` seconds reads best in."""
    return ("hours", 3600.0) if longest >= 3 * 3600 else ("minutes", 60.0) if longest >= 180 else ("seconds", 1.0)


def _waits(report: Report, fig: Any) -> bool:
    ax = fig.subplots()
    x = _x(report)
    drawn = False
    unit, scale = _duration_unit(max((v for w in report.waits for v in w.p95 if v is not None), default=0.0))
    for w in report.waits:
        if not w.total_started:
            continue
        colour = TIER_COLOURS.get(w.tier)
        ax.plot(x, [None if v is None else v / scale for v in w.p50], marker="o", ms=3, color=colour,
                label=f"{w.tier} p50")
        ax.plot(x, [None if v is None else v / scale for v in w.p95], ls="--", marker=".", ms=3, color=colour,
                label=f"{w.tier} p95")
        drawn = True
    if drawn:
        ax.set_ylabel(f"wait ({unit})")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, ncol=3)
        _time_axis(report, ax)
    return drawn


def _pools(report: Report, fig: Any) -> bool:
    ax = fig.subplots()
    if not any(p.gpu_hours for p in report.pools):
        return False
    x = _x(report)
    for p in report.pools:
        (line,) = ax.plot(x, list(p.busy), label=f"{p.name}: GPUs allocated")
        if p.gpus:
            ax.axhline(p.gpus, color=line.get_color(), ls=":", lw=1, label=f"{p.name}: {p.gpus} GPUs")
        if any(m is not None for m in p.measured):
            # GPUs busy as measured: allocated x mean utilisation
            ax.plot(x, [b * m / 100 if m is not None else None for b, m in zip(p.busy, p.measured)],
                    color=line.get_color(), ls="--", label=f"{p.name}: busy as measured")
    ax.set_ylabel("GPUs")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    _time_axis(report, ax)
    return True


def _teams(report: Report, fig: Any) -> bool:
    teams = sorted((t for t in report.teams if t.gpu_hours or t.cost or t.budget),
                   key=lambda t: (-t.cost, -t.gpu_hours, t.team))[:TEAMS_DRAWN]
    if not teams:
        return False
    hours, money = fig.subplots(1, 2, sharey=True)
    ys = list(range(len(teams)))
    hours.barh(ys, [t.gpu_hours for t in teams], color="#1f77b4")
    hours.set_yticks(ys, [t.team for t in teams])
    hours.invert_yaxis()
    hours.set_xlabel("GPU-hours")
    money.barh(ys, [t.cost for t in teams], color="#ff7f0e", label="spend")
    budgets = [(y, t.budget) for y, t in zip(ys, teams) if t.budget is not None]
    if budgets:
        money.scatter([b for _, b in budgets], [y for y, _ in budgets], marker="|", s=600, linewidths=2.5,
                      color="#d62728", label="budget for the period", zorder=3)
        money.legend(fontsize=8, loc="lower right")
    money.set_xlabel("spend ($)")
    money.set_xlim(left=0)
    for axis in (hours, money):
        axis.grid(True, axis="x", alpha=0.3)
    return True


def _labelled_bars(ax: Any, labels: list[str], values: list[float], notes: list[str], colour: Any, *,
                   margin: float, xlabel: str) -> None:
    """Horizontal bars, first on top, each with its note after it."""
    ys = list(range(len(labels)))
    ax.barh(ys, values, color=colour)
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    for y, value, note in zip(ys, values, notes):
        ax.text(value, y, f" {note}", va="center", fontsize=8)
    ax.margins(x=margin)     # room for the notes after the bars
    ax.set_xlabel(xlabel)


def _outcomes(report: Report, fig: Any) -> bool:
    shown = [(label, n) for label, n in report.outcomes]
    if not any(n for _, n in shown):
        return False
    colours = {"succeeded": "#2ca02c", "failed": "#d62728", "timed out": "#9467bd", "cancelled": "#7f7f7f",
               "rejected": "#8c564b"}
    _labelled_bars(fig.subplots(), [label for label, _ in shown], [n for _, n in shown], [f"{n}" for _, n in shown],
                   [colours.get(label, "#1f77b4") for label, _ in shown], margin=0.12, xlabel="jobs")
    return True


def _wait_reasons(report: Report, fig: Any) -> bool:
    reasons = report.wait_reasons
    if not reasons:
        return False
    unit, scale = _duration_unit(max(r.seconds for r in reasons))
    _labelled_bars(fig.subplots(), [r.why for r in reasons], [r.seconds / scale for r in reasons],
                   [f"{format_count(r.jobs, 'job')}, longest {format_duration(r.longest)}" for r in reasons], "#ff7f0e",
                   margin=0.35, xlabel=f"{unit} waited, all jobs together")
    return True


def _idle(report: Report, fig: Any) -> bool:
    idle = report.idle
    if not idle:
        return False
    _labelled_bars(fig.subplots(), [f"{j.id} {j.name}"[:28] for j in idle], [j.wasted for j in idle],
                   [f"{j.util:.0f}% busy" for j in idle], "#d62728", margin=0.15, xlabel="GPU-hours held idle")
    return True


_DRAW = {"waits": _waits, "pools": _pools, "teams": _teams, "outcomes": _outcomes, "wait_reasons": _wait_reasons,
         "idle": _idle}
