"""The settings contract for read-modify-writes: the policy and each team
carry a revision every write moves on, and a write guarded on the revision it
read is refused (Conflict, nothing written) once another write came between.
QuotaService reads, changes what it was given and writes guarded, again on a
Conflict: two changes of one team or of the policy made at once both land."""

import pytest

from gqa.models.errors import Conflict
from gqa.scheduling.snapshot import Policy, TeamPolicy
from gqa.services.quota import QuotaService


def test_a_team_write_guarded_on_a_revision_read_before_another_write_is_refused(store, open_store):
    assert store.current_team("vision") == (None, 0)
    other = open_store()
    other.set_team("vision", TeamPolicy(max_gpus=4), revision=0)
    stored, revision = store.current_team("vision")
    assert stored == TeamPolicy(max_gpus=4) and revision != 0

    other.set_team("vision", TeamPolicy(budget=50.0))
    with pytest.raises(Conflict):
        store.set_team("vision", TeamPolicy(max_gpus=8), revision=revision)
    with pytest.raises(Conflict):
        store.set_team("vision", TeamPolicy(max_gpus=8), revision=0)     # "not configured" no longer holds
    assert open_store().teams() == {"vision": TeamPolicy(budget=50.0)}

    stored, revision = store.current_team("vision")
    store.set_team("vision", TeamPolicy(max_gpus=8), revision=revision)
    assert open_store().teams() == {"vision": TeamPolicy(max_gpus=8)}


def test_a_members_change_moves_the_teams_revision_on(store, open_store):
    _, before = store.current_team("nlp")
    open_store().set_team_members("nlp", ("bob",))      # configures the team with the default policy
    assert store.current_team("nlp")[0] == TeamPolicy()
    with pytest.raises(Conflict):
        store.set_team("nlp", TeamPolicy(max_gpus=2), revision=before)
    assert store.team_members() == {"nlp": ("bob",)}


def test_a_policy_write_guarded_on_a_revision_read_before_another_write_is_refused(store, open_store):
    assert store.current_policy() == (Policy(), 0)
    other = open_store()
    other.set_policy(Policy(half_life=3600.0))
    stored, revision = store.current_policy()
    assert stored == Policy(half_life=3600.0)

    other.set_policy(Policy(half_life=7200.0))
    with pytest.raises(Conflict):
        store.set_policy(Policy(max_gpus_per_job=2), revision=revision)
    assert open_store().policy() == Policy(half_life=7200.0)

    store.set_policy(Policy(max_gpus_per_job=2), revision=store.current_policy()[1])
    assert open_store().policy() == Policy(max_gpus_per_job=2)


class WriteBetween:
    """A store whose first guarded write of a setting finds another change written since its read:
    `meanwhile` runs (on another connection) just before the write."""

    def __init__(self, store, meanwhile):
        self.store, self.meanwhile = store, meanwhile

    def _first(self):
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            meanwhile()

    def set_team(self, team, policy, *, revision=None):
        self._first()
        return self.store.set_team(team, policy, revision=revision)

    def set_policy(self, policy, *, revision=None):
        self._first()
        return self.store.set_policy(policy, revision=revision)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_two_quota_changes_of_one_team_made_at_once_both_land(store, open_store):
    QuotaService(store).set("race", share=2.0)
    other = QuotaService(open_store())
    racing = QuotaService(WriteBetween(store, lambda: other.set("race", max_gpus=1)))

    assert racing.set("race", budget=101) == TeamPolicy(share=2.0, max_gpus=1, budget=101.0)

    assert open_store().teams() == {"race": TeamPolicy(share=2.0, max_gpus=1, budget=101.0)}


def test_a_quota_change_of_a_team_not_configured_yet_keeps_one_made_meanwhile(store, open_store):
    other = QuotaService(open_store())
    racing = QuotaService(WriteBetween(store, lambda: other.set("race", max_gpus=1)))

    racing.set("race", budget=101)

    assert open_store().teams() == {"race": TeamPolicy(max_gpus=1, budget=101.0)}


def test_two_policy_changes_made_at_once_both_land(store, open_store):
    other = QuotaService(open_store())
    racing = QuotaService(WriteBetween(store, lambda: other.set_policy(half_life=3600.0, age_weight=0.5)))

    changed = racing.set_policy(max_gpus_per_job=2, fair_share_weight=3.0)

    stored = open_store().policy()
    assert changed == stored
    assert (stored.half_life, stored.max_gpus_per_job) == (3600.0, 2)
    assert (stored.weights.age, stored.weights.fair_share) == (0.5, 3.0)


def test_a_change_that_keeps_losing_is_refused_and_says_so(store, open_store):
    other = open_store()

    class AlwaysBetween(WriteBetween):
        def set_team(self, team, policy, *, revision=None):
            other.set_team(team, TeamPolicy(share=float(revision + 2)))    # a change every time
            return self.store.set_team(team, policy, revision=revision)

    with pytest.raises(Conflict, match="team race's quota kept changing while being set; try again"):
        QuotaService(AlwaysBetween(store, None)).set("race", budget=101)
    assert open_store().teams()["race"].budget is None
