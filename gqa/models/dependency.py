"""Dependencies between jobs, in Slurm's --dependency syntax:

    afterok:12:13        after 12 and 13 both succeed
    afterany:12          after 12 ends, however it ends
    afternotok:12        after 12 fails (a failure, a timeout, a cancel)
    after:12             after 12 has started (or ended)
    after:12+10          10 minutes after 12 started (or was cancelled)
    aftercorr:12         each task after the task of array 12 with its index succeeds
    singleton            after every earlier job of the same name and owner ends
    afterok:12,afterany:14   every condition (`,` is AND)
    afterok:12?afterok:13    any one condition (`?` is OR)

A job id names one job, one array task (`12_3`) or a whole array (`12`, all
its tasks). A `+minutes` delay counts from a job's start (or its cancel) for
`after`; Slurm takes it after the other kinds too and waits no longer for it,
and so does gqa (it is kept in the text). Pure: whether a condition holds is decided in
scheduling/dependencies.py from the states of the jobs named."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .errors import SpecError

KINDS = ("after", "afterok", "afternotok", "afterany", "aftercorr", "singleton")
# how the kinds read in an explanation: "waits for job 12 to succeed"
VERB = {"after": "start", "afterok": "succeed", "afternotok": "fail", "afterany": "end", "aftercorr": "succeed"}
_JOB_RE = re.compile(r"^[0-9]{1,18}(_[0-9]{1,18})?$")
_DELAY_RE = re.compile(r"^[0-9]{1,7}$")   # whole minutes: 9,999,999 is 19 years
MAX_TERMS = 100   # job ids in one dependency: a chain, not a database


@dataclass(frozen=True)
class Condition:
    kind: str                     # one of KINDS
    jobs: tuple[str, ...] = ()    # empty for singleton
    delays: tuple[int, ...] = ()  # minutes after each job (`+10`), 0 for none; empty where none has one

    def delay(self, index: int) -> int:
        """Minutes after the job at `index` that an `after` waits (0: none; the other kinds wait none)."""
        return self.delays[index] if self.kind == "after" and self.delays else 0

    def text(self) -> str:
        if self.kind == "singleton":
            return self.kind
        delays = self.delays or (0,) * len(self.jobs)
        return ":".join((self.kind,) + tuple(f"{j}+{d}" if d else j for j, d in zip(self.jobs, delays)))


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

    @property
    def corresponding(self) -> bool:
        """Whether an aftercorr reads, for each task, the task of its index (see `named_by`)."""
        return any(c.kind == "aftercorr" for c in self.conditions)

    @property
    def delayed(self) -> tuple[str, ...]:
        """The job ids an `after` waits some minutes past: the pass reads when they started."""
        return tuple(dict.fromkeys(j for c in self.conditions for i, j in enumerate(c.jobs) if c.delay(i)))

    def named_by(self, job_id: str) -> tuple[str, ...]:
        """Every job id the dependency of job `job_id` reads: `jobs`, and for an aftercorr from a
        task, the task of the same index in the array it names (`12_3` for task 3)."""
        extra = (counterpart(j, job_id) for c in self.conditions if c.kind == "aftercorr" for j in c.jobs)
        return tuple(dict.fromkeys(self.jobs + tuple(j for j in extra if j is not None)))

    def text(self) -> str:
        """The canonical form: what the spec and the records keep."""
        return ("?" if self.any_of else ",").join(c.text() for c in self.conditions)


def counterpart(ref: str, job_id: str) -> str | None:
    """The task of array `ref` an aftercorr from `job_id` waits for: the one of the same index;
    None where `job_id` is no task or `ref` names one task (then the whole of `ref` is waited for)."""
    index = job_id.partition("_")[2]
    return f"{ref}_{index}" if index and "_" not in ref else None


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
            hint = " (aftersomething is not supported)" if kind.startswith("after") else ""
            raise SpecError(f"unknown dependency type {kind!r}{hint}: use {', '.join(KINDS)}")
        if kind == "singleton":
            if rest:
                raise SpecError("singleton takes no job ids")
            conditions.append(Condition(kind))
            continue
        terms = [j.strip() for j in rest.split(":")] if rest else []
        if not terms:
            raise SpecError(f"{kind} needs at least one job id: {kind}:12")
        jobs, delays = [], []
        for term in terms:
            job, plus, minutes = term.partition("+")
            job, minutes = job.strip(), minutes.strip()
            if plus and not (_DELAY_RE.match(minutes) and int(minutes) > 0):
                raise SpecError(f"{kind}:{term}: a delay is whole minutes, 1 or more: after:12+10 "
                                "(Slurm refuses it too)")
            if not _JOB_RE.match(job):
                raise SpecError(f"{job!r} is not a job id: use 12, or 12_3 for one task of array 12")
            jobs.append(job)
            delays.append(int(minutes) if plus else 0)
        conditions.append(Condition(kind, tuple(jobs), tuple(delays) if any(delays) else ()))
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
