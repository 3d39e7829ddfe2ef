"""Every process an attempt starts ends with the attempt.

A process group is not enough: anything a job starts with setsid, setpgid or
a double fork leaves it and would outlive the job while its GPU goes to the
next one. Each attempt gets a *cell*, and kill(cell) reaches every process
in it, wherever it moved:

- `CgroupContainment`: the cell is a cgroup v2 directory. The launcher's
  wrapper writes its own pid into `$GQA_CGROUP_PROCS` before anything else
  (or the daemon calls place()), every descendant is born inside and cannot
  leave without privilege; kill() writes `cgroup.kill` (or freezes and
  SIGKILLs what `cgroup.procs` lists, before Linux 5.14). Memory and CPU
  limits are enforced when those controllers can be enabled.
- `SubreaperContainment`: no writable cgroup v2. The daemon becomes a child
  subreaper, so orphans of a job re-parent to it instead of init, and every
  process of a cell inherits the marker `GQA_CELL=<name>.<token>` in its
  environment; kill() finds the marked processes among the daemon's
  descendants (or, for a cell of an earlier daemon, in all of /proc). A
  process that clears its environment after its parent died escapes it.

Both put the marker in Cell.env, so the cgroup kind can fall back to it for a
cell whose directory is gone (a daemon restarted from another cgroup).
choose_containment() picks one at the daemon's start."""

from __future__ import annotations

from pathlib import Path

from ..paths import StatePaths
from .cells import CELL_VAR, PROCS_VAR, Cell, Containment, cell_name, instance_token
from .cgroup import CgroupContainment, _cgroup_containment, cgroup2_mount, favours_dynamic_changes, own_cgroup
from .subreaper import SubreaperContainment

__all__ = ["CELL_VAR", "PROCS_VAR", "Cell", "Containment", "CgroupContainment", "SubreaperContainment",
           "cell_name", "cgroup2_mount", "choose_containment", "favours_dynamic_changes", "instance_token",
           "own_cgroup"]


def choose_containment(root_hint: str | Path | None = None, *, allow_cgroup: bool = True,
                       instance: str | None = None) -> Containment:
    """A cgroup v2 containment when we can create cgroups, else the subreaper.

    root_hint: the cgroup v2 directory whose children will be the cells
    (created if missing); by default `gqa-<token>` inside the daemon's own
    cgroup. instance: what identifies this queue, see instance_token(); the
    daemon passes its GQA_HOME (by default the one in the environment: two
    daemons that share an instance would kill each other's jobs "1.1").
    When the memory and cpu controllers are available but not enabled, the
    daemon may move itself into a leaf `gqa-daemon` of its own cgroup so
    they can be (cgroup v2 allows no processes beside enabled children)."""
    if instance is None:
        instance = str(StatePaths.from_env().home)
    reason = "cgroups not allowed"
    if allow_cgroup:
        try:
            return _cgroup_containment(root_hint, instance)
        except OSError as exc:
            reason = f"no writable cgroup v2: {exc.strerror or exc}"
    return SubreaperContainment(instance=instance, reason=reason)

