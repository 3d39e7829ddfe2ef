"""The figures of `gqa ui`'s page, as PNG bytes from the page's snapshot
(cli/ui_view.py): GPUs in use per team against its cap, this month's spend
per team against its budget, and the pending jobs per team. Drawn with
matplotlib's object API (no pyplot: no global state, no display needed)."""

from __future__ import annotations

import io
from typing import Any, Callable

WIDTH, HEIGHT, DPI = 5.2, 2.6, 100    # inches: 520 x 260 pixels, a column of the page


def gpus_by_team(data: dict[str, Any]) -> bytes:
    held: dict[str, int] = {}
    for cell in data["gpus"]["cells"]:
        if cell["team"] is not None:
            held[cell["team"]] = held.get(cell["team"], 0) + 1
    caps = {t["team"]: t["max_gpus"] for t in data["teams"] if t["max_gpus"] is not None}
    teams = sorted(set(held) | set(caps))
    title = f"GPUs in use by team ({data['gpus']['in_use']} of {data['gpus']['total']})"
    return _bars(title, "GPUs", teams, [held.get(t, 0) for t in teams], [caps.get(t) for t in teams],
                 data["colours"], "cap", lambda v: f"{v:g}")


def spend_by_team(data: dict[str, Any]) -> bytes:
    teams = [t for t in data["teams"] if t["spent"] or t["budget"] is not None]
    title = f"Spend in {data['period']} by team" if data["period"] else "Spend by team"
    return _bars(title, "spend", [t["team"] for t in teams], [t["spent"] for t in teams],
                 [t["budget"] for t in teams], data["colours"], "budget", lambda v: f"${v:,.2f}")


def pending_by_team(data: dict[str, Any]) -> bytes:
    count: dict[str, int] = {}
    for job in data["pending"]:
        count[job["team"]] = count.get(job["team"], 0) + job["gpus"]
    teams = sorted(count)
    shown = "" if data["pending_total"] <= len(data["pending"]) else f", first {len(data['pending'])} jobs"
    return _bars(f"GPUs asked by pending jobs ({data['pending_total']} jobs{shown})", "GPUs", teams,
                 [count[t] for t in teams], [None] * len(teams), data["colours"], "", lambda v: f"{v:g}")


# name -> (title for the page, drawing function)
FIGURES: dict[str, tuple[str, Callable[[dict[str, Any]], bytes]]] = {
    "gpus": ("GPUs in use by team", gpus_by_team),
    "spend": ("Spend by team", spend_by_team),
    "pending": ("Pending GPUs by team", pending_by_team),
}


def _bars(title: str, unit: str, labels: list[str], values: list[float], limits: list[float | None],
          colours: dict[str, str], limit_name: str, fmt: Callable[[float], str]) -> bytes:
    """Horizontal bars, one a team in its colour, each limit a black tick, each value written at its end."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=10, loc="left")
    if not labels:
        ax.text(0.5, 0.5, "nothing yet", ha="center", va="center", color="#777777", transform=ax.transAxes)
        ax.set_axis_off()
        return _png(fig)
    rows = range(len(labels))
    ax.barh(rows, values, color=[colours.get(label, "#888888") for label in labels], height=0.6)
    for row, value, limit in zip(rows, values, limits):
        ax.text(value, row, " " + fmt(value) + (f" of {fmt(limit)}" if limit is not None else ""),
                va="center", fontsize=8, parse_math=False)   # "$12.00" is money, not TeX
        if limit is not None:
            ax.plot([limit, limit], [row - 0.4, row + 0.4], color="black", linewidth=2)
    top = max([*values, *(v for v in limits if v is not None), 1])
    ax.set_xlim(0, top * 1.35)       # room for the figures written after each bar
    ax.set_yticks(list(rows), labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(unit + (f" (black tick: {limit_name})" if any(v is not None for v in limits) else ""),
                  fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return _png(fig)


def _png(fig) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()
