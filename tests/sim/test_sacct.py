"""Slurm's accounting (`sacct --parsable2`) as a trace: rows built here for each rule, and the dumps
in tests/data/sacct, which a real Slurm wrote (record.sh there)."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gqa.sim import derive
from gqa.sim.sacct import is_sacct
from gqa.sim.trace import TraceError, load_trace

DUMPS = Path(__file__).parents[1] / "data" / "sacct"
HEADER = "JobID|Submit|Start|End|ElapsedRaw|AllocTRES|ReqTRES|TimelimitRaw|Account|QOS|User|JobName|State"


def row(job_id="7", submit="2026-12-07T10:00:00", start="2026-12-07T10:01:00", end="2026-12-07T10:11:00",
        elapsed="600", alloc="billing=2,cpu=2,gres/gpu=2,mem=1G,node=1", req="cpu=2,gres/gpu=2,mem=1G,node=1",
        limit="30", account="vision", qos="normal", user="ana", name="train", state="COMPLETED") -> str:
    return "|".join([job_id, submit, start, end, elapsed, alloc, req, limit, account, qos, user, name, state])


def dump(tmp_path, *rows: str, header: str = HEADER, name: str = "jobs.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_a_row_that_ran_on_gpus_is_a_job_with_the_limit_its_user_asked(tmp_path):
    trace = load_trace(dump(tmp_path, row()))
    assert trace.format == "sacct"
    (job,) = trace.jobs
    assert (job.id, job.duration, job.gpus, job.wall_time, job.team, job.priority, job.user, job.name) == \
        ("7", 600.0, 2, 1800.0, "vision", "normal", "ana", "train")
    assert trace.notes == ["Slurm accounting: 1 job that ran on GPUs", "time limits as asked for 1 of 1 jobs"]


@pytest.mark.parametrize("changes, counted", [
    ({"job_id": "7.batch"}, "1 job step (sacct -X leaves steps out)"),
    ({"job_id": "7.0"}, "1 job step ("),
    ({"start": "Unknown", "end": "2026-12-07T10:05:00", "elapsed": "0", "state": "CANCELLED by 1000"},
     "1 that never started"),
    ({"start": "None", "end": "Unknown", "elapsed": "0", "state": "PENDING"}, "1 that never started"),
    # cancelled waiting, as Slurm 22.05 records it: a start at its end, nothing allocated
    ({"start": "2026-12-07T10:05:00", "end": "2026-12-07T10:05:00", "elapsed": "0", "alloc": "",
      "state": "CANCELLED by 0"}, "1 that never started"),
    ({"end": "Unknown", "state": "RUNNING"}, "1 running or requeued at the dump"),
    # sacct -T: a job still running gets the dump's end as its End, and its run so far
    ({"end": "2026-12-08T10:01:00", "elapsed": "86400", "state": "RUNNING"}, "1 running or requeued at the dump"),
    ({"end": "2026-12-08T10:01:00", "elapsed": "86400", "state": "SUSPENDED"}, "1 running or requeued at the dump"),
    ({"alloc": "billing=1,cpu=1,mem=1G,node=1", "req": "cpu=1,mem=1G,node=1"},
     "1 that asked no GPU (no gres/gpu in AllocTRES or ReqTRES)"),
    ({"elapsed": "0", "end": "2026-12-07T10:01:00", "state": "FAILED"}, "1 that ran 0 s"),
])
def test_what_never_ran_on_a_gpu_is_left_out_and_counted(tmp_path, changes, counted):
    trace = load_trace(dump(tmp_path, row(job_id="1"), row(**changes)))
    assert [j.id for j in trace.jobs] == ["1"]
    assert counted in trace.notes[0]


def test_a_dump_where_no_job_has_gpus_asks_whether_slurm_accounts_them(tmp_path):
    trace = load_trace(dump(tmp_path, row(alloc="cpu=1", req="cpu=1")))
    assert trace.jobs == [] and "is gres/gpu in the cluster's AccountingStorageTRES?" in trace.notes[0]


@pytest.mark.parametrize("alloc, req, gpus, gpu_type", [
    ("cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G", "", 4, "a100"),   # the typed and the untyped count: once
    ("cpu=8,gres/gpu:a100=2,gres/gpu:v100=1", "", 3, None),         # two types: their sum, no one type
    ("cpu=8,gres/gpu=2", "cpu=8,gres/gpu:h100=2", 2, None),         # its allocation names none
    ("", "cpu=1,gres/gpu:l4=1,gres/gpu=1", 1, "l4"),                # nothing allocated recorded: what it asked
    ("billing=1,cpu=1", "cpu=1,gres/gpu=2", 2, None),
])
def test_gpus_and_their_type_from_the_tres_lists(tmp_path, alloc, req, gpus, gpu_type):
    (job,) = load_trace(dump(tmp_path, row(alloc=alloc, req=req))).jobs
    assert (job.gpus, job.gpu_type) == (gpus, gpu_type)


@pytest.mark.parametrize("limit, seconds", [("30", 1800.0), ("UNLIMITED", None), ("Partition_Limit", None),
                                            ("", None), ("0", None)])
def test_time_limit_in_minutes_or_none_of_its_own(tmp_path, limit, seconds):
    trace = load_trace(dump(tmp_path, row(limit=limit)))
    assert trace.jobs[0].wall_time == seconds
    if seconds is None:
        assert "(the rest, UNLIMITED or the partition's, get one from --estimates)" in trace.notes[-1]


def test_the_formatted_columns_serve_where_the_raw_ones_are_missing(tmp_path):
    header = "JobID|Submit|Start|End|Elapsed|AllocTRES|Timelimit"
    path = dump(tmp_path, "5_3|2026-12-07T10:00:00|2026-12-07T10:00:30|2026-12-07T11:30:30|01:30:00|gres/gpu=1|"
                          "1-12:00:00",
                "6|2026-12-07T10:00:00|2026-12-07T10:00:30|2026-12-07T10:00:40|00:00:10|gres/gpu=1|45",
                header=header)
    a, b = load_trace(path).jobs
    assert (a.id, a.duration, a.wall_time, a.team, a.priority) == ("5_3", 5400.0, 36 * 3600.0, None, None)
    assert (b.duration, b.wall_time) == (10.0, 45 * 60.0)   # a bare Timelimit is minutes, as in Slurm


def test_run_time_from_end_and_start_where_no_elapsed_column(tmp_path):
    header = "JobIDRaw|Submit|Start|End|ReqTRES"
    path = dump(tmp_path, "9|2026-12-07T10:00:00|2026-12-07T10:00:30|2026-12-07T10:02:30|gres/gpu=8", header=header)
    (job,) = load_trace(path).jobs
    assert (job.id, job.duration, job.gpus) == ("9", 120.0, 8)


def test_a_requeued_jobs_attempts_are_one_job(tmp_path):
    path = dump(tmp_path,
                row(job_id="3", submit="2026-12-07T09:00:00", elapsed="100", state="REQUEUED"),
                row(job_id="3", submit="2026-12-07T09:30:00", elapsed="250"))
    trace = load_trace(path)
    (job,) = trace.jobs
    assert (job.duration, job.submit_time) == (350.0, load_trace(dump(tmp_path, row(
        submit="2026-12-07T09:00:00"), name="one.txt")).jobs[0].submit_time)
    assert "1 job requeued" in trace.notes[1]


CLUSTERED = "Cluster|" + HEADER


@pytest.mark.parametrize("rows, header, jobs", [
    # job 500 on January 1st, and, Slurm's counter wrapped, another job 500 on March 1st
    ([row(job_id="500", submit="2026-01-01T00:00:00", start="2026-01-01T00:00:00", end="2026-01-01T00:01:40",
          elapsed="100", alloc="gres/gpu=1", account="a", name="first"),
      row(job_id="501", submit="2026-01-01T00:00:00", start="2026-01-01T00:00:00", end="2026-01-01T00:01:40",
          elapsed="100", alloc="gres/gpu=1"),
      row(job_id="500", submit="2026-03-01T00:00:00", start="2026-03-01T00:00:00", end="2026-03-01T00:01:40",
          elapsed="100", alloc="gres/gpu=2", account="b", user="v", name="second")],
     HEADER, [("500", 100.0, 1, "a"), ("501", 100.0, 1, "vision"), ("500'", 100.0, 2, "b")]),
    # the earlier attempt was requeued: one job, arriving with the first, running as long as both
    ([row(job_id="3", submit="2026-12-07T09:00:00", start="2026-12-07T09:01:00", elapsed="100", state="REQUEUED"),
      row(job_id="3", submit="2026-12-07T09:30:00", start="2026-12-07T09:31:00", elapsed="250")],
     HEADER, [("3", 350.0, 2, "vision")]),
    # attempts that kept their Submit (a node failed under the first): one job
    ([row(job_id="4", start="2026-12-07T10:01:00", end="2026-12-07T10:02:00", elapsed="60", state="NODE_FAIL"),
      row(job_id="4", start="2026-12-07T10:05:00", end="2026-12-07T10:10:00", elapsed="300")],
     HEADER, [("4", 360.0, 2, "vision")]),
    # sacct -M all: job 9 of two clusters, submitted at the same moment
    (["east|" + row(job_id="9", account="a"), "west|" + row(job_id="9", account="b", elapsed="300")],
     CLUSTERED, [("9", 600.0, 2, "a"), ("9'", 300.0, 2, "b")]),
    # a repeat of one cluster's attempt is still read once
    (["east|" + row(job_id="9"), "east|" + row(job_id="9")], CLUSTERED, [("9", 600.0, 2, "vision")]),
], ids=["id-given-again", "requeued", "same-submit", "two-clusters", "one-cluster-twice"])
def test_rows_with_one_id_are_one_job_only_where_requeued_or_submitted_together(tmp_path, capsys, rows, header,
                                                                                   jobs):
    """sacct -D's attempts of a requeued job are one job; a job Slurm gave the id of an earlier one, or
    another cluster's job of that id, is one of its own."""
    from cli.main import main

    path = dump(tmp_path, *rows, header=header)
    trace = load_trace(path)
    assert sorted((j.id, j.duration, j.gpus, j.team) for j in trace.jobs) == sorted(jobs)
    assert ("each replayed as its own, its id marked with a '" in " ".join(trace.notes)) is \
        any(i.endswith("'") for i, *_ in jobs)
    assert main(["simulate", str(path), "--gpus", "4", "--policies", "fifo", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["jobs"] == out["as_it_ran"]["jobs"] == len(jobs)
    if len(trace.jobs) == 3:   # the two jobs 500, each as it ran: 100 s from its own arrival
        assert out["as_it_ran"]["mean_jct"] == pytest.approx(100.0)


def test_a_requeued_job_waiting_again_at_the_dump_is_left_out(tmp_path):
    trace = load_trace(dump(tmp_path, row(job_id="3", state="REQUEUED"),
                            row(job_id="3", start="Unknown", end="Unknown", elapsed="0", state="PENDING")))
    assert trace.jobs == [] and "1 running or requeued at the dump" in trace.notes[0]


def test_a_job_whose_last_attempt_was_requeued_waits_again_at_the_dump(tmp_path):
    trace = load_trace(dump(tmp_path, row(job_id="1"), row(job_id="3", state="REQUEUED")))
    assert [j.id for j in trace.jobs] == ["1"] and "1 running or requeued at the dump" in trace.notes[0]


def test_a_job_arrives_when_it_was_eligible(tmp_path):
    header = "JobID|Submit|Eligible|Start|End|ElapsedRaw|AllocTRES"
    path = dump(tmp_path, "1|2026-12-07T10:00:00|2026-12-07T10:00:00|2026-12-07T10:00:05|2026-12-07T10:01:05|60|"
                          "gres/gpu=1",
                "2|2026-12-07T10:00:00|2026-12-07T10:30:00|2026-12-07T10:30:05|2026-12-07T10:31:05|60|gres/gpu=1",
                "3|2026-12-07T10:00:00|Unknown|2026-12-07T10:00:05|2026-12-07T10:01:05|60|gres/gpu=1", header=header)
    a, c, b = load_trace(path).jobs   # --begin or a dependency held 2 back half an hour
    assert (b.id, b.submit_time - a.submit_time, c.submit_time - a.submit_time) == ("2", 1800.0, 0.0)


def test_dumps_of_overlapping_periods_put_together_keep_each_job_once_as_it_stood_last(tmp_path):
    november = [HEADER, row(job_id="1"), row(job_id="2", end="Unknown", state="RUNNING")]
    december = [HEADER, row(job_id="2", elapsed="7200", end="2026-12-07T12:01:00"), row(job_id="3")]
    path = tmp_path / "both.txt"
    path.write_text("\n".join(november + december) + "\n")   # cat november.txt december.txt
    trace = load_trace(path)
    assert [(j.id, j.duration) for j in trace.jobs] == [("1", 600.0), ("2", 7200.0), ("3", 600.0)]
    assert trace.notes[0] == ("Slurm accounting: 3 jobs that ran on GPUs; left out: 1 row repeated (dumps of "
                              "overlapping periods: each read once, as it stood last)")


WITH_ELIGIBLE = HEADER.replace("Submit|", "Submit|Eligible|")


def eligible_row(eligible: str = "2026-12-07T10:00:00", **changes: str) -> str:
    """row(), with the Eligible column after Submit (Unknown while a dependency holds the job back)."""
    job_id, submit, *rest = row(**changes).split("|")
    return "|".join([job_id, submit, eligible, *rest])


WAITING = {"start": "Unknown", "end": "Unknown", "elapsed": "0", "alloc": "", "state": "PENDING"}
# job 10 depends on job 9: in November 9 runs and 10 waits, not yet eligible; by December both ended
NOV = [eligible_row(job_id="9", end="Unknown", elapsed="1", state="RUNNING"),
       eligible_row("Unknown", job_id="10", **WAITING)]
DEC = [eligible_row(job_id="9"),
       eligible_row("2026-12-07T10:11:00", job_id="10", start="2026-12-07T10:11:00", end="2026-12-07T10:21:00")]
# -D: job 3 requeued; its second attempt (Submit at the requeue) waits in November, ends by December
FIRST_TRY = eligible_row("2026-12-07T09:00:00", job_id="3", submit="2026-12-07T09:00:00",
                         start="2026-12-07T09:01:00", end="2026-12-07T09:03:00", elapsed="120", state="REQUEUED")
NOV_REQUEUED = [FIRST_TRY, eligible_row("2026-12-07T09:03:00", job_id="3", submit="2026-12-07T09:03:00", **WAITING)]
DEC_REQUEUED = [FIRST_TRY, eligible_row("2026-12-07T09:03:00", job_id="3", submit="2026-12-07T09:03:00",
                                        start="2026-12-07T09:10:00", end="2026-12-07T09:20:00")]


@pytest.mark.parametrize("first, then, alone", [
    (NOV, DEC, DEC),                                      # waiting (and running) in one dump, ended in the next
    (DEC, NOV, DEC),                                      # put together the other way round
    (NOV_REQUEUED, DEC_REQUEUED, DEC_REQUEUED),           # a requeued job's next attempt waiting, then ended
    (DEC_REQUEUED, NOV_REQUEUED, DEC_REQUEUED),
    (DEC, DEC, DEC),                                      # the same dump twice
], ids=["waiting-then-ended", "ended-then-waiting", "requeued-waiting-then-ended", "requeued-ended-then-waiting",
        "twice"])
def test_overlapping_dumps_put_together_replay_as_the_dump_that_saw_the_jobs_end(tmp_path, capsys, first, then,
                                                                                 alone):
    from cli.main import main

    last = dump(tmp_path, *alone, header=WITH_ELIGIBLE, name="dec.txt")
    both = tmp_path / "both.txt"
    both.write_text("\n".join([WITH_ELIGIBLE, *first, WITH_ELIGIBLE, *then]) + "\n")   # cat nov.txt dec.txt
    once, joined = load_trace(last), load_trace(both)
    assert joined.jobs == once.jobs
    assert joined.notes[0] == once.notes[0] + ("; left out: 2 rows repeated (dumps of overlapping periods: each "
                                               "read once, as it stood last)")
    assert joined.notes[1:] == once.notes[1:]
    replays = []
    for path in (last, both):
        assert main(["simulate", str(path), "--gpus", "2", "--policies", "fifo", "-o", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        replays.append((out["jobs"], out["policies"], out["as_it_ran"]))
    assert replays[0] == replays[1]


def test_a_real_dump_twice_over_is_the_dump_once(tmp_path):
    once = load_trace(DUMPS / "allocations.txt")
    text = (DUMPS / "allocations.txt").read_text()
    (tmp_path / "twice.txt").write_text(text + text)
    twice = load_trace(tmp_path / "twice.txt")
    assert twice.jobs == once.jobs
    assert f"{len(text.splitlines()) - 1} rows repeated" in twice.notes[0]


def test_qos_names_the_tier_and_others_are_normal_and_said(tmp_path):
    trace = load_trace(dump(tmp_path, row(job_id="1", qos="high"), row(job_id="2", qos="LOW"),
                            row(job_id="3", qos="debug"), row(job_id="4", qos="debug"),
                            row(job_id="5", qos="debug", alloc="cpu=1", req="cpu=1")))   # not replayed: not counted
    assert [j.priority for j in trace.jobs] == ["high", "low", None, None]
    assert trace.notes[-1] == ("priority from QOS high, normal and low; other QOS read as normal: debug (2) "
                               "(--qos-tiers NAME=TIER says otherwise)")


def test_parsable_with_a_trailing_delimiter_and_epoch_times(tmp_path):
    header = "JobID|Submit|Start|End|ElapsedRaw|AllocTRES|"
    path = dump(tmp_path, "1|1765100000|1765100060|1765100660|600|gres/gpu=1|", header=header)
    (job,) = load_trace(path).jobs   # SLURM_TIME_FORMAT=%s prints epoch seconds
    assert (job.submit_time, job.duration) == (1765100000.0, 600.0)


@pytest.mark.parametrize("changes, message", [
    ({"submit": "yesterday"}, "line 2: Submit is not a time: 'yesterday'"),
    ({"submit": ""}, "line 2: Submit is empty"),
    ({"elapsed": "ten"}, "line 2: ElapsedRaw is not whole seconds: 'ten'"),
    ({"limit": "1.5"}, "line 2: TimelimitRaw is not whole minutes: '1.5'"),
    ({"alloc": "gres/gpu=two"}, "line 2: AllocTRES: gres/gpu is not a whole number: 'two'"),
    ({"name": "a|b"}, "line 2: 14 fields where the header has 13 .*--delimiter"),
    ({"job_id": ""}, "line 2: the job's id is empty"),
    ({"elapsed": "400000000"}, "line 2: the run of 4e\\+08 s is over 10 years"),
    ({"limit": "9999999999"}, "line 2: the time limit of .* is over 10 years"),
    # a dump of local times across a daylight-saving change: a wait or a run that would be negative
    ({"start": "2026-12-07T09:00:00", "end": "2026-12-07T09:10:00"},
     r"line 2: Start 2026-12-07T09:00:00 is before Submit 2026-12-07T10:00:00 \(a daylight-saving change\? "
     r"dump with SLURM_TIME_FORMAT=%s for epoch seconds\)"),
    ({"end": "2026-12-07T10:00:30"}, "line 2: End 2026-12-07T10:00:30 is before Start 2026-12-07T10:01:00 "),
])
def test_a_bad_row_names_its_line(tmp_path, changes, message):
    with pytest.raises(TraceError, match=message):
        load_trace(dump(tmp_path, row(**changes), row(job_id="8")))


NO_ELAPSED = "JobID|Submit|Start|End|AllocTRES"


@pytest.mark.parametrize("header, good, bad, message", [
    # no run time of its own: End - Start, below 0
    (NO_ELAPSED, "401|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T00:05:00|gres/gpu=1",
     "400|2026-01-01T00:00:00|2026-01-01T00:10:00|2026-01-01T00:05:00|gres/gpu=1",
     r"line 3: End 2026-01-01T00:05:00 is before Start 2026-01-01T00:10:00 \(a daylight-saving"),
    # epoch seconds: no change of the clocks to blame
    (NO_ELAPSED, "401|1765100000|1765100000|1765100300|gres/gpu=1", "400|1765100000|1765100600|1765100300|gres/gpu=1",
     r"line 3: End 1765100300 is before Start 1765100600$"),
    (NO_ELAPSED, "401|1765100000|1765100000|1765100300|gres/gpu=1", "400|1765100600|1765100000|1765100300|gres/gpu=1",
     r"line 3: Start 1765100000 is before Submit 1765100600$"),
    # held back an hour (--begin), yet started within it
    ("JobID|Submit|Eligible|Start|End|ElapsedRaw|AllocTRES",
     "401|2026-01-01T00:00:00|2026-01-01T01:00:00|2026-01-01T01:30:00|2026-01-01T01:40:00|600|gres/gpu=1",
     "400|2026-01-01T00:00:00|2026-01-01T01:00:00|2026-01-01T00:30:00|2026-01-01T00:40:00|600|gres/gpu=1",
     r"line 3: Start 2026-01-01T00:30:00 is before Eligible 2026-01-01T01:00:00 "),
])
def test_a_row_whose_times_run_backwards_stops_the_run_with_its_line(tmp_path, capsys, header, good, bad, message):
    from cli.main import main

    assert len(load_trace(dump(tmp_path, good, header=header, name="good.txt")).jobs) == 1
    path = dump(tmp_path, good, bad, header=header)
    with pytest.raises(TraceError, match=message):
        load_trace(path)
    assert main(["simulate", str(path), "--gpus", "2", "--policies", "fifo", "-o", "json"]) == 2
    assert capsys.readouterr().err.startswith(f"gqa: error: {path}: line 3: ")


def test_a_line_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "jobs.txt"
    good = ("\ufeff" + HEADER + "\n" + row(job_id="1") + "\n").encode()
    path.write_bytes(good + row(name="caf\xe9").encode("latin-1"))
    with pytest.raises(TraceError, match=r"line 3: byte 0xe9 is not UTF-8"):
        load_trace(path)   # the byte-order mark before the header is skipped


def test_a_header_without_what_a_replay_needs_says_how_to_dump_it(tmp_path):
    with pytest.raises(TraceError, match=r"line 1: Slurm's accounting needs its start \(Start\), its GPUs "
                                         r"\(AllocTRES or ReqTRES\); dump it with: sacct -a -X -P"):
        load_trace(dump(tmp_path, "1|2026-12-07T10:00:00|600", header="JobID|Submit|ElapsedRaw"))


def test_a_dump_with_commas_between_its_columns_says_how_to_dump_it(tmp_path):
    path = dump(tmp_path, row().replace("|", ","), header=HEADER.replace("|", ","))
    with pytest.raises(TraceError, match=r"line 1: this reads as Slurm's accounting with ',' between its "
                                         r"columns; dump it with -P \(--parsable2\), '\|' between them"):
        load_trace(path)


@pytest.mark.parametrize("line, is_it", [(HEADER, True), ("jobidraw|submit", True), ("JobID,Submit", False),
                                         ("submit_time,duration,gpus", False), ("a|b|c", False), ("", False)])
def test_what_is_read_as_sacct(line, is_it):
    assert is_sacct(line) is is_it


# -- the dumps a real Slurm wrote ---------------------------------------------------------------------


def test_slurms_own_dump_of_allocations():
    trace = load_trace(DUMPS / "allocations.txt")
    by_name = {j.name: j for j in trace.jobs}
    assert trace.format == "sacct"
    # every job that ran on a GPU, array tasks one by one
    assert sorted(j.name or "" for j in trace.jobs) == sorted(
        ["train resnet", "eval", "big", "overrun", "crash", "forever", "later", "stopped", "requeued"] + ["sweep"] * 6)
    group = by_name["sweep"].id.split("_")[0]
    assert sorted(j.id for j in trace.jobs if j.name == "sweep") == [f"{group}_{i}" for i in range(6)]
    assert (by_name["eval"].gpus, by_name["eval"].priority, by_name["eval"].team) == (2, "high", "teamb")
    assert (by_name["big"].gpus, by_name["big"].priority, by_name["big"].wall_time) == (4, "low", 86400.0)
    assert by_name["train resnet"].wall_time == 300.0 and 12 <= by_name["train resnet"].duration <= 15
    assert by_name["overrun"].wall_time == 60.0 and by_name["overrun"].duration >= 60   # TIMEOUT
    assert by_name["forever"].wall_time is None                                            # UNLIMITED
    assert by_name["stopped"].duration < 600                                               # cancelled running
    assert by_name["later"].submit_time >= by_name["eval"].submit_time + 20                # --begin=now+20
    # what happened: each job's recorded start and end (big waited for all 4 GPUs)
    assert all(j.submit_time <= j.started < j.ended == j.started + j.duration for j in trace.jobs)
    assert by_name["big"].started - by_name["big"].submit_time > 60
    # never, cancelled waiting, and still-waiting; still-running; cpu-only
    assert trace.notes[0] == ("Slurm accounting: 15 jobs that ran on GPUs; left out: 2 that never started, "
                              "1 running or requeued at the dump, 1 that asked no GPU (no gres/gpu in "
                              "AllocTRES or ReqTRES)")


def test_slurms_dump_with_steps_and_requeues_gives_the_same_jobs_but_the_requeued_ones_run():
    allocations = {j.id: j for j in load_trace(DUMPS / "allocations.txt").jobs}
    every_row = load_trace(DUMPS / "steps-and-requeues.txt")
    assert "job steps (sacct -X leaves steps out)" in every_row.notes[0]
    assert any("1 job requeued" in note for note in every_row.notes)
    assert sorted(j.id for j in every_row.jobs) == sorted(allocations)
    for job in every_row.jobs:
        mine = allocations[job.id]
        if job.name == "requeued":   # -X shows its last attempt; -D each, and the first's submit time
            assert job.duration > mine.duration and job.submit_time <= mine.submit_time
            assert job.started < mine.started and job.ended == mine.ended   # its first start, its last end
        else:
            assert (job.submit_time, job.duration, job.gpus, job.wall_time) == \
                (mine.submit_time, mine.duration, mine.gpus, mine.wall_time)


@pytest.mark.parametrize("name", ["allocations.txt", "steps-and-requeues.txt"])
def test_the_gpus_a_real_dump_held_at_once_are_the_recording_clusters(capsys, name):
    """record.sh ran on one node with 4 GPUs. With -D the requeued job's attempts are one job, whose
    GPUs count only while an attempt ran: not in between, while a 4-GPU job held them all."""
    from cli.main import main
    from gqa.sim.metrics import most_held

    path = str(DUMPS / name)
    assert most_held(load_trace(path).jobs) == 4
    assert main(["simulate", path]) == 2
    assert f"{path}'s jobs held 4 GPUs at once at the most" in capsys.readouterr().err


def test_a_dump_replays_with_its_users_limits_and_estimates_for_the_rest():
    work = derive(load_trace(DUMPS / "allocations.txt").jobs, cluster_gpus=4, seed=0)
    asked = {j.id: j.wall_time for j in work.jobs}
    trace = {j.id: j for j in load_trace(DUMPS / "allocations.txt").jobs}
    assert all(asked[i] == j.wall_time for i, j in trace.items() if j.wall_time)
    assert any("1 job without one" in line for line in work.assumptions)   # the UNLIMITED job's
    assert {j.team for j in work.jobs} == {"teama", "teamb"}


def test_gqa_simulate_replays_a_dump_and_says_what_it_left_out(capsys):
    from cli.main import main

    assert main(["simulate", str(DUMPS / "allocations.txt"), "--gpus", "4", "--policies", "fifo,gqa",
                 "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["jobs"] == len(load_trace(DUMPS / "allocations.txt").jobs)
    assert any(line.startswith("Slurm accounting: ") for line in out["assumptions"])


# a spoilt byte anywhere in a real dump: a trace, or one TraceError naming the file and line
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(at=st.integers(0, 10**6), cut=st.integers(0, 40),
       spoil=st.sampled_from([b"|", b"\xff", b"\n", b"x", b"-", b":", b"=", b"", b"99999999"]))
def test_a_spoilt_dump_is_read_or_refused_with_its_line(tmp_path_factory, at, spoil, cut):
    text = (DUMPS / "steps-and-requeues.txt").read_bytes()
    at %= len(text)
    path = tmp_path_factory.mktemp("spoilt") / "sacct.txt"
    path.write_bytes(text[:at] + spoil + text[at + cut % 3:])
    try:
        trace = load_trace(path)
    except TraceError as exc:
        assert str(exc).startswith(f"{path}: line ") and "\n" not in str(exc)
    else:
        assert all(j.duration > 0 and j.gpus > 0 for j in trace.jobs)


def test_the_estimates_fit_reads_a_dump_as_it_reads_a_public_log():
    import subprocess
    import sys

    script = Path(__file__).parents[2] / "benchmarks" / "fit_estimates.py"
    done = subprocess.run([sys.executable, str(script), str(DUMPS / "allocations.txt")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    jobs = load_trace(DUMPS / "allocations.txt").jobs
    limited = [j for j in jobs if j.wall_time]
    killed = sum(1 for j in limited if j.duration >= j.wall_time) / len(limited)   # the TIMEOUT job's
    assert done.stdout.startswith(f"{len(limited)} jobs with both times ({len(jobs) - len(limited)} without)")
    assert f"killed at their limit (used >= requested): {killed:.3f}" in done.stdout
    # neither a dump nor a log: one line, exit 2
    spoilt = subprocess.run([sys.executable, str(script), str(DUMPS / "record.sh")], capture_output=True,
                            text=True, timeout=120)
    assert (spoilt.returncode, spoilt.stdout) == (2, "") and spoilt.stderr.startswith(f"{DUMPS / 'record.sh'}: ")


def test_gqa_simulate_shows_the_dump_as_it_ran_beside_the_replays(capsys):
    from cli.main import main

    dump_path = str(DUMPS / "allocations.txt")
    assert main(["simulate", dump_path, "--gpus", "4", "--policies", "gqa", "--limit", "10", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["as_it_ran"]["jobs"] == out["jobs"] == 10       # the same jobs: the first 10 arrivals
    gqa = out["policies"]["gqa"]
    assert out["ratios_vs_as_it_ran"]["gqa"]["mean_jct"] == pytest.approx(gqa["mean_jct"] /
                                                                          out["as_it_ran"]["mean_jct"])
    assert any(line.startswith("as it ran: the trace's own starts and ends of the 10 jobs")
               and line.endswith("they held at most 4 GPUs at once") for line in out["assumptions"])
    # no --gpus: the refusal says how many the dump's jobs held at once
    assert main(["simulate", dump_path]) == 2
    assert capsys.readouterr().err == (f"gqa: error: say how many GPUs to simulate: --gpus N (or --pools FILE); "
                                       f"{dump_path}'s jobs held 4 GPUs at once at the most, so its cluster had "
                                       "at least that\n")
    assert main(["simulate", dump_path, "--gpus", "4", "--policies", "gqa"]) == 0
    table = capsys.readouterr().out
    assert "\nas it ran " in table and "gqa / as it ran: mean wait " in table
    # arrivals moved: what happened no longer compares, and the run says so
    assert main(["simulate", dump_path, "--gpus", "4", "--policies", "gqa", "--load", "2", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "as_it_ran" not in out and "as it ran: not shown, as --load 2 moves the arrivals" in out["assumptions"]


def test_gqa_simulate_says_why_a_dump_has_nothing_to_replay(tmp_path, capsys):
    from cli.main import main

    path = dump(tmp_path, row(alloc="cpu=1", req="cpu=1"), row(job_id="8", end="Unknown", state="RUNNING"))
    assert main(["simulate", str(path), "--gpus", "4"]) == 2
    err = capsys.readouterr().err
    assert err == (f"gqa: error: {path}: no jobs to replay (Slurm accounting: 0 jobs that ran on GPUs; left out: "
                   "1 running or requeued at the dump, 1 that asked no GPU (no gres/gpu in AllocTRES or ReqTRES; "
                   "none has one: is gres/gpu in the cluster's AccountingStorageTRES?))\n")


def test_gqa_simulate_names_a_trace_it_may_not_read(tmp_path, capsys, monkeypatch):
    from cli.main import main

    def refused(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    path = dump(tmp_path, row())
    monkeypatch.setattr(Path, "open", refused)   # as a file of another user's, mode 600, would be
    assert main(["simulate", str(path), "--gpus", "4"]) == 2
    assert capsys.readouterr().err == f"gqa: error: {path}: Permission denied\n"


def test_qos_tiers_name_the_tier_of_a_sites_own_qos(tmp_path, capsys):
    from cli.main import main

    path = dump(tmp_path, row(job_id="1", qos="urgent"), row(job_id="2", qos="scavenger"),
                row(job_id="3", qos="normal"), row(job_id="4", qos="Scavenger"))
    assert load_trace(path).notes[-1] == ("priority from QOS high, normal and low; other QOS read as normal: "
                                          "scavenger (2), urgent (1) (--qos-tiers NAME=TIER says otherwise)")
    assert main(["simulate", str(path), "--gpus", "2", "--policies", "gqa", "--qos-tiers",
                 "urgent=high,SCAVENGER=2,debug=low", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "QOS as tiers (--qos-tiers): urgent=high (1 job), scavenger=low (2 jobs)" in out["assumptions"]
    assert "--qos-tiers names QOS no job has: debug" in out["assumptions"]
    assert set(out["policies"]["gqa"]["tier_mean_jct"]) == {"high", "normal", "low"}


@pytest.mark.parametrize("tiers, message", [
    ("urgent", "QOS tiers are QOS=TIER pairs, comma-separated (urgent=high,scavenger=low), not 'urgent'"),
    ("=high", "QOS tiers are QOS=TIER pairs"),
    ("urgent=top", "the tier of urgent must be high, normal or low (or 0, 1, 2), not 'top'"),
    ("urgent=high,URGENT=low", "URGENT is given a tier twice"),
])
def test_bad_qos_tiers_are_refused_before_any_replay(tmp_path, capsys, tiers, message):
    from cli.main import main

    assert main(["simulate", str(dump(tmp_path, row())), "--gpus", "2", "--qos-tiers", tiers]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gqa: error: --qos-tiers: {message}") and len(err.strip().splitlines()) == 1
