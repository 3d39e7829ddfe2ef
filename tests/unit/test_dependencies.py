"""The gate phase of a pass (scheduling/dependencies.py): user holds, --begin,
and each kind of dependency, given the states of the jobs it names."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gqa.models.dependency import parse_dependency
from gqa.models.errors import SpecError
from gqa.models.job import JobState
from gqa.scheduling import plan
from gqa.scheduling.dependencies import at_gate, clock_time, delay_ends, gate
from tests.builders import NOW, job_record, pending, running, snapshot

S = JobState
OK, FAIL, RUN, QUEUED, TIMED_OUT, CANCELLED = S.SUCCEEDED, S.FAILED, S.RUNNING, S.QUEUED, S.TIMED_OUT, S.CANCELLED


def verdict(dependency: str, named: dict, **fields) -> tuple[str | None, str | None]:
    """(why it waits, why it never can start) for job "j" with this dependency; None where it does not."""
    snap = snapshot(4, pending=[pending("j", dependency=dependency, seq=50, **fields)], named=named)
    decided = gate(snap)
    return decided.waiting.get("j"), decided.never.get("j")


@pytest.mark.parametrize("fields, looked_at", [
    ({}, False),
    ({"dependency": "afterok:12"}, True),        # met or not: the gate tells
    ({"user_hold": True}, True),
    ({"begin": NOW + 1}, True),
    ({"begin": NOW}, False),                     # its time has come
    ({"begin": NOW - 60, "dependency": "afterany:3"}, True),
])
def test_the_gate_looks_at_a_job_by_the_same_test_for_a_pass_and_for_a_query(fields, looked_at):
    # a pending job's view (a pass) and its whole record (the reasons a query gives) alike
    assert at_gate(pending("j", **fields), NOW) is looked_at
    assert at_gate(job_record(**fields), NOW) is looked_at
    assert ("j" in gate(snapshot(4, pending=[pending("j", **fields)], named={"12": {RUN: 1}, "3": {RUN: 1}}))) \
        is looked_at


@pytest.mark.parametrize("dependency, named, waits, never", [
    # afterok
    ("afterok:12", {"12": {RUN: 1}}, "waits for job 12 to succeed", None),
    ("afterok:12", {"12": {OK: 1}}, None, None),
    ("afterok:12", {"12": {FAIL: 1}}, "dependency can never be met: job 12 failed (afterok)",
     "dependency can never be met: job 12 failed (afterok)"),
    ("afterok:12", {"12": {TIMED_OUT: 1}}, "dependency can never be met: job 12 timed out (afterok)",
     "dependency can never be met: job 12 timed out (afterok)"),
    ("afterok:12:13", {"12": {OK: 1}, "13": {QUEUED: 1}}, "waits for job 13 to succeed", None),
    ("afterok:12:13", {"12": {RUN: 1}, "13": {QUEUED: 1}}, "waits for jobs 12 and 13 to succeed", None),
    # afternotok
    ("afternotok:12", {"12": {RUN: 1}}, "waits for job 12 to fail", None),
    ("afternotok:12", {"12": {CANCELLED: 1}}, None, None),
    ("afternotok:12", {"12": {OK: 1}}, "dependency can never be met: job 12 succeeded (afternotok)",
     "dependency can never be met: job 12 succeeded (afternotok)"),
    # afterany
    ("afterany:12:13", {"12": {RUN: 1}, "13": {QUEUED: 1}}, "waits for jobs 12 and 13 to end", None),
    ("afterany:12:13", {"12": {FAIL: 1}, "13": {OK: 1}}, None, None),
    # after: started (or ended)
    ("after:12", {"12": {QUEUED: 1}}, "waits for job 12 to start", None),
    ("after:12", {"12": {S.STARTING: 1}}, "waits for job 12 to start", None),
    ("after:12", {"12": {RUN: 1}}, None, None),
    ("after:12", {"12": {CANCELLED: 1}}, None, None),
    # a job not recorded yet (accepted, admitted a chunk at a time) may still come
    ("afterok:12", {}, "waits for job 12 to succeed", None),
    # `,`: every condition
    ("afterok:12,afterany:13", {"12": {OK: 1}, "13": {RUN: 1}}, "waits for job 13 to end", None),
    ("afterok:12,afterany:13", {"12": {FAIL: 1}, "13": {RUN: 1}},
     "dependency can never be met: job 12 failed (afterok)", "dependency can never be met: job 12 failed (afterok)"),
    # `?`: any one; waits while any can still be met
    ("afterok:12?afterok:13", {"12": {FAIL: 1}, "13": {RUN: 1}}, "waits for job 13 to succeed", None),
    ("afterok:12?afterok:13", {"12": {FAIL: 1}, "13": {OK: 1}}, None, None),
    ("afterok:12?afterok:13", {"12": {RUN: 1}, "13": {RUN: 1}},
     "waits for job 12 to succeed or waits for job 13 to succeed", None),
    ("afterok:12?afternotok:13", {"12": {FAIL: 1}, "13": {OK: 1}},
     "dependency can never be met: job 12 failed (afterok); job 13 succeeded (afternotok)",
     "dependency can never be met: job 12 failed (afterok); job 13 succeeded (afternotok)"),
    # an array names all its tasks, a task one
    ("afterok:12", {"12": {OK: 3, RUN: 1}}, "waits for job 12 to succeed", None),
    ("afterok:12", {"12": {OK: 4}}, None, None),
    ("afterok:12", {"12": {OK: 2, FAIL: 1, RUN: 1}},
     "dependency can never be met: array 12: of its 4 tasks 1 failed (afterok)",
     "dependency can never be met: array 12: of its 4 tasks 1 failed (afterok)"),
    ("afterany:12", {"12": {OK: 2, FAIL: 1, RUN: 1}}, "waits for job 12 to end", None),
    ("afternotok:12", {"12": {OK: 3, FAIL: 1}}, None, None),
    ("afternotok:12", {"12": {OK: 3, RUN: 1}}, "waits for job 12 to fail", None),
    ("afternotok:12", {"12": {OK: 4}}, "dependency can never be met: array 12: of its 4 tasks 4 succeeded "
     "(afternotok)", "dependency can never be met: array 12: of its 4 tasks 4 succeeded (afternotok)"),
    ("afterok:12_3", {"12_3": {OK: 1}}, None, None),
    ("afterok:12_3", {"12_3": {FAIL: 1}}, "dependency can never be met: job 12_3 failed (afterok)",
     "dependency can never be met: job 12_3 failed (afterok)"),
])
def test_each_kind_of_dependency(dependency, named, waits, never):
    assert verdict(dependency, named) == (waits, never)


def test_a_singleton_waits_for_a_running_job_of_its_name_and_owner():
    snap = snapshot(4, pending=[pending("j", name="train", dependency="singleton", seq=5)],
                    running=[running("9", name="train"), running("8", name="train", user="bob"),
                             running("7", name="eval")])
    assert gate(snap).waiting == {"j": "singleton: waits for job 9 (same name and owner) to end"}
    assert plan(snap).starts == []


def test_a_singleton_goes_after_an_earlier_pending_job_of_its_name_and_alone_it_starts():
    first = pending("3", name="train", seq=3)
    later = pending("j", name="train", dependency="singleton", seq=5)
    assert gate(snapshot(4, pending=[later, first])).waiting == {
        "j": "singleton: waits for job 3 (same name and owner) to end"}
    assert gate(snapshot(4, pending=[later])).waiting == {}
    assert [s.job_id for s in plan(snapshot(4, pending=[later])).starts] == ["j"]


def test_a_verdict_is_told_once_and_again_only_where_a_job_it_names_moved(monkeypatch):
    from gqa.scheduling import dependencies

    told = []
    real = dependencies._one
    monkeypatch.setattr(dependencies, "_one", lambda kind, ref, states: told.append(ref) or real(kind, ref, states))
    waiting = [pending(f"w{i}", dependency=f"afterok:{900 + i}", seq=i) for i in range(100)]
    named = {str(900 + i): {RUN: 1} for i in range(100)}
    for _ in range(3):   # three passes, nothing moved: each told at the first
        assert len(gate(snapshot(4, pending=waiting, named=named)).told) == 100
    assert len(told) == 100
    told.clear()
    moved = {**named, "900": {OK: 1}, "901": {FAIL: 1}}   # a new mapping, as a store's read builds it
    decided = gate(snapshot(4, pending=waiting, named=moved))
    assert sorted(told) == ["900", "901"] and "w0" not in decided
    assert decided.never == {"w1": "dependency can never be met: job 901 failed (afterok)"}
    told.clear()
    moved["902"] = {RUN: 2}
    same = replace(snapshot(4, pending=waiting), named=moved)   # the very mapping, not the builder's copy
    assert "w2" in gate(same) and told == ["902"]
    told.clear()
    moved["902"][RUN] = 0   # changed in place: the kept verdict was told from a copy
    moved["902"][OK] = 1
    assert "w2" not in gate(same) and told == ["902"]


def test_kept_verdicts_are_bounded_and_a_singleton_is_never_kept(monkeypatch):
    from gqa.scheduling import dependencies

    monkeypatch.setattr(dependencies, "KEPT_VERDICTS", 2)
    monkeypatch.setattr(dependencies, "_told", {})
    waiting = [pending(f"w{i}", dependency=f"afterok:{800 + i}", seq=i) for i in range(5)]
    decided = gate(snapshot(4, pending=waiting, named={str(800 + i): {RUN: 1} for i in range(5)}))
    assert len(decided.told) == 5 and len(dependencies._told) <= 2
    assert gate(snapshot(4, pending=waiting, named={str(800 + i): {OK: 1} for i in range(5)})).told == {}
    later = pending("j", name="train", dependency="singleton", seq=5)
    assert "j" in gate(snapshot(4, pending=[later, pending("3", name="train", seq=3)]))
    assert "j" not in gate(snapshot(4, pending=[later]))   # the same text and states, its earlier job gone
    assert "singleton" not in dependencies._told


def test_a_user_hold_waits_and_the_budget_never_releases_it():
    held = pending("7", held=True, user_hold=True)
    decided = plan(snapshot(4, pending=[held]))
    assert decided.waiting == {"7": "held by its owner: gqa release 7"}
    assert (decided.starts, decided.release) == ([], [])
    budget_held = pending("8", held=True)   # held by its team's budget only: released when it fits
    assert plan(snapshot(4, pending=[budget_held])).release == ["8"]


def test_a_begin_time_ahead_waits_and_one_passed_starts():
    later = pending("b", begin=NOW + 3600)
    decided = plan(snapshot(4, pending=[later]))
    assert decided.waiting == {"b": f"waits until {clock_time(NOW + 3600, NOW)} (--begin)"}
    assert decided.starts == []
    assert [s.job_id for s in plan(snapshot(4, pending=[pending("b", begin=NOW - 1)])).starts] == ["b"]


def test_a_begin_time_is_worded_when_asked_and_a_pass_words_only_the_jobs_it_reaches(monkeypatch):
    from gqa.scheduling import dependencies

    later = [pending(f"b{i}", begin=NOW + 3600 + i, seq=i) for i in range(200)]
    decided = gate(snapshot(4, pending=[*later, pending("free")]))
    assert "b0" in decided and "free" not in decided
    assert decided.reason("b7") == f"waits until {clock_time(NOW + 3607, NOW)} (--begin)"
    assert list(decided.waiting) == [f"b{i}" for i in range(200)]   # every reason, in queue order
    with pytest.raises(KeyError):
        decided.reason("free")
    # a pass that explains nothing and has no GPU free reaches no job: it words no clock time (each
    # of 200 at every pass, before)
    worded = []
    monkeypatch.setattr(dependencies, "clock_time", lambda at, now: worded.append(at) or "")
    busy = [running(f"r{i}", gpus=[i]) for i in range(4)]
    assert plan(snapshot(4, pending=later, running=busy), explain=False).starts == []
    assert worded == []
    # one that reaches them all, a GPU free and a job last in line to start, words none either
    last = pending("last", seq=999, submitted_at=NOW)
    decided = plan(snapshot(4, pending=[*later, last], running=busy[:3]), explain=False)
    assert [s.job_id for s in decided.starts] == ["last"] and worded == []
    assert len(plan(snapshot(4, pending=[*later, last], running=busy[:3])).waiting) == 200 and len(worded) == 200


def test_the_clock_time_reads_the_hour_today_and_the_date_another_day():
    at = 1_764_684_300.0   # 2025-12-02 14:05 UTC
    assert clock_time(at, at - 3600) == "14:05 UTC"
    assert clock_time(at, at - 86400) == "Dec 2 14:05 UTC"


@pytest.mark.parametrize("past_14_05, ahead, told", [
    (30, 30, "14:05:30 UTC"),         # under a minute away: "14:05" would read as past by 14:05:10
    (30, 7200, "14:05:30 UTC"),       # however far: a listing worded then is read up to that time
    (30, 86400, "Dec 2 14:05:30 UTC"),
    (0.4, 20, "14:05 UTC"),           # on the minute once rounded: no ":00"
])
def test_the_clock_time_tells_seconds_off_the_minute(past_14_05, ahead, told):
    at = 1_764_684_300.0 + past_14_05   # 2025-12-02 14:05 UTC and some seconds
    assert clock_time(at, at - ahead) == told


def test_a_never_met_dependency_is_listed_even_when_the_pass_stops_early():
    busy = running("r", gpus=[0])
    doomed = pending("d", dependency="afterok:12", seq=9)
    snap = snapshot(1, pending=[pending("a", seq=1), doomed], running=[busy], named={"12": {FAIL: 1}})
    decided = plan(snap, explain=False)
    assert decided.never == {"d": "dependency can never be met: job 12 failed (afterok)"}


def test_a_job_that_waits_on_its_dependency_lets_later_jobs_start():
    waiting = pending("w", dependency="afterok:12", seq=1, gpus=4)
    later = pending("l", seq=2, gpus=4)
    decided = plan(snapshot(4, pending=[waiting, later], named={"12": {RUN: 1}}))
    assert [s.job_id for s in decided.starts] == ["l"]
    assert decided.waiting["w"] == "waits for job 12 to succeed"
    assert "w" not in decided.reserved


def test_an_unreadable_dependency_can_never_be_met():
    _, never = verdict("afterok:12+0", {})
    assert never is not None and never.startswith("dependency can never be met: ")


def test_a_begin_time_is_the_estimate_of_a_job_nothing_else_holds_back():
    from gqa.scheduling.eta import predict_starts

    snap = snapshot(4, pending=[pending("b", begin=NOW + 600), pending("w", dependency="afterok:12")],
                    named={"12": {RUN: 1}})
    assert predict_starts(snap) == {"b": NOW + 600, "w": None}
    busy = running("r", gpus=[0, 1, 2, 3], started_at=NOW, wall_time=3600, expected_runtime=1800)
    assert predict_starts(snapshot(4, pending=[pending("b", begin=NOW + 600)], running=[busy]))["b"] == NOW + 1800


def test_a_singleton_is_expected_after_the_earlier_job_of_its_name_runs_in_the_replay():
    # 3 starts at once and runs 600 s; j, a singleton of the same name and owner, waits for it
    # though GPUs are free when r ends (+100): the replayed run carries its name as a real one does
    from gqa.scheduling.eta import predict_starts

    first = pending("3", name="train", seq=3, wall_time=600, expected_runtime=600)
    later = pending("j", name="train", dependency="singleton", seq=5, wall_time=60)
    r = running("r", gpus=[3], started_at=NOW, wall_time=100, expected_runtime=100)
    assert predict_starts(snapshot(4, pending=[later, first], running=[r])) == {"3": NOW, "j": NOW + 600}


TEXTS = ("afterok:1", "afterany:2:3", "afternotok:4?afterok:5", "after:6", "afterok:1,afterany:2",
         "afterok:7", "afterok:7_1", "afternotok:3", "afterany:1?after:6")
STATES = (RUN, QUEUED, OK, FAIL, TIMED_OUT, CANCELLED)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(
    st.dictionaries(st.sampled_from(["1", "2", "3", "4", "5", "6", "7", "7_1"]),
                    st.dictionaries(st.sampled_from(STATES), st.integers(0, 3), max_size=3), max_size=8),
    st.lists(st.sampled_from(TEXTS), min_size=1, max_size=6),
    st.booleans()), min_size=1, max_size=6))
def test_kept_verdicts_answer_as_verdicts_told_afresh(passes):
    """Pass after pass, the named states moving (in a new mapping, or the last one changed in place):
    the gate with its kept verdicts decides as a gate that tells every dependency afresh."""
    from gqa.scheduling import dependencies

    named: dict = {}
    for states, texts, in_place in passes:
        if in_place:   # the same mapping and the same inner dicts, changed where they stand
            for ref, counts in states.items():
                named.setdefault(ref, {}).clear()
                named[ref].update(counts)
        else:
            named = {ref: dict(counts) for ref, counts in states.items()}
        # the very mapping (the builder copies it), so a change in place reaches what the gate reads
        snap = replace(snapshot(4, pending=[pending(f"j{i}", dependency=t, seq=i) for i, t in enumerate(texts)]),
                       named=named)
        kept = gate(snap)
        saved = dict(dependencies._told)
        dependencies._told.clear()
        afresh = gate(snap)
        dependencies._told.update(saved)
        assert (kept.told, kept.never) == (afresh.told, afresh.never)


@pytest.mark.parametrize("job_id, named, waits, never", [
    # task 1 reads task 1 of array 12 alone
    ("20_1", {"12": {OK: 1, RUN: 2}, "12_1": {OK: 1}}, None, None),
    ("20_1", {"12": {OK: 2, RUN: 1}, "12_1": {RUN: 1}}, "waits for job 12_1 to succeed", None),
    ("20_1", {"12": {FAIL: 1, RUN: 2}, "12_1": {RUN: 1}}, "waits for job 12_1 to succeed", None),
    ("20_1", {"12": {CANCELLED: 1, RUN: 2}, "12_1": {CANCELLED: 1}},
     "dependency can never be met: job 12_1 was cancelled (aftercorr)",
     "dependency can never be met: job 12_1 was cancelled (aftercorr)"),
    # a task with no counterpart (array 12 has tasks 0-2) waits for the whole array to succeed, as in Slurm
    ("20_4", {"12": {OK: 2, RUN: 1}}, "waits for job 12_4 to succeed", None),
    ("20_4", {"12": {OK: 3}}, None, None),
    ("20_4", {"12": {OK: 2, FAIL: 1}}, "dependency can never be met: array 12: of its 3 tasks 1 failed (aftercorr)",
     "dependency can never be met: array 12: of its 3 tasks 1 failed (aftercorr)"),
    # a job that is no task, the same
    ("20", {"12": {OK: 2, RUN: 1}}, "waits for job 12 to succeed", None),
    ("20", {"12": {OK: 3}}, None, None),
])
def test_an_aftercorr_task_waits_for_the_task_of_its_index(job_id, named, waits, never):
    snap = snapshot(4, pending=[pending(job_id, dependency="aftercorr:12", seq=50)], named=named)
    decided = gate(snap)
    assert (decided.waiting.get(job_id), decided.never.get(job_id)) == (waits, never)


def test_an_aftercorr_verdict_is_each_task_s_own_though_the_tasks_share_the_text():
    jobs = [pending(f"20_{i}", group="20", dependency="aftercorr:12", seq=50 + i) for i in range(3)]
    named = {"12": {OK: 1, RUN: 1, FAIL: 1}, "12_0": {OK: 1}, "12_1": {RUN: 1}, "12_2": {FAIL: 1}}
    decided = gate(snapshot(4, pending=jobs, named=named))
    assert "20_0" not in decided
    assert decided.waiting["20_1"] == "waits for job 12_1 to succeed"
    assert decided.never == {"20_2": "dependency can never be met: job 12_2 failed (aftercorr)"}


@pytest.mark.parametrize("started, delay, waits", [
    ((NOW - 180, True), "+10", "waits for job 12, started 3m ago, + 10m: starts in 7m at the earliest"),
    ((NOW - 30, False), "+1", "waits for job 12, ended 30s ago, + 1m: starts in 30s at the earliest"),
    ((NOW - 600, True), "+10", None),
    ((NOW - 7200, True), "+180", "waits for job 12, started 2h00m ago, + 180m: starts in 1h00m at the earliest"),
])
def test_an_after_delay_counts_minutes_from_the_start_or_the_cancel(started, delay, waits):
    snap = replace(snapshot(4, pending=[pending("j", dependency=f"after:12{delay}", seq=50)],
                            named={"12": {RUN: 1}}), started={"12": started})
    assert gate(snap).waiting.get("j") == waits


def test_an_after_delay_waits_first_for_the_start_and_the_other_kinds_take_no_delay():
    assert verdict("after:12+10", {"12": {QUEUED: 1}}) == ("waits for job 12 to start", None)
    snap = replace(snapshot(4, pending=[pending("j", dependency="afterok:12+10", seq=50)],
                            named={"12": {OK: 1}}), started={"12": (NOW - 60, True)})
    assert "j" not in gate(snap)   # Slurm takes +time after afterok and waits no longer for it


def test_a_waiting_delay_is_told_again_at_each_pass_and_wakes_the_dispatcher_when_it_ends():
    job = pending("j", dependency="after:12+10", seq=50)
    first = replace(snapshot(4, pending=[job], named={"12": {RUN: 1}}), started={"12": (NOW - 300, True)})
    assert "j" in gate(first) and delay_ends(first) == [NOW + 300]
    later = replace(first, now=NOW + 300)
    assert "j" not in gate(later) and delay_ends(later) == []


@pytest.mark.parametrize("text, canonical", [
    ("after:12+10:13", "after:12+10:13"),
    ("AFTERCORR:12", "aftercorr:12"),
    ("afterok:12+5", "afterok:12+5"),
    ("after:12+05?aftercorr:14", "after:12+5?aftercorr:14"),
])
def test_a_delay_and_aftercorr_parse_and_keep_their_canonical_text(text, canonical):
    assert parse_dependency(text).text() == canonical


@pytest.mark.parametrize("text", ["after:12+0", "after:12+", "after:12+x", "after:12+1h"])
def test_a_delay_that_is_not_whole_minutes_is_refused(text):
    with pytest.raises(SpecError, match="a delay is whole minutes, 1 or more"):
        parse_dependency(text)
