"""Dependencies between jobs, in Slurm's --dependency syntax:

    afterok:12:13        after 12 and 13 both succeed
    afterany:12          after 12 ends, however it ends
    afternotok:12        after 12 fails (a failure, a timeout, a cancel)
    after:12             after 12 has started (or ended)
    singleton            after every earlier job of the same name and owner ends
    afterok:12,afterany:14   every condition (`,` is AND)
    afterok:12?afterok:13    any one condition (`?` is OR)

A job id names one job, one array task (`12_3`) or a whole array (`12`, all
its tasks). Slurm's `+time` delay after a condition is not supported: it is
refused, never ignored. Pure: whether a condition holds is decided in
scheduling/dependencies.py from the states of the jobs named."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .errors import SpecError

KINDS = ("after", "afterok", "afternotok", "afterany", "singleton")
# how the kinds read in an explanation: "waits for job 12 to succeed"
VERB = {"after": "start", "afterok": "succeed", "afternotok": "fail", "afterany": "end"}
_JOB_RE = re.compile(r"^[0-9]{1,18}(_[0-9]{1,18})?$")
MAX_TERMS = 100   # job ids in one dependency: a chain, not a database


@dataclass(frozen=True)
class Condition:
    kind: str                     # one of KINDS
    jobs: tuple[str, ...] = ()    # empty for singleton


@dataclass(frozen=True)
class Dependency:
    conditions: tuple[Condition, ...]
    any_of: bool = False          # `?`: one condition suffices; `,`: all must hold

    @property
    def jobs(self) -> tuple[str, ...]:
        """Every job id the dependency names, in order, once each."""
        return tuple(dict.fromkeys(j for c in self.conditions for j in c.jobs))

    @property
    def singleton(self) -> bool:
        return any(c.kind == "singleton" for c in self.conditions)

    def text(self) -> str:
        """The canonical form: what the spec and the records keep."""
        sep = "?" if self.any_of else ","
        return sep.join(c.kind if c.kind == "singleton" else ":".join((c.kind,) + c.jobs) for c in self.conditions)


def parse_dependency(text: str) -> Dependency:
    """Slurm's --dependency value, checked; SpecError names what is wrong."""
    body = str(text).strip()
    if not body:
        raise SpecError("dependency is empty")
    if "," in body and "?" in body:
        raise SpecError(f"dependency {body!r} mixes ',' (all) and '?' (any): Slurm allows one or the other")
    any_of = "?" in body
    conditions = []
    for part in body.split("?" if any_of else ","):
        kind, _, rest = part.strip().partition(":")
        kind = kind.strip().lower()
        if kind not in KINDS:
            hint = " (aftercorr and aftersomething are not supported)" if kind.startswith("after") else ""
            raise SpecError(f"unknown dependency type {kind!r}{hint}: use {', '.join(KINDS)}")
        if kind == "singleton":
            if rest:
                raise SpecError("singleton takes no job ids")
            conditions.append(Condition(kind))
            continue
        jobs = tuple(j.strip() for j in rest.split(":")) if rest else ()
        if not jobs:
            raise SpecError(f"{kind} needs at least one job id: {kind}:12")
        for job in jobs:
            if "+" in job:
                raise SpecError(f"{kind}:{job}: a delay after a dependency (+minutes) is not supported")
            if not _JOB_RE.match(job):
                raise SpecError(f"{job!r} is not a job id: use 12, or 12_3 for one task of array 12")
        conditions.append(Condition(kind, jobs))
    dependency = Dependency(tuple(conditions), any_of)
    if len(dependency.jobs) > MAX_TERMS:
        raise SpecError(f"dependency names {len(dependency.jobs)} jobs; at most {MAX_TERMS}")
    return dependency


@lru_cache(maxsize=1 << 16)
def parsed(text: str) -> Dependency:
    """parse_dependency, kept for texts read again and again: every pass reads each waiting job's
    dependency (the jobs it names, then its verdict), and its text never changes (a Dependency is
    frozen). A text that does not parse is not kept: each read raises its SpecError again."""
    return parse_dependency(text)


def after_flag(value: str) -> str:
    """`gqa submit --after ID[:ok|notok|any|start]`, repeatable, as one dependency term."""
    job, _, how = str(value).strip().partition(":")
    kind = {"": "afterok", "ok": "afterok", "notok": "afternotok", "any": "afterany", "start": "after"}.get(how)
    if kind is None:
        raise SpecError(f"--after {value}: use ID, ID:ok, ID:notok, ID:any or ID:start")
    return f"{kind}:{job}"
