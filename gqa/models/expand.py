"""Arrays and sweeps: one submission, many jobs."""

import itertools
import shlex

from .array_syntax import parse_array
from .errors import SpecError
from .limits import MAX_TASKS
from .slurm_env import array_env
from .spec import JobSpec, sweep_size

__all__ = ["MAX_TASKS", "array_limit", "expand", "index_runs", "largest_task", "parse_array", "run_indices"]


def expand(spec: JobSpec) -> list[tuple[JobSpec, int | None, dict[str, str]]]:
    """The concrete jobs of one submission: (spec, array index, extra env).
    A task's extra env holds its index and its array's span (Slurm's
    SLURM_ARRAY_TASK_MIN, _MAX, _COUNT, _STEP), which it could not learn
    otherwise: its spec no longer holds the array."""
    if spec.array is not None:
        indices, _ = parse_array(spec.array)
        base = spec.model_copy(update={"array": None})
        span = array_env(indices)
        return [(base, i, {"GQA_ARRAY_INDEX": str(i), **span}) for i in indices]
    if spec.sweep is not None:
        keys = list(spec.sweep.grid)
        tasks = sweep_size(spec.sweep.grid)   # validation checked it; a constructed spec was not validated
        if tasks > MAX_TASKS:
            raise SpecError(f"sweep has {tasks} combinations; at most {MAX_TASKS}")
        jobs: list[tuple[JobSpec, int | None, dict[str, str]]] = []
        span = array_env(range(tasks))
        for i, combo in enumerate(itertools.product(*(spec.sweep.grid[k] for k in keys))):
            values = {k: _text(v) for k, v in zip(keys, combo)}
            jobs.append((_with_values(spec, spec.sweep.pass_as, values), i, {"GQA_ARRAY_INDEX": str(i), **span}))
        return jobs
    return [(spec, None, {})]


def largest_task(spec: JobSpec) -> JobSpec:
    """The task of a sweep whose values take the most room in its command, environment and tags:
    each key's longest value (the grid holds that combination); any other spec as it is."""
    if spec.sweep is None or not spec.sweep.grid:
        return spec
    values = {k: max((_text(v) for v in vs), key=lambda t: len(t.encode()), default="")
              for k, vs in spec.sweep.grid.items()}
    return _with_values(spec, spec.sweep.pass_as, values)


def array_limit(spec: JobSpec) -> int | None:
    return parse_array(spec.array)[1] if spec.array is not None else None


def _with_values(spec: JobSpec, pass_as: str, values: dict[str, str]) -> JobSpec:
    tags = dict(spec.tags) | {f"sweep.{k}": v for k, v in values.items()}
    if pass_as == "env":
        env = dict(spec.env) | values
        return spec.model_copy(update={"sweep": None, "env": env, "tags": tags})
    flags = [f"--{k}={v}" for k, v in values.items()]
    if isinstance(spec.command, str) or spec.shell:
        command = spec.command if isinstance(spec.command, str) else spec.command[0]
        command = command + " " + " ".join(shlex.quote(f) for f in flags)
        return spec.model_copy(update={"sweep": None, "command": command, "tags": tags})
    return spec.model_copy(update={"sweep": None, "command": list(spec.command) + flags, "tags": tags})


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def index_runs(indices: list[int]) -> list[list[int]]:
    """Array indices, in order, as runs [first, last, step]: 0..99999 is one
    run, so a submission's ids travel in a few bytes however many there are."""
    runs: list[list[int]] = []
    for index in indices:
        last = runs[-1] if runs else None
        if last is not None and last[0] == last[1] and index > last[1]:
            last[1], last[2] = index, index - last[0]          # a run's second index sets its step
        elif last is not None and index == last[1] + last[2] and last[0] != last[1]:
            last[1] = index
        else:
            runs.append([index, index, 1])
    return runs


def run_indices(runs: list[list[int]] | tuple[tuple[int, int, int], ...]) -> list[int]:
    """index_runs's answer back into the indices."""
    return [i for first, last, step in runs for i in range(first, last + 1, step)]
