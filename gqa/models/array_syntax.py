"""Slurm's --array syntax (`0-499`, `1,3,5`, `0-9:2`, `%N`): read by the spec's
validation and by the expansion into jobs alike."""

import re

from .errors import SpecError
from .limits import MAX_ARRAY_INDEX, MAX_TASKS, count_text
from .units import shown

_LIMIT_RE = re.compile(r"[0-9]{1,18}")


def parse_array(text: str) -> tuple[list[int], int | None]:
    """Slurm's --array syntax: `0-499`, `1,3,5`, `0-9:2`, with an optional `%N`
    limit on tasks running at once. Returns (indices, limit). The tasks are
    counted from the ranges before any index is listed."""
    body, percent, limit_text = str(text).strip().partition("%")
    limit = None
    if percent:
        if not _LIMIT_RE.fullmatch(limit_text) or int(limit_text) < 1:
            raise SpecError(f"invalid array limit {_shown('%' + limit_text)}: use %N with N >= 1")
        limit = min(int(limit_text), MAX_TASKS)    # more at once than an array holds is no limit
    ranges: list[tuple[int, int, int]] = []
    for part in body.split(","):
        part = part.strip()
        rng, _, step_text = part.partition(":")
        lo_text, dash, hi_text = rng.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
            step = int(step_text) if step_text else 1
        except ValueError:
            raise SpecError(f"invalid array {_shown(text)}: use e.g. 0-499, 1,3,5 or 0-9:2") from None
        if lo < 0 or hi < lo or step < 1:
            raise SpecError(f"invalid array range {_shown(part)}: need 0 <= start <= end and step >= 1")
        ranges.append((lo, hi, step))
    tasks = sum((hi - lo) // step + 1 for lo, hi, step in ranges)   # counted: nothing is listed yet
    if tasks > MAX_TASKS:
        raise SpecError(f"array {_shown(text)} has {count_text(tasks)} tasks; at most {MAX_TASKS}")
    highest = max(hi for _, hi, _ in ranges)
    if highest > MAX_ARRAY_INDEX:
        raise SpecError(f"array {_shown(text)}: index {count_text(highest)} is past {MAX_ARRAY_INDEX:,}, "
                        "the largest Slurm takes")
    indices = [i for lo, hi, step in ranges for i in range(lo, hi + 1, step)]
    if len(set(indices)) != len(indices):
        raise SpecError(f"array {_shown(text)} repeats an index")
    return indices, limit


def index_ranges(indices: list[int], most: int = 6) -> str:
    """An array's indices as runs: `0-5`, `1,3,5-9`; past `most` runs, the
    first ones and how many indices more (`0,2,4,6,8,10, ... (+40)`)."""
    runs: list[list[int]] = []
    for n in sorted(set(indices)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    shown = ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs[:most])
    if len(runs) > most:
        shown += f", ... (+{sum(hi - lo + 1 for lo, hi in runs[most:])})"
    return shown


def _shown(text: object) -> str:
    """repr, cut short: an array may be a megabyte of indices."""
    return shown(str(text), 60)
