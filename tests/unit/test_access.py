"""The access rule: who is who (owner from the verified ARN), and every role
against every action, on the caller's own job and on someone else's."""

import pytest

from gqa.models.errors import NotAuthenticated, NotPermitted
from gqa.services.access import (AccessPolicy, Action, LocalAccess, Principal, Role, authorize, is_member,
                                 owner_from_arn, sees_private, team_for)
from tests.builders import job_record, trigger

A = "123456789012"
SSO = ("AWSReservedSSO_*",)


@pytest.mark.parametrize("arn, owner", [
    (f"arn:aws:iam::{A}:user/alice", "alice"),
    (f"arn:aws:iam::{A}:user/division/team/alice", "alice"),              # the path is not part of the name
    (f"arn:aws:iam::{A}:user/alice+ops@example.com", "alice+ops@example.com"),
    (f"arn:aws:sts::{A}:assumed-role/Researcher/alice", "Researcher/alice"),   # the session name alone proves nothing
    (f"arn:aws:sts::{A}:assumed-role/AWSReservedSSO_ML_0123abcd/alice@example.com", "alice@example.com"),
    (f"arn:aws:sts::{A}:federated-user/bob", "federated-user/bob"),
    (f"arn:aws-cn:iam::{A}:user/li", "li"),
])
def test_owner_from_a_verified_arn(arn, owner):
    assert owner_from_arn(arn, SSO) == owner


def test_a_session_name_cannot_pass_for_an_iam_user():
    assert owner_from_arn(f"arn:aws:sts::{A}:assumed-role/Researcher/alice", SSO) != \
        owner_from_arn(f"arn:aws:iam::{A}:user/alice", SSO)


def test_a_name_with_characters_an_owner_cannot_hold_keeps_a_digest_of_the_original():
    one = owner_from_arn(f"arn:aws:sts::{A}:assumed-role/Researcher/a,b", SSO)
    other = owner_from_arn(f"arn:aws:sts::{A}:assumed-role/Researcher/a_b", SSO)
    assert one.startswith("Researcher/a_b-") and one != other


@pytest.mark.parametrize("arn, words", [
    (f"arn:aws:iam::{A}:root", "root user"),
    ("alice", "not an IAM ARN"),
    (f"arn:aws:iam::{A}:role/Researcher", "expected an IAM user"),
    (f"arn:aws:sts::{A}:assumed-role/Researcher", "expected an IAM user"),
])
def test_identities_that_name_no_person_are_refused(arn, words):
    with pytest.raises(NotPermitted, match=words):
        owner_from_arn(arn, SSO)


def test_no_identity_is_not_authenticated():
    with pytest.raises(NotAuthenticated, match="sign it with SigV4"):
        AccessPolicy().principal(None)


POLICY = AccessPolicy(admins=(f"arn:aws:sts::{A}:assumed-role/GqaAdmin/*", "root-ops"),
                      approvers=("carol",), identity_roles=SSO)


@pytest.mark.parametrize("arn, roles", [
    (f"arn:aws:iam::{A}:user/alice", set()),
    (f"arn:aws:iam::{A}:user/carol", {Role.APPROVER}),
    (f"arn:aws:sts::{A}:assumed-role/GqaAdmin/dave", {Role.ADMIN}),
    (f"arn:aws:iam::{A}:user/root-ops", {Role.ADMIN}),
    # "carol" matches owner names: a session of an ordinary role is "Researcher/carol", not carol
    (f"arn:aws:sts::{A}:assumed-role/Researcher/carol", set()),
    (f"arn:aws:sts::{A}:assumed-role/AWSReservedSSO_ML_1/carol", {Role.APPROVER}),
])
def test_roles_come_from_patterns_on_the_arn_or_the_owner_name(arn, roles):
    principal = POLICY.principal(arn, A)
    assert principal.roles == roles and principal.account == A


@pytest.mark.parametrize("owner, roles", [
    ("root-ops", {Role.ADMIN}),          # a name pattern still names them
    ("carol", {Role.APPROVER}),
    ("GqaAdmin/dave", set()),            # an ARN pattern cannot match a caller known by name alone
    ("alice", set()),
])
def test_a_caller_known_by_name_alone_has_the_roles_name_patterns_give(owner, roles):
    principal = POLICY.named(owner)
    assert (principal.owner, principal.arn, principal.roles) == (owner, "", roles)
    assert not is_member(principal, [f"arn:aws:sts::{A}:assumed-role/GqaAdmin/*", "arn:*"])
    assert is_member(principal, [owner])


def who(*roles: Role, owner: str = "alice") -> Principal:
    return Principal(owner=owner, arn=f"arn:aws:iam::{A}:user/{owner}", roles=frozenset(roles))


OWN, OTHER = job_record(id="12", owner="alice"), job_record(id="13", owner="bob")
OWN_TRIGGER, OTHER_TRIGGER = trigger(id="tr-0012", owner="alice"), trigger(id="tr-0013", owner="bob")
ROLES = {"owner": (), "approver": (Role.APPROVER,), "admin": (Role.ADMIN,)}
# which jobs each role may act on: "own", "other" (a job of someone else's), both or none
#                    owner          approver       admin
TABLE = {
    Action.SUBMIT:     ("own other", "own other", "own other"),
    Action.READ:       ("own other", "own other", "own other"),
    Action.CANCEL:     ("own",       "own",       "own other"),
    Action.REQUEUE:    ("own",       "own",       "own other"),
    Action.HOLD:       ("own",       "own",       "own other"),
    Action.RELEASE:    ("own",       "own",       "own other"),
    Action.UPDATE:     ("own",       "own",       "own other"),
    Action.APPROVE:    ("",          "own other", "own other"),
    Action.DENY:       ("",          "own other", "own other"),
    Action.SET_QUOTA:  ("",          "",          "own other"),
    Action.SET_POLICY: ("",          "",          "own other"),
    Action.READ_LOGS:  ("own",       "own",       "own other"),      # output may hold secrets: not approvers'
    Action.ADD_TRIGGER:    ("own other", "own other", "own other"),
    Action.READ_TRIGGERS:  ("own other", "own other", "own other"),
    Action.REMOVE_TRIGGER: ("own",       "own",       "own other"),
}
TRIGGER_ACTIONS = {Action.ADD_TRIGGER, Action.READ_TRIGGERS, Action.REMOVE_TRIGGER}
RULES = [(role, action, whose, whose in TABLE[action][i].split())
         for action in Action for i, role in enumerate(ROLES) for whose in ("own", "other")]


def test_the_table_covers_every_action():
    assert set(TABLE) == set(Action)


@pytest.mark.parametrize("role, action, whose, allowed", RULES,
                         ids=[f"{r}-{a.name}-{w}" for r, a, w, _ in RULES])
def test_the_rule_for_every_role_action_and_job(role, action, whose, allowed):
    own, other = (OWN_TRIGGER, OTHER_TRIGGER) if action in TRIGGER_ACTIONS else (OWN, OTHER)
    principal, thing = who(*ROLES[role]), own if whose == "own" else other
    if allowed:
        authorize(principal, action, [thing])
    else:
        with pytest.raises(NotPermitted):
            authorize(principal, action, [thing])


@pytest.mark.parametrize("role, whose, sees", [
    ("owner", "own", True), ("owner", "other", False),
    ("approver", "own", True), ("approver", "other", False),     # approving sizes needs no secrets
    ("admin", "own", True), ("admin", "other", True),
])
def test_what_a_trigger_keeps_private_is_seen_by_its_owner_and_admins(role, whose, sees):
    thing = OWN_TRIGGER if whose == "own" else OTHER_TRIGGER
    assert sees_private(who(*ROLES[role]), thing) is sees


def test_the_refusal_names_the_owner_the_caller_and_who_may():
    with pytest.raises(NotPermitted) as refused:
        authorize(who(owner="bob"), Action.CANCEL, [job_record(id="12", owner="alice")])
    assert str(refused.value) == ("job 12 belongs to alice; bob may not cancel it "
                                  "(owners cancel their own jobs; admins may cancel any)")
    with pytest.raises(NotPermitted, match="bob may not approve jobs: approvers and admins do"):
        authorize(who(owner="bob"), Action.APPROVE)
    with pytest.raises(NotPermitted, match="bob may not set team quotas: only admins may"):
        authorize(who(Role.APPROVER, owner="bob"), Action.SET_QUOTA)


def test_refusals_for_output_and_triggers_say_whose_it_is_and_who_may():
    with pytest.raises(NotPermitted) as refused:
        authorize(who(Role.APPROVER, owner="carol"), Action.READ_LOGS, [OWN])
    assert str(refused.value) == ("job 12 belongs to alice; carol may not read its output "
                                  "(a job's output may hold secrets: its owner and admins read it)")
    with pytest.raises(NotPermitted) as refused:
        authorize(who(owner="bob"), Action.REMOVE_TRIGGER, [OWN_TRIGGER])
    assert str(refused.value) == ("trigger tr-0012 belongs to alice; bob may not remove it "
                                  "(owners remove their own triggers; admins may remove any)")


def test_every_job_is_checked_not_only_the_first():
    with pytest.raises(NotPermitted, match="job 13 belongs to bob"):
        authorize(who(), Action.REQUEUE, [OWN, OTHER])


@pytest.mark.parametrize("text, policy", [
    (None, AccessPolicy()),
    ("", AccessPolicy()),
    ('{"admins": ["arn:aws:iam::1:user/x"], "approvers": ["carol"], "identity_roles": ["AWSReservedSSO_*"]}',
     AccessPolicy(admins=("arn:aws:iam::1:user/x",), approvers=("carol",), identity_roles=("AWSReservedSSO_*",))),
])
def test_access_settings_parse(text, policy):
    assert AccessPolicy.from_json(text) == policy


@pytest.mark.parametrize("text, words", [
    ("[1]", "JSON object"),
    ("{admins: x}", "not JSON"),
    ('{"admin": ["x"]}', "unknown access setting"),
    ('{"admins": "x"}', "list of non-empty strings"),
    ('{"approvers": [""]}', "list of non-empty strings"),
])
def test_bad_access_settings_say_what_is_wrong(text, words):
    with pytest.raises(ValueError, match=words):
        AccessPolicy.from_json(text)


def test_the_unlisted_team_setting_parses_and_is_checked():
    assert AccessPolicy.from_json('{"unlisted_team": null}').unlisted_team is None
    assert AccessPolicy.from_json('{"unlisted_team": "sandbox"}').principal("arn:aws:iam::1:user/bob").unlisted_team \
        == "sandbox"
    assert AccessPolicy.from_json("").unlisted_team == "default"
    with pytest.raises(ValueError, match="unlisted_team must be a team name or null"):
        AccessPolicy.from_json('{"unlisted_team": "a b"}')


# -- teams are rights ------------------------------------------------------------------------------

VISION_ROLE = "arn:aws:sts::123456789012:assumed-role/VisionResearcher/*"
MEMBERS = {"nlp": ("alice", "@ml"), "vision": ("alice", VISION_ROLE), "infra": ("arn:aws:iam::123456789012:user/op*",)}


def member(owner: str, *, arn: str = "", groups: tuple[str, ...] = (), admin: bool = False,
           unlisted: str | None = "default") -> Principal:
    return Principal(owner=owner, arn=arn or f"arn:aws:iam::123456789012:user/{owner}",
                     roles=frozenset({Role.ADMIN}) if admin else frozenset(), groups=frozenset(groups),
                     unlisted_team=unlisted)


@pytest.mark.parametrize("caller, named, team", [
    (member("alice"), "nlp", "nlp"),                                              # a member by name
    (member("alice"), "vision", "vision"),
    (member("carl", groups=("ml",)), "nlp", "nlp"),                               # by group
    (member("carl", groups=("ml",)), "default", "nlp"),                           # no team named: the only one
    (member("VisionResearcher/dana", arn="arn:aws:sts::123456789012:assumed-role/VisionResearcher/dana"),
     "default", "vision"),                                                        # by ARN pattern
    (member("ops1"), "infra", "infra"),
    (member("bob"), "default", "default"),                                        # in no team: the unlisted team
    (member("bob", unlisted="sandbox"), "default", "sandbox"),
    (member("bob", unlisted="sandbox"), "sandbox", "sandbox"),
    (member("root-ops", admin=True), "vision", "vision"),                         # admins act for any team
    (member("root-ops", admin=True), "anything", "anything"),
    (member("root-ops", admin=True, unlisted=None), "default", "default"),
])
def test_a_submission_runs_for_a_team_the_caller_is_in(caller, named, team):
    assert team_for(caller, named, MEMBERS) == team


@pytest.mark.parametrize("caller, named, words", [
    (member("bob"), "vision", [f"bob is not a member of team vision (members: alice, {VISION_ROLE})",
                               "ask an admin to add you", "submit for team default"]),
    (member("carl", groups=("ml",)), "vision", ["carl is not a member of team vision", "your teams: nlp"]),
    (member("alice"), "default", ["alice is a member of teams nlp, vision", "name the team"]),
    (member("alice"), "infra", ["alice is not a member of team infra", "your teams: nlp, vision"]),
    (member("bob"), "research", ["team research lists no members", "only admins may submit for it"]),
    (member("bob", unlisted=None), "default", ["bob is a member of no team (teams: infra, nlp, vision)",
                                               "ask an admin to add you to a team"]),
    (member("bob", groups=("nlp",)), "nlp", ["bob is not a member of team nlp"]),   # a group is @group, not a name
    (member("ops1", arn="arn:aws:sts::123456789012:assumed-role/Ops/ops1"), "infra", ["not a member of team infra"]),
])
def test_a_team_the_caller_is_not_in_is_refused_with_who_is(caller, named, words):
    with pytest.raises(NotPermitted) as refused:
        team_for(caller, named, MEMBERS)
    for word in words:
        assert word in str(refused.value)


def test_a_caller_in_a_team_may_not_use_the_unlisted_team_to_escape_its_caps():
    with pytest.raises(NotPermitted, match="team sandbox is for users in no team; alice is a member of nlp, vision"):
        team_for(member("alice", unlisted="sandbox"), "sandbox", MEMBERS)


def test_a_long_member_list_is_cut_with_a_count():
    members = {"big": tuple(f"user{i}" for i in range(20))}
    with pytest.raises(NotPermitted, match=r"user7 and 12 more\)"):
        team_for(member("bob"), "big", members)


def test_local_callers_carry_their_groups_and_the_unlisted_team():
    caller = LocalAccess(admin_groups=frozenset({"gqa-admins"})).principal("carl", ["ml", "users"])
    assert caller.groups == {"ml", "users"} and not caller.admin and caller.unlisted_team == "default"
    assert is_member(caller, ["@ml"]) and not is_member(caller, ["@gqa-admins", "ml"])


@pytest.mark.parametrize("unlisted", ["default", "sandbox", None])
def test_the_deployments_unlisted_team_reaches_the_api_function(unlisted):
    from tests.infra.support import deployment, example_values

    config = deployment(access={**example_values()["access"], "unlisted_team": unlisted})
    assert AccessPolicy.from_json(config.access_json()).unlisted_team == unlisted
    assert ("unlisted_team" in config.access_json()) == (unlisted != "default")   # the default costs no bytes
