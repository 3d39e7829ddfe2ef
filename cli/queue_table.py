"""The queue's listing and its tables as plain text, for `gqa queue` and
`gqa status` alike: the listing the local daemon keeps while it is current,
else worked out; an array's pending tasks alike (one state, one reason) as
one row `34_[28-499]`, as squeue shows them; columns laid out for the
terminal's width: the reason folds onto more lines, long names are cut, and
at narrow widths the least important columns go first. Plain text, not
rich's tables: 10,000 rows print in milliseconds."""

from __future__ import annotations

import re
import shutil
import textwrap
import unicodedata
from dataclasses import dataclass, field


_MAYBE_WIDE = re.compile("[\u0300-\U0010ffff]")   # below U+0300 every character is one cell
REASON_MIN = 20          # the reason column's least width before columns are dropped for it
NAME_MAX, ID_MAX = 12, 18


@dataclass
class Column:
    name: str
    keep: int = 9           # dropped lowest first when the line does not fit; 9: never
    most: int | None = None  # longer cells are cut with "…"; None: never cut (the last column folds)
    right: bool = False


@dataclass
class Row:
    """One pending job, or an array's pending tasks alike, in the order of the first of them;
    its entries are the queue listing's rows (gqa/http/queue_listing.py)."""

    entries: list = field(default_factory=list)

    @property
    def first(self) -> dict:
        return self.entries[0]

    @property
    def id(self) -> str:
        """Slurm's spelling, `34_[3,5,7-9]`; when that is long, gqa's --array steps, `34_[0-98:2]`."""
        if len(self.entries) == 1:
            return self.first["id"]
        group = self.first["group"]
        indices = sorted(e["index"] for e in self.entries)
        slurm = f"{group}_[{','.join(f'{a}' if a == b else f'{a}-{b}' for a, b in _spans(indices))}]"
        if len(slurm) <= ID_MAX:
            return slurm
        from gqa.models.expand import index_runs

        runs = [f"{a}" if a == b else f"{a},{b}" if a + c == b and c > 1 else f"{a}-{b}" + (f":{c}" if c > 1 else "")
                for a, b, c in index_runs(indices)]
        stepped = f"{group}_[{','.join(runs)}]"
        return stepped if len(stepped) < len(slurm) else slurm


def _spans(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted numbers as runs of neighbours: [3, 5, 7, 8, 9] -> (3, 3), (5, 5), (7, 9)."""
    spans: list[list[int]] = []
    for n in indices:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return [(a, b) for a, b in spans]


def collapse(entries: list) -> list[Row]:
    """Pending tasks of one array that share what a row shows (state, reason, tier, GPUs, time
    limit) become one row, placed where the first of them is; everything else is a row of its
    own. A reason that names its own task ("gqa release 12_3") is alike for every task."""
    rows: list[Row] = []
    alike: dict[tuple, Row] = {}
    for entry in entries:
        if entry["index"] is None:
            rows.append(Row([entry]))
            continue
        key = (entry["group"], entry["state"], own_id(entry["reason"], entry["id"], "{task}"), entry.get("back_at"),
               entry["tier"], entry["gpus"], entry.get("gpu_type"), entry["time_limit"])
        row = alike.get(key)
        if row is None:
            row = alike[key] = Row([])
            rows.append(row)
        row.entries.append(entry)
    return rows


def own_id(reason: str, job_id: str, instead: str) -> str:
    """The reason with the job's own id (a whole word) as `instead`: a collapsed row names its group."""
    return re.sub(rf"(?<![\w]){re.escape(job_id)}(?![\w])", instead, reason) if job_id in reason else reason


class Memo(dict):
    """f(x), computed once per x."""

    def __init__(self, f):
        super().__init__()
        self.f = f

    def __missing__(self, key):
        value = self[key] = self.f(key)
        return value


def eta_text(eta: float | None, now: float | None = None) -> str:
    """A predicted start as `gqa queue` and `gqa status` show it: "now", "in 1h02m", or "-" (not told)."""
    from gqa.models.units import format_duration

    from .output import now as clock

    if eta is None:
        return "-"
    wait = eta - (clock() if now is None else now)
    return "now" if wait <= 1 else f"in {format_duration(wait)}"


STARTING_NOW = "starting now"    # the reason a pass gives a job it starts (gqa/services/queries.py)
WOULD_START = "would start now: the queue's daemon is not running (`gqa local start`)"


def without_daemon(pending: list[dict]) -> list[dict]:
    """Pending rows as they stand while the local daemon is down: the pass's "starting now" is
    only what it would do, and no start is predicted for those jobs, since none starts until it runs."""
    return [dict(row, reason=WOULD_START, eta=None) if row["reason"] == STARTING_NOW else row for row in pending]


def outside_text(outside: int) -> str:
    """GPUs held beyond the queue's own: a daemon restarted with fewer GPUs adopts the
    jobs still running on the others, which hold them until they end."""
    return f"{outside} more held by jobs started before the queue shrank"


def width() -> int:
    """COLUMNS, else the terminal's, else 80 (a pipe)."""
    return shutil.get_terminal_size((80, 24)).columns


def cells(text: str) -> int:
    """The terminal cells a text takes: East Asian wide and full-width characters two, combining marks none."""
    if text.isascii():
        return len(text)
    # only characters from U+0300 on (combining marks, wide ones) can be other than one cell
    return len(text) + sum(-1 if unicodedata.combining(c) else 1 if unicodedata.east_asian_width(c) in "WF" else 0
                           for c in _MAYBE_WIDE.findall(text))


def cut(text: str, most: int | None) -> str:
    if most is None or len(text) <= most and (text.isascii() or cells(text) <= most):
        return text
    if text.isascii():
        return text[: most - 1] + "…"
    kept, used = [], 0
    for c in text:
        used += cells(c)
        if used > most - 1:
            break
        kept.append(c)
    return "".join(kept) + "…"


def _pad(text: str, width: int, right: bool) -> str:
    gap = " " * max(0, width - cells(text))
    return gap + text if right else text + gap


def cut_ids(text: str, most: int) -> str:
    """A collapsed id's brackets, shortened at a comma: `34_[3,5,7-9,…]`."""
    if len(text) <= most or not text.endswith("]"):
        return cut(text, most)
    head = text[: most - 2]
    return head[: head.rfind(",") + 1] + "…]" if "," in head else cut(text, most)


def layout(columns: list[Column], rows: list[list[str]], total: int) -> list[str]:
    """The lines of a table `total` characters wide at most: the last column folds."""
    # a column at a time (zip and map run in C): 10,000 rows lay out in tens of milliseconds
    by_column = [list(c) for c in zip(*rows)] if rows else [[] for _ in columns]
    # widths in terminal cells: a column of ASCII (nearly every one) measured by len, in C
    measure = [len if all(map(str.isascii, cells_of)) else cells for cells_of in by_column]
    for col, cells_of, size in zip(columns, by_column, measure):
        if col.most is not None and max(map(size, cells_of), default=0) > col.most:
            cells_of[:] = [cut(c, col.most) for c in cells_of]
    table = list(zip(*by_column))
    # each column's width once: dropping one leaves the others' as they are
    full = [max(len(col.name), max(map(size, cells_of), default=0))
            for col, cells_of, size in zip(columns, by_column, measure)]
    wide = {i for i, size in enumerate(measure) if size is cells}
    shown = list(range(len(columns)))
    while True:
        w = [full[i] for i in shown]
        fixed = sum(w[:-1]) + 2 * (len(shown) - 1)
        droppable = [i for i in shown[:-1] if columns[i].keep < 9]
        if total - fixed >= min(REASON_MIN, w[-1]) or not droppable:
            break
        shown.remove(min(droppable, key=lambda i: (columns[i].keep, -i)))
    last = max(8, min(w[-1], total - fixed))
    # one format string for the columns before the last: one call a row
    template = "".join(f"{{{i}:{'>' if columns[i].right else '<'}{width_}}}  " for i, width_ in zip(shown[:-1], w[:-1]))
    padded = wide.intersection(shown[:-1])
    lines = []
    for row in [[col.name.upper() for col in columns]] + table:
        if padded and not all(row[i].isascii() for i in padded):   # format() pads by characters, not cells
            head = "".join(_pad(row[i], width_, columns[i].right) + "  " for i, width_ in zip(shown[:-1], w[:-1]))
        else:
            head = template.format(*row)
        text = row[shown[-1]]
        if (len(text) <= last and (text.isascii() or cells(text) <= last) and text.isprintable()
                and text == text.strip()):   # fits as it is: most rows
            lines.append((head + text).rstrip())
            continue
        folded = textwrap.wrap(text, last, break_long_words=True, break_on_hyphens=False) or [""]
        lines.append((head + folded[0]).rstrip())
        lines += [(" " * cells(head) + more).rstrip() for more in folded[1:]]
    return lines


def queue_listing(be, group: str | None) -> dict:
    """The queue as one listing (gqa/http/queue_listing.py): the one the local daemon
    keeps, while it is current; else computed here (or by the daemon or the API)."""
    from gqa.http.queue_listing import listing_of

    from .local_backend import LocalBackend

    if isinstance(be, LocalBackend):
        kept = be.kept_queue(group)
        if kept is not None:
            return kept
    return listing_of(be.queries().queue(group=group))
