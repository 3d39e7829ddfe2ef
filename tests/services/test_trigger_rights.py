"""A trigger's job is its owner's: when a burst closes, the owner is judged
again, from the ARN kept with the trigger, under the access settings and the
teams' members as they are now (the real SQLite store holds the members), so
an owner who has left the team, or lost the admin role, submits nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gqa.models.burst import Burst, ClosedBurst
from gqa.models.errors import BackendUnavailable, NotFound
from gqa.models.trigger import Trigger
from gqa.ports import Submission
from gqa.services.access import AccessPolicy
from gqa.services.triggers import TriggerService
from tests.builders import NOW, job_record, spec, trigger
from tests.services.fakes import FakeClock, RecordingIntake

A = "123456789012"
ALICE = f"arn:aws:iam::{A}:user/alice"
ADMIN = f"arn:aws:sts::{A}:assumed-role/GqaAdmin/dave"
ADMINS = AccessPolicy(admins=(f"arn:aws:sts::{A}:assumed-role/GqaAdmin/*",))


@dataclass
class OneBurst:
    """The TriggerStore's part close() uses, holding one burst of three objects whose window ended."""

    trigger: Trigger
    burst: Burst = field(default_factory=lambda: Burst("tr-0001", "b1", NOW, NOW + 120,
                                                       keys=("incoming/a.csv", "incoming/b.csv", "incoming/c.csv")))
    held: Submission | None = None
    jobs: tuple[str, ...] | None = None      # None until marked submitted
    dropped: str | None = None

    def get(self, trigger_id: str) -> Trigger:
        if trigger_id != self.trigger.id:
            raise NotFound(f"no trigger {trigger_id}")
        return self.trigger

    def close(self, trigger_id: str, burst_id: str, now: float, expires: float) -> ClosedBurst | None:
        return ClosedBurst(self.burst, now, self.jobs is not None, self.jobs or (), self.dropped)

    def held_submission(self, trigger_id: str, burst_id: str) -> Submission | None:
        return self.held

    def hold_submission(self, trigger_id: str, burst_id: str, submission: Submission) -> Submission:
        self.held = self.held or submission
        return self.held

    def mark_submitted(self, trigger_id: str, burst_id: str, jobs: list[str], dropped: str | None = None) -> None:
        self.jobs, self.dropped = tuple(jobs), dropped


class Submitter:
    """SubmitService.accept's part: what it was asked to submit, for whom."""

    def __init__(self):
        self.accepted: list[tuple[str, str]] = []       # (team, owner)

    def accept(self, spec, *, owner, environment=None, intake=None):
        self.accepted.append((spec.team, owner))
        job_id = str(len(self.accepted))
        intake.send(Submission(spec_json=spec.model_dump_json(), owner=owner, tier=1,
                               idempotency_key=f"jobs-{job_id}", job_ids=(job_id,), seq=int(job_id)))
        return [job_record(id=job_id)]


@dataclass
class World:
    store: OneBurst
    service: TriggerService
    submitter: Submitter
    intake: RecordingIntake

    def close(self):
        return self.service.close("tr-0001", "b1")


@pytest.fixture
def world(queue):
    """A trigger alice added for team vision while a member; the teams' members in the queue's store."""
    queue.store.set_team_members("vision", ("alice", "bob"))

    def make(*, owner: str = "alice", owner_arn: str = ALICE, team: str = "vision",
             access: AccessPolicy = AccessPolicy()) -> World:
        store = OneBurst(trigger(owner=owner, owner_arn=owner_arn, spec_json=spec(team=team).model_dump_json()))
        submitter, intake = Submitter(), RecordingIntake()
        service = TriggerService(store, FakeClock(NOW + 200), submitter=submitter, intake=intake,
                                 access=access, members=queue.store)
        return World(store, service, submitter, intake)

    make.members = lambda team, *members: queue.store.set_team_members(team, members)
    return make


def test_an_owner_still_in_the_team_submits_the_burst_for_it(world):
    w = world()
    closed = w.close()
    assert (closed.action, closed.count, closed.not_permitted) == ("submitted", 3, False)
    assert w.submitter.accepted == [("vision", "alice")]
    assert [s.job_ids for s in w.intake.sent] == [closed.jobs]


def test_an_owner_removed_from_the_team_since_has_the_burst_dropped_with_the_reason(world):
    w = world()
    world.members("vision", "bob", "carol")
    closed = w.close()
    assert (closed.action, closed.count, closed.not_permitted) == ("dropped", 3, True)
    assert closed.reason.startswith("alice may no longer submit the jobs of trigger tr-0001 for team vision: "
                                    "alice is not a member of team vision (members: bob, carol)")
    assert w.submitter.accepted == [] and w.intake.sent == [] and w.store.held is None
    assert (w.store.jobs, w.store.dropped) == ((), closed.reason)    # kept: a redelivered timer finds it

    world.members("vision", "alice")                                  # back in the team: this burst stays dropped
    again = w.close()
    assert (again.action, again.reason) == ("dropped", closed.reason)
    assert w.submitter.accepted == [] and w.intake.sent == []


def test_a_member_by_arn_pattern_is_judged_on_the_arn_kept_with_the_trigger(world):
    w = world()
    world.members("vision", f"arn:aws:iam::{A}:user/ali*")
    assert w.close().action == "submitted"
    assert w.submitter.accepted == [("vision", "alice")]


def test_an_admin_owner_submits_for_the_stored_team_without_being_a_member(world):
    w = world(owner="GqaAdmin/dave", owner_arn=ADMIN, access=ADMINS)
    assert w.close().action == "submitted"
    assert w.submitter.accepted == [("vision", "GqaAdmin/dave")]


def test_an_owner_whose_admin_role_was_taken_away_submits_nothing(world):
    w = world(owner="GqaAdmin/dave", owner_arn=ADMIN, access=AccessPolicy(admins=("root-ops",)))
    closed = w.close()
    assert (closed.action, closed.not_permitted) == ("dropped", True)
    assert "GqaAdmin/dave is not a member of team vision" in closed.reason
    assert w.submitter.accepted == []


def test_an_owner_in_no_team_is_dropped_once_the_queue_admits_only_members(world):
    w = world(owner="erin", owner_arn=f"arn:aws:iam::{A}:user/erin", team="default",
              access=AccessPolicy(unlisted_team=None))
    closed = w.close()
    assert closed.action == "dropped" and "erin is a member of no team" in closed.reason
    assert w.submitter.accepted == []


def test_a_trigger_stored_before_the_arn_was_kept_is_judged_by_its_owners_name(world):
    by_name = world(owner_arn="")
    assert by_name.close().action == "submitted"                      # "alice" names her
    assert by_name.submitter.accepted == [("vision", "alice")]

    world.members("vision", f"arn:aws:iam::{A}:user/ali*")
    old = world(owner_arn="")
    closed = old.close()                                              # an ARN pattern cannot match a name alone
    assert (closed.action, closed.not_permitted) == ("dropped", True)
    assert "added before gqa kept its owner's ARN" in closed.reason and "adding it again" in closed.reason
    assert old.submitter.accepted == []


def test_a_held_submission_is_sent_again_without_judging_again(world):
    """Its ids were reserved when the owner could submit: the retry completes that submission."""
    w = world()
    w.store.held = Submission(spec_json=spec(team="vision").model_dump_json(), owner="alice", tier=1,
                              idempotency_key="jobs-7", job_ids=("7",), seq=7)
    world.members("vision", "bob")
    closed = w.close()
    assert (closed.action, closed.jobs) == ("submitted", ("7",))
    assert [s.job_ids for s in w.intake.sent] == [("7",)]


def test_without_the_teams_members_a_burst_is_not_closed_blind(world):
    w = world()
    blind = TriggerService(w.store, FakeClock(NOW + 200), submitter=w.submitter, intake=w.intake)
    with pytest.raises(BackendUnavailable, match="no team members are configured"):
        blind.close("tr-0001", "b1")
    assert w.submitter.accepted == [] and w.store.jobs is None        # not marked: the timer is retried
