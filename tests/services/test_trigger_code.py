"""A trigger's job runs the code its owner added it with: adding the trigger
keeps a copy of the bundle (ports.TriggerCode), each burst makes the bundle
ready where its job fetches it before submitting, a burst whose bundle is
nowhere is dropped with the reason, and removing the trigger deletes the copy."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from gqa.models.errors import BackendUnavailable, Conflict, NotFound
from gqa.models.trigger import Trigger
from gqa.services.triggers import TriggerService
from tests.builders import NOW, spec, trigger
from tests.services.fakes import FakeClock, RecordingIntake
from tests.services.test_trigger_rights import OneBurst, Submitter

DIGEST = "sha256:" + "3f" * 32


@dataclass
class Copies:
    """The TriggerCode port: the triggers' copies, and whether the bundle is where jobs fetch it."""

    stored: set[str] = field(default_factory=lambda: {DIGEST})    # under code/
    kept: set[tuple[str, str]] = field(default_factory=set)          # (trigger id, digest)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def keep(self, trigger_id: str, digest: str) -> None:
        self.calls.append(("keep", trigger_id))
        if digest not in self.stored:
            raise NotFound(f"no bundle {digest}")
        self.kept.add((trigger_id, digest))

    def ready(self, trigger_id: str, digest: str) -> str:
        self.calls.append(("ready", trigger_id))
        if (trigger_id, digest) not in self.kept:
            if digest not in self.stored:
                raise NotFound("neither the bundle nor the trigger's copy exists")
            self.kept.add((trigger_id, digest))
        if digest in self.stored:
            return "present"
        self.stored.add(digest)
        return "restored"

    def release(self, trigger_id: str, digest: str) -> None:
        self.calls.append(("release", trigger_id))
        self.kept.discard((trigger_id, digest))


class Triggers:
    """The TriggerStore's part add and remove use; the first `taken` ids are in use."""

    def __init__(self, taken: int = 0):
        self.triggers: dict[str, Trigger] = {}
        self.taken = taken

    def add(self, trigger: Trigger) -> None:
        if self.taken:
            self.taken -= 1
            raise Conflict("taken")
        self.triggers[trigger.id] = trigger

    def get(self, trigger_id: str) -> Trigger:
        if trigger_id not in self.triggers:
            raise NotFound(trigger_id)
        return self.triggers[trigger_id]

    def remove(self, trigger_id: str) -> None:
        del self.triggers[trigger_id]


def adding(store: Triggers, code: Copies | None, *, job_code: str | None = DIGEST) -> Trigger:
    ids = iter(["0001", "0002", "0003"])
    service = TriggerService(store, FakeClock(NOW), code=code, ids=ids.__next__)
    return service.add("data", "incoming/", spec(code=job_code).model_dump_json(), "alice", 120)


def test_adding_a_trigger_keeps_its_bundle_and_removing_it_deletes_the_copy():
    store, code = Triggers(), Copies()
    added = adding(store, code)
    assert added.code == DIGEST and code.kept == {(added.id, DIGEST)}
    TriggerService(store, FakeClock(NOW), code=code).remove(added.id)
    assert code.kept == set() and store.triggers == {}


def test_an_id_taken_meanwhile_leaves_no_copy_behind():
    store, code = Triggers(taken=1), Copies()
    added = adding(store, code)
    assert added.id == "tr-0002" and code.kept == {("tr-0002", DIGEST)}
    assert code.calls == [("keep", "tr-0001"), ("release", "tr-0001"), ("keep", "tr-0002")]


def test_a_bundle_that_is_not_stored_adds_no_trigger():
    store, code = Triggers(), Copies(stored=set())
    with pytest.raises(NotFound):
        adding(store, code)
    assert store.triggers == {} and code.kept == set()


def test_a_job_without_code_needs_no_bucket_and_one_with_code_does():
    assert adding(Triggers(), None, job_code=None).code is None
    with pytest.raises(BackendUnavailable, match="no code bucket is configured"):
        adding(Triggers(), None)


@pytest.fixture
def closing(queue):
    """A trigger alice added for team vision, whose job names the bundle, and its burst's window ended."""
    queue.store.set_team_members("vision", ("alice",))

    def make(code: Copies) -> tuple[TriggerService, OneBurst, RecordingIntake]:
        store = OneBurst(trigger(spec_json=spec(team="vision", code=DIGEST).model_dump_json()))
        intake = RecordingIntake()
        service = TriggerService(store, FakeClock(NOW + 200), submitter=Submitter(), intake=intake,
                                 members=queue.store, code=code)
        return service, store, intake
    return make


def test_a_bursts_job_carries_the_code_made_ready_from_the_triggers_copy(closing):
    code = Copies(stored=set(), kept={("tr-0001", DIGEST)})      # expired under code/ since the trigger was added
    service, _, intake = closing(code)
    closed = service.close("tr-0001", "b1")
    assert closed.action == "submitted"
    assert code.calls == [("ready", "tr-0001")] and DIGEST in code.stored
    [submission] = intake.sent
    assert json.loads(submission.spec_json)["code"] == DIGEST


def test_a_burst_whose_bundle_is_nowhere_is_dropped_with_the_reason(closing):
    service, store, intake = closing(Copies(stored=set()))
    closed = service.close("tr-0001", "b1")
    assert closed.action == "dropped" and intake.sent == []
    assert closed.reason.startswith(f"the job's code {DIGEST} is no longer stored (neither the bundle nor the "
                                    "trigger's copy exists); add the trigger again with gqa trigger add")
    assert store.dropped == closed.reason
