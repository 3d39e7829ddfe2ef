"""Triggers: add, list and remove them, count the objects that land under
them into bursts, and submit one job per burst when its window closes.

The rules are in gqa.models.trigger (matching, validation) and
gqa.models.burst (what an object does to a burst, the job's environment);
this wires them to the store, the timer, the manifests and the intake.

Exactly once, step by step:
- an object event is counted once per trigger: the store writes the event's
  marker and the burst in one transaction (a redelivered event finds its marker);
- a burst's first object schedules the timer before opening the burst, so a
  burst never waits without one (a timer for a burst that lost the race to
  open finds nothing to close);
- a burst is closed once (the store's guarded close); its job goes through
  SubmitService.accept, which reserves job ids, and the submission is kept on
  the closed burst before it is sent: a timer redelivered after a crash sends
  that same submission again, and admission writes a reserved id only once.

A trigger's job runs the code its owner added it with (`code: sha256:...`,
the bundle `gqa trigger add` uploads): adding it keeps a copy of the bundle
for the trigger's life (ports.TriggerCode), each burst makes the bundle ready
where its job fetches it before submitting, and removing the trigger deletes
the copy. A burst whose bundle is nowhere is dropped with the reason, rather
than submitting a job that fails at every attempt.

The owner's rights are judged when a burst closes, not only when the trigger
was added: the owner is rebuilt from the ARN the API verified, under the
access settings and team members now (access.AccessPolicy, teams.for_team,
as an API submission is), so an owner who has left the job's team, or lost
the admin role it ran under, submits nothing more: the burst is dropped with
the reason."""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..models.burst import (REMEMBER_BURSTS, REMEMBER_EVENTS, StepKind, job_environment,
                            manifest_name, manifest_text, needs_manifest, open_burst, plan)
from ..models.errors import BackendUnavailable, Conflict, NotFound, NotPermitted, Rejected, SpecError
from ..models.job import JobRecord
from ..models.loader import validate_json
from ..models.spec import JobSpec
from ..models.trigger import S3Object, Trigger, TriggerPlaces, check_debounce, check_pattern
from ..ports import BurstTimer, Clock, Intake, Manifests, Submission, TriggerCode, TriggerStore
from .access import AccessPolicy, Principal
from .teams import Members, for_team

List = builtins.list


@dataclass(frozen=True)
class Counted:
    """What one object did to one trigger's burst; `kind` None: the event was counted before,
    or, with `ignored` saying why, the trigger may no longer watch where it does."""

    trigger_id: str
    burst_id: str
    kind: StepKind | None
    ignored: str = ""


@dataclass(frozen=True)
class Closed:
    """What closing a burst did: submitted | already submitted | dropped | nothing to close."""

    action: str
    trigger_id: str
    burst_id: str
    count: int = 0
    jobs: tuple[str, ...] = ()
    manifest: str | None = None
    reason: str = ""
    not_permitted: bool = False     # dropped: its owner may no longer submit its job for the job's team


class Accepts(Protocol):
    """The API's half of a submission (SubmitService.accept): check, reserve ids, send to `intake`."""

    def accept(self, spec: JobSpec, *, owner: str, environment: dict[str, str] | None = None,
               intake: Intake | None = None) -> List[JobRecord]: ...


class _Holding:
    """The intake as accept() sees it: the submission, with its reserved ids, is kept on the closed
    burst before it is sent, so a retry after a crash sends the same ids instead of reserving new ones."""

    def __init__(self, store: TriggerStore, intake: Intake, trigger_id: str, burst_id: str):
        self.store, self.intake, self.trigger_id, self.burst_id = store, intake, trigger_id, burst_id

    def send(self, submission: Submission) -> None:
        self.intake.send(self.store.hold_submission(self.trigger_id, self.burst_id, submission))

    def wake_dispatcher(self) -> None:
        self.intake.wake_dispatcher()


def _new_id() -> str:
    return secrets.token_hex(6)


class TriggerService:
    def __init__(self, store: TriggerStore, clock: Clock, *, timer: BurstTimer | None = None,
                 submitter: Accepts | None = None, intake: Intake | None = None, manifests: Manifests | None = None,
                 access: AccessPolicy = AccessPolicy(), members: Members | None = None,
                 code: TriggerCode | None = None, ids: Callable[[], str] = _new_id, conflict_retries: int = 5):
        """`access` and `members` (the job store's teams): who the owner of a trigger is when its
        burst closes, and whether they may still submit its job; closing a burst needs both.
        `code`: where a trigger whose job names a code bundle keeps it (adding, closing, removing it)."""
        self.store, self.clock, self.code = store, clock, code
        self.access, self.members = access, members
        self.timer, self.submitter, self.intake, self.manifests = timer, submitter, intake, manifests
        self.ids = ids
        self.conflict_retries = conflict_retries

    # -- what people do --------------------------------------------------------------------------
    def add(self, bucket: str, prefix: str, spec_json: str, owner: str, debounce: int,
            suffix: str | None = None, *, places: TriggerPlaces | None = None, owner_arn: str = "") -> Trigger:
        """A new trigger owned by `owner` (its jobs are theirs), whose verified ARN is `owner_arn`
        (kept to judge their rights at each burst). SpecError says what is wrong, including a place
        the deployment lets no trigger watch (`places`: the entry points give it)."""
        check_pattern(bucket, prefix, suffix)
        if places is not None:
            places.check(bucket, prefix)
        check_debounce(debounce)
        if not owner:
            raise SpecError("a trigger needs an owner")
        spec = validate_json(spec_json, source="the trigger's job")
        for _ in range(3):   # ids are random: a collision is retried with a fresh one
            trigger = Trigger(id=f"tr-{self.ids()}", bucket=bucket, prefix=prefix, suffix=suffix,
                              spec_json=spec.model_dump_json(), owner=owner, debounce=debounce,
                              created_at=self.clock.now(), owner_arn=owner_arn)
            if spec.code is not None:   # before the trigger is written: no trigger without its copy
                self._code().keep(trigger.id, spec.code)
            try:
                self.store.add(trigger)
                return trigger
            except Conflict:
                self._release(trigger)
                continue
        raise Conflict("could not find a free trigger id; try again")

    def get(self, trigger_id: str) -> Trigger:
        """NotFound if there is none."""
        return self.store.get(trigger_id)

    def list(self, owner: str | None = None) -> List[Trigger]:
        triggers = self.store.list()
        return sorted((tr for tr in triggers if owner is None or tr.owner == owner),
                      key=lambda tr: (tr.created_at, tr.id))

    def remove(self, trigger_id: str) -> Trigger:
        """Remove a trigger and drop its open burst. Who may is gqa.services.access's
        rule (its owner or an admin), checked by the entry point on this trigger."""
        trigger = self.store.get(trigger_id)
        # the copy first: a removal that fails after it is asked again, and finds the trigger
        self._release(trigger)
        self.store.remove(trigger_id)
        return trigger

    def _release(self, trigger: Trigger) -> None:
        if trigger.code is not None:
            self._code().release(trigger.id, trigger.code)

    # -- what S3 and the timer do ------------------------------------------------------------------
    def on_object(self, obj: S3Object, places: TriggerPlaces | None = None) -> List[Counted]:
        """Count a created object into the burst of every trigger it matches that may still
        watch where it does (`places`, the deployment's configuration now)."""
        matching = [trigger for trigger in self.store.list() if trigger.matches(obj.bucket, obj.key)]
        return [self._ignored(trigger, places) or self._count(trigger, obj) for trigger in matching]

    @staticmethod
    def _ignored(trigger: Trigger, places: TriggerPlaces | None) -> Counted | None:
        """A trigger added before the configuration changed: it counts nothing, so it starts no job."""
        problem = places.refusal(trigger.bucket, trigger.prefix) if places is not None else None
        return Counted(trigger.id, "", None, ignored=problem) if problem else None

    def _count(self, trigger: Trigger, obj: S3Object) -> Counted:
        for _ in range(self.conflict_retries):
            now = self.clock.now()
            burst = self.store.open_burst(trigger.id)
            kind = plan(burst, obj.key, now)
            if burst is None:   # kind is OPEN: this object opens one
                burst = open_burst(trigger, self.ids(), obj.key, now)
                self._timer().schedule(trigger.id, burst.id, trigger.debounce)
            elif kind is StepKind.CLOSE_OVERDUE:
                self.close(trigger.id, burst.id)
                continue
            try:
                fresh = self.store.count(kind, burst, obj.key, obj.token, now + REMEMBER_EVENTS)
            except Conflict:   # another object or the close got there first: look again
                continue
            return Counted(trigger.id, burst.id, kind if fresh else None)
        raise Conflict(f"the burst of trigger {trigger.id} kept changing; the event will be retried")

    def close(self, trigger_id: str, burst_id: str, places: TriggerPlaces | None = None) -> Closed:
        """The burst's window ended: close it and submit its job, once; dropped, with the
        reason, if the trigger may no longer watch where it does (`places`) or its owner
        may no longer submit its job for the job's team."""
        now = self.clock.now()
        closed = self.store.close(trigger_id, burst_id, now, now + REMEMBER_BURSTS)
        if closed is None:
            return Closed("nothing to close", trigger_id, burst_id, reason="no such burst open or closed")
        burst = closed.burst
        if closed.submitted:
            return Closed("dropped" if closed.dropped else "already submitted", trigger_id, burst_id, burst.count,
                          closed.jobs, reason=closed.dropped or "")
        held = self.store.held_submission(trigger_id, burst_id)
        if held is not None:
            # an earlier try reserved the ids and may have sent them: send the same submission again,
            # which admission writes at most once (the ids are taken)
            self._intake().send(held)
            self.store.mark_submitted(trigger_id, burst_id, list(held.job_ids))
            return Closed("submitted", trigger_id, burst_id, burst.count, held.job_ids, reason="sent again")
        try:
            trigger = self.store.get(trigger_id)
            spec = validate_json(trigger.spec_json, source=f"the job of trigger {trigger_id}")
        except (NotFound, SpecError) as exc:
            return self._drop(trigger_id, burst_id, burst.count,
                              "the trigger was removed" if isinstance(exc, NotFound) else str(exc))
        refused = self._ignored(trigger, places)
        if refused is not None:
            return self._drop(trigger_id, burst_id, burst.count, refused.ignored)
        try:   # before anything is written for it (a manifest, reserved ids)
            spec = for_team(self._members(), spec, self._owner_of(trigger))
        except NotPermitted as exc:
            return self._drop(trigger_id, burst_id, burst.count, _not_permitted(trigger, spec.team, exc),
                              not_permitted=True)
        if spec.code is not None:
            try:   # where the job fetches it, for its retries too: bundles there expire
                self._code().ready(trigger_id, spec.code)
            except NotFound as exc:
                return self._drop(trigger_id, burst_id, burst.count,
                                  f"the job's code {spec.code} is no longer stored ({exc}); add the trigger again "
                                  "with gqa trigger add, which uploads it")
        manifest = None
        if needs_manifest(burst):
            if self.manifests is None:
                raise BackendUnavailable("this burst's keys need a manifest, and no manifest bucket is configured")
            manifest = self.manifests.write(manifest_name(trigger_id, burst_id), manifest_text(burst))
        environment = job_environment(trigger, burst, manifest)
        # the variables go into the spec's env: that is what reaches the container on every backend
        spec = spec.model_copy(update={"env": {**spec.env, **environment}})
        try:
            jobs = self._submitter().accept(spec, owner=trigger.owner,
                                            intake=_Holding(self.store, self._intake(), trigger_id, burst_id))
        except Rejected as exc:   # over a hard limit now (the limits changed since the trigger was added)
            return self._drop(trigger_id, burst_id, burst.count, f"rejected: {exc}")
        ids = tuple(job.id for job in jobs)
        self.store.mark_submitted(trigger_id, burst_id, list(ids))
        return Closed("submitted", trigger_id, burst_id, burst.count, ids, manifest)

    def _drop(self, trigger_id: str, burst_id: str, count: int, reason: str, *,
              not_permitted: bool = False) -> Closed:
        self.store.mark_submitted(trigger_id, burst_id, [], dropped=reason)
        return Closed("dropped", trigger_id, burst_id, count, reason=reason, not_permitted=not_permitted)

    def _owner_of(self, trigger: Trigger) -> Principal:
        """The trigger's owner as the API would see them now: their verified ARN under today's access
        settings (an old trigger without it: their name alone). NotPermitted for an ARN no longer allowed."""
        return self.access.principal(trigger.owner_arn) if trigger.owner_arn else self.access.named(trigger.owner)

    def _members(self) -> Members:
        if self.members is None:
            raise BackendUnavailable("no team members are configured to judge the trigger owner's rights")
        return self.members

    def _submitter(self) -> Accepts:
        if self.submitter is None:
            raise BackendUnavailable("no submit service is configured to submit the trigger's job")
        return self.submitter

    def _intake(self) -> Intake:
        if self.intake is None:
            raise BackendUnavailable("no intake queue is configured to submit the trigger's job")
        return self.intake

    def _code(self) -> TriggerCode:
        if self.code is None:
            raise BackendUnavailable("no code bucket is configured to keep the trigger's code bundle")
        return self.code

    def _timer(self) -> BurstTimer:
        if self.timer is None:
            raise BackendUnavailable("no burst timer is configured (the trigger-timer queue)")
        return self.timer


def _not_permitted(trigger: Trigger, team: str, refusal: NotPermitted) -> str:
    why = f"{trigger.owner} may no longer submit the jobs of trigger {trigger.id} for team {team}: {refusal}"
    if not trigger.owner_arn:
        why += (" (the trigger was added before gqa kept its owner's ARN, so member and admin patterns naming "
                "ARNs do not match its owner; adding it again keeps the ARN)")
    return why
