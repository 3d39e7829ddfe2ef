"""One frame of `gqa top`: an Overview (gqa.services.overview) laid out in a
terminal of a given size. Pure: the overview, the size and an error line
in, rich Text lines out, so the frame is tested at any width without a
terminal.

Every row is one line: columns a narrow terminal cannot hold are dropped,
least useful first, and the widest text (a name, a reason) is cut with an
ellipsis. The sections share the height: the GPUs, the teams and the
events take a bounded share and the queue's head what is left."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from gqa.models.job import user_status
from gqa.models.priority import Priority
from gqa.models.units import format_duration
from gqa.services.overview import Overview

from .output import budget_used, gpu_slots, money
from .queue_table import cells, cut, outside_text

GAP = 2                # spaces between columns
ERROR_LINES = 3        # an error is wrapped over at most this many lines
FLEX_MIN = 24          # a cut column (name, reason) keeps at least this much before others are dropped
STATUS_STYLE = {"running": "green", "starting": "cyan", "completed": "green", "failed": "red",
                "timed out": "red", "cancelled": "yellow", "rejected": "red", "held": "yellow",
                "retrying": "yellow", "awaiting approval": "magenta"}


@dataclass(frozen=True)
class Column:
    header: str
    keep: int                  # the higher, the later it is dropped
    right: bool = False        # numbers are right-aligned
    flex: bool = False         # may be cut to fit (the line's widest text)


Row = Sequence[str]


def frame(view: Overview | None, width: int, height: int | None, *, error: str | None = None,
          interval: float | None = None) -> list[Text]:
    """The frame's lines, at most `height` (None: every row the overview carries)."""
    lines = [_header(view, width, interval)]
    if error:   # what went wrong matters more than a row: up to ERROR_LINES lines of it
        wrapped = textwrap.wrap(f"! {error}", max(10, width), subsequent_indent="  ")
        lines += [_cut(Text(part, style="bold red"), width) for part in wrapped[:ERROR_LINES]]
    if view is None:
        return lines[:height] if height is not None else lines
    room = None if height is None else max(0, height - len(lines))
    sections = _sections(view)
    for title, columns, rows, styles, total in _fit_heights(sections, room):
        lines.append(_cut(Text(title, style="bold"), width))
        lines += _table(columns, rows, styles, width, total)
    return lines if height is None else lines[:height]


# -- the sections --------------------------------------------------------------------------------
Section = tuple[str, list[Column], list[Row], list[str], int]   # title, columns, rows, row styles, all rows


def _sections(view: Overview) -> list[Section]:
    now = view.at
    busy = len(view.gpus) - view.free_gpus
    gpu_cols = [Column("gpu", 10, right=True), Column("job", 9), Column("name", 8, flex=True), Column("team", 7),
                Column("elapsed", 6, right=True), Column("util", 6, right=True), Column("left", 5, right=True),
                Column("owner", 4), Column("mem", 3, right=True), Column("pool", 2), Column("type", 1)]
    gpu_rows: list[Row] = []
    gpu_styles: list[str] = []
    for index, pool, gpu_type, j in gpu_slots(view):
        if j is None:
            gpu_rows.append([str(index), "-", "free", "", "", "", "", "", "", pool, gpu_type])
            gpu_styles.append("dim")
            continue
        started = j.started_at is not None
        gpu_rows.append([str(index), j.id, j.name, j.team, format_duration(j.elapsed) if started else j.status,
                         _percent(j.gpu_util), format_duration(j.time_left) if j.time_left is not None else "-",
                         j.owner, _mib(j.gpu_memory), pool, gpu_type])
        gpu_styles.append("yellow" if pool == "outside" else "" if started else "cyan")
    outside = view.outside_gpus
    for j in view.running:    # jobs on CPUs alone hold no GPU row, and would be counted but never seen
        if not j.gpus:
            started = j.started_at is not None
            gpu_rows.append(["cpu", j.id, j.name, j.team, format_duration(j.elapsed) if started else j.status, "-",
                             format_duration(j.time_left) if j.time_left is not None else "-", j.owner, "-", "", ""])
            gpu_styles.append("" if started else "cyan")
    head_cols = [Column("pos", 10, right=True), Column("job", 9), Column("reason", 8, flex=True),
                 Column("name", 7), Column("team", 6), Column("gpus", 5, right=True), Column("waiting", 4, right=True),
                 Column("eta", 3, right=True), Column("owner", 2), Column("prio", 1)]
    head_rows: list[Row] = [[str(e.position or "-"), e.id, e.reason or e.status, e.name, e.team, str(e.gpus),
                             format_duration(now - e.submitted_at), _eta(e.eta, now), e.owner,
                             Priority.of_rank(e.tier).value] for e in view.head]
    head_styles = ["" if e.position is not None else STATUS_STYLE.get(e.status, "") for e in view.head]
    team_cols = [Column("team", 10), Column("gpus", 9, right=True), Column("spend", 8, right=True),
                 Column("budget", 7, right=True), Column("used", 6, right=True)]
    team_rows: list[Row] = []
    team_styles: list[str] = []
    for t in view.teams:
        used, level = budget_used(t.spend, t.budget)
        team_rows.append([t.team, f"{t.gpus_held}/{'-' if t.max_gpus is None else t.max_gpus}", money(t.spend),
                          "-" if t.budget is None else money(t.budget), used])
        full = t.max_gpus is not None and t.gpus_held >= t.max_gpus
        team_styles.append("red" if level == "over" else "yellow" if full or level == "near" else "")
    event_cols = [Column("time", 10), Column("job", 9), Column("status", 8), Column("reason", 7, flex=True),
                  Column("name", 6)]
    event_rows: list[Row] = [[time.strftime("%H:%M:%S", time.localtime(e.at)), e.job_id,
                              user_status(e.state).value, e.reason, e.name]
                             for e in view.events]
    event_styles = [STATUS_STYLE.get(r[2], "") for r in event_rows]
    shown = f" (next {len(view.head)})" if len(view.head) < view.pending else ""
    return [
        (f"GPUs  {busy} of {len(view.gpus)} busy, {_count(len(view.running), 'job')} running"
         + (f"; {outside_text(len(outside))}" if outside else ""), gpu_cols, gpu_rows, gpu_styles, len(gpu_rows)),
        (f"pending  {view.pending}{shown}", head_cols, head_rows, head_styles, view.pending),
        (f"teams  {view.period}", team_cols, team_rows, team_styles, len(team_rows)),
        ("events", event_cols, event_rows, event_styles, len(event_rows)),
    ]


def _fit_heights(sections: list[Section], room: int | None) -> list[Section]:
    """Each section cut to the rows that fit: GPUs up to a third of the room,
    teams and events up to a sixth each, the queue's head the rest; a section
    cut short ends in a "… N more" row. None: nothing is cut."""
    if room is None:
        return sections
    gpus, head, teams, events = sections
    overhead = 2 * len(sections)                 # a title and a column header each
    rows = max(0, room - overhead)
    want = {"gpus": len(gpus[2]), "teams": len(teams[2]), "events": len(events[2])}
    share = {"gpus": max(2, rows // 3), "teams": max(1, rows // 6), "events": max(1, rows // 6)}
    given = {k: min(want[k], share[k]) for k in want}
    left = rows - sum(given.values())
    head_rows = min(len(head[2]) + (1 if head[4] > len(head[2]) else 0), max(0, left))
    spare = left - head_rows
    for k in ("gpus", "events", "teams"):        # what the head leaves goes back to the others
        more = min(spare, want[k] - given[k])
        given[k] += more
        spare -= more
    cut = [_rows(gpus, given["gpus"]), _rows(head, head_rows), _rows(teams, given["teams"]),
           _rows(events, given["events"])]
    return [s for s in cut if room >= overhead or s[2]]


def _rows(section: Section, most: int) -> Section:
    title, columns, rows, styles, total = section
    if total <= most and len(rows) <= most:
        return section
    kept = max(0, most - 1)                      # the last line says how many are not shown
    return title, columns, list(rows[:kept]), list(styles[:kept]), total


# -- laying out a table ----------------------------------------------------------------------------
def _table(columns: list[Column], rows: list[Row], styles: list[str], width: int, total: int) -> list[Text]:
    kept = _columns_that_fit(columns, rows, width)
    widths = _widths(columns, rows, kept, width)
    lines = [_line([columns[i].header for i in kept], [columns[i] for i in kept], widths, "bold dim")]
    lines += [_line([row[i] for i in kept], [columns[i] for i in kept], widths, style)
              for row, style in zip(rows, styles)]
    if total > len(rows):
        lines.append(Text(f"… {total - len(rows)} more", style="dim"))
    return [_cut(line, width) for line in lines]


def _natural(columns: list[Column], rows: list[Row], i: int) -> int:
    """A column's widest cell in terminal cells (a CJK name takes two a character)."""
    return max([len(columns[i].header)] + [cells(r[i]) for r in rows])


def _columns_that_fit(columns: list[Column], rows: list[Row], width: int) -> list[int]:
    kept = list(range(len(columns)))
    while len(kept) > 1:
        need = sum(min(_natural(columns, rows, i), FLEX_MIN) if columns[i].flex else _natural(columns, rows, i)
                   for i in kept) + GAP * (len(kept) - 1)
        if need <= width:
            break
        kept.remove(min(kept, key=lambda i: columns[i].keep))
    return kept


def _widths(columns: list[Column], rows: list[Row], kept: list[int], width: int) -> dict[int, int]:
    widths = {i: _natural(columns, rows, i) for i in kept}
    flex = [i for i in kept if columns[i].flex]
    fixed = sum(w for i, w in widths.items() if i not in flex) + GAP * (len(kept) - 1)
    for i in flex:       # one flexible column a table: it takes what the others leave
        widths[i] = max(1, min(widths[i], width - fixed))
    return widths


def _line(row: list[str], columns: list[Column], widths: dict[int, int], style: str) -> Text:
    parts = []
    for cell, column, w in zip(row, columns, widths.values()):
        cell = cut(cell, max(1, w))
        gap = " " * max(0, w - cells(cell))
        parts.append(gap + cell if column.right else cell + gap)
    return Text((" " * GAP).join(parts).rstrip(), style=style)


def _cut(line: Text, width: int) -> Text:
    if line.cell_len > width:
        line = line.copy()
        line.truncate(width, overflow="ellipsis")
    return line


# -- cells --------------------------------------------------------------------------------------------
def _header(view: Overview | None, width: int, interval: float | None) -> Text:
    at = time.strftime("%H:%M:%S", time.localtime(view.at)) if view else "--:--:--"
    every = f"every {interval:g}s, " if interval else ""
    return _cut(Text(f"gqa top  {at}  ({every}q quits)", style="bold reverse"), width)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _mib(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.1f}G" if value >= 1024 else f"{value:.0f}M"


def _eta(eta: float | None, now: float) -> str:
    if eta is None:
        return "-"
    return "now" if eta - now <= 1 else f"in {format_duration(eta - now)}"
