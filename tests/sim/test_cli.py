"""`gqa simulate` in-process: the JSON shape, determinism, and bad input."""

import json
from pathlib import Path

import pytest

from cli.main import main
from gqa.sim.policies import NAMES

GOLDEN = str(Path(__file__).with_name("golden.csv"))
POLICY_KEYS = {"mean_wait", "p99_wait", "mean_jct", "mean_slowdown", "utilisation", "makespan",
               "max_team_slowdown", "jain_fairness", "eta_median_abs_error"}


def run(capsys, *args):
    capsys.readouterr()
    code = main(["simulate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def as_json(capsys, *args):
    code, out, err = run(capsys, *args, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def test_json_shape(capsys):
    data = as_json(capsys, GOLDEN, "--gpus", "4")
    assert {"trace", "gpus", "jobs", "assumptions", "policies"} <= set(data)
    assert (data["trace"], data["gpus"], data["jobs"]) == ("golden.csv", 4, 8)
    # every policy unless --policies; las-tiers, with every job in one tier, would replay as las
    assert list(data["policies"]) == [n for n in NAMES if n != "las-tiers"]
    assert "las-tiers left out: every job is in one tier, where it replays as las" in data["assumptions"]
    for summary in data["policies"].values():
        assert POLICY_KEYS <= set(summary)
        assert summary["eta_median_abs_error"] is None or summary["eta_median_abs_error"] >= 0
        assert 0 < summary["utilisation"] <= 1
    assert data["policies"]["fifo"]["mean_wait"] == (0 + 99 + 148 + 147 + 145 + 194 + 343 + 422) / 8
    assert data["ratios_vs_fifo"]["gqa"]["mean_wait"] < 1


def test_table_output(capsys):
    code, out, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo,gqa,las")
    assert code == 0, err
    assert "golden.csv" in out and "gqa / fifo" in out and "fifo:" in err
    # the pass predicts starts for the policies it replays; las, its own replay, predicts none
    assert "gqa ETA error at submit: median" in out
    assert "las ETA error at submit: none predicted" in out


def synthetic(tmp_path) -> str:
    rows = [f"{i * 97 % 5000},{300 + i * 613 % 20000},{1 + i % 3}" for i in range(120)]
    path = tmp_path / "jobs.csv"
    path.write_text("submit_time,duration,gpus\n" + "\n".join(rows) + "\n")
    return str(path)


def test_same_seed_same_numbers_other_seed_other_wall_times(tmp_path, capsys):
    trace = synthetic(tmp_path)
    a = as_json(capsys, trace, "--gpus", "6", "--seed", "7", "--eta-every", "10")
    b = as_json(capsys, trace, "--gpus", "6", "--seed", "7", "--eta-every", "10")
    c = as_json(capsys, trace, "--gpus", "6", "--seed", "8", "--eta-every", "10")
    assert a == b
    assert a["policies"]["gqa"] != c["policies"]["gqa"]  # wall times moved, and gqa orders by them
    assert any("every 10th arrival (12 jobs)" in line for line in a["assumptions"])


def test_limit_load_and_pools(tmp_path, capsys):
    trace = synthetic(tmp_path)
    assert as_json(capsys, trace, "--gpus", "6", "--limit", "10", "--load", "2")["jobs"] == 10
    no_eta = as_json(capsys, trace, "--gpus", "6", "--limit", "10", "--eta-every", "0")
    assert no_eta["policies"]["fifo"]["eta_median_abs_error"] is None
    pools = tmp_path / "pools.yaml"
    pools.write_text("- {name: od, gpu_type: a100, spot: false, gpus: 2, price_per_gpu_hour: 4.0}\n"
                     "- {name: spot, gpu_type: a100, spot: true, gpus: 4, price_per_gpu_hour: 1.5,"
                     " reclaim_rate_per_hour: 0.2}\n")
    data = as_json(capsys, trace, "--pools", str(pools), "--policies", "gqa", "--eta-every", "0")
    assert data["gpus"] == 6 and data["policies"]["gqa"]["cost"] > 0
    assert data["policies"]["gqa"]["spot_saving"] > 0


@pytest.mark.parametrize("args, message", [
    (["--gpus", "4", "--policies", "lifo"], "unknown policy lifo"),
    ([], "--gpus N"),
    (["--gpus", "0"], "--gpus 0: a cluster needs at least 1 GPU"),
    (["--gpus", "-3"], "--gpus -3: a cluster needs at least 1 GPU"),
    (["--gpus", "100000000000"], "--gpus 100000000000: a replay may have at most 1,000,000 GPUs"),  # ran out of memory
    (["--gpus", "4", "--load", "0"], "--load must be a number from 0.01 (arrivals 100 times as far apart), got 0"),
    (["--gpus", "4", "--load", "nan"], "--load must be a number from 0.01"),   # a replay that never ended
    (["--gpus", "4", "--load", "inf"], "--load must be a number from 0.01 (arrivals 100 times as far apart), got inf"),
    (["--gpus", "4", "--load", "1e-300"], "got 1e-300"),   # its times ran to 300 digits
    (["--gpus", "4", "-o", "xml"], "unknown output format"),
    (["--gpus", "4", "--estimates", "oracle"], "--estimates: unknown estimates mode 'oracle'; choose from model, "
                                               "default, max, fitted"),
    (["--gpus", "4", "--estimates", "default", "--default-share", "2"], "between 0 and 1, not 2"),
    (["--gpus", "4", "--priorities", "flat"], "--priorities must be one of trace, one, got 'flat'"),
    (["--gpus", "4", "--policies", "fifo,gqa", "--base", "las"], "--base las is not among the policies replayed"),
    # replayed twice and printed once: a typo likelier than intent
    (["--gpus", "4", "--policies", "fifo,FIFO,gqa"], "--policies names fifo twice"),
])
def test_bad_options_exit_2(capsys, args, message):
    code, out, err = run(capsys, GOLDEN, *args)
    assert code == 2 and message in err and out == ""


@pytest.mark.parametrize("make, args, message", [
    # refused before the replay, which on a whole trace takes minutes (a traceback after it, before)
    (None, ["--plot", "{tmp}/waits.txt"], "--plot {tmp}/waits.txt: name a .png, .svg or .pdf file"),
    (None, ["--plot", "{tmp}/no/waits.png"], "--plot {tmp}/no/waits.png: no folder {tmp}/no"),
    ("dir", ["--plot", "{tmp}/x.png"], "--plot {tmp}/x.png: is a folder"),
    ("file", ["--report", "{tmp}/x"], "--report {tmp}/x: {tmp}/x is not a folder"),
    ("file", ["--report", "{tmp}/x/a/b"], "--report {tmp}/x/a/b: {tmp}/x is not a folder"),
    # a policy's folder that is a file: named, not the folder above it (after the replays, before)
    ("policy-file", ["--report", "{tmp}/x"], "--report {tmp}/x: {tmp}/x/fifo is not a folder"),
    # a name the file system refuses, as root too: found by writing there (after the replays, before)
    (None, ["--plot", "{tmp}/" + "w" * 300 + ".png"], ".png: cannot be written (File name too long)"),
    (None, ["--report", "{tmp}/" + "r" * 300], "--report {tmp}/rrr"),
    (None, ["--report", "{tmp}/new/" + "r" * 300], "cannot be written (File name too long)"),
])
def test_outputs_that_cannot_be_written_are_refused_first(tmp_path, capsys, make, args, message):
    if make == "dir":
        (tmp_path / "x.png").mkdir()
    elif make == "file":
        (tmp_path / "x").write_text("")
    elif make == "policy-file":
        (tmp_path / "x").mkdir()
        (tmp_path / "x" / "fifo").write_text("")
    before = sorted(tmp_path.rglob("*"))
    code, out, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo,gqa",
                         *(a.format(tmp=tmp_path) for a in args))
    assert (code, out) == (2, "") and message.format(tmp=tmp_path) in err and "replayed" not in err
    assert err.count("\n") == 1 and sorted(tmp_path.rglob("*")) == before   # the checks leave nothing behind


def test_plot_is_whole_or_absent(tmp_path, capsys, monkeypatch):
    from matplotlib.figure import Figure

    code, _, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo,gqa", "--plot", str(tmp_path / "w.svg"))
    assert code == 0 and (tmp_path / "w.svg").read_text().lstrip().startswith("<?xml")
    real = Figure.savefig

    def disk_full(self, fname, **kwargs):
        real(self, fname, **kwargs)
        Path(fname).write_bytes(Path(fname).read_bytes()[:100])   # half written, then
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", disk_full)
    code, _, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo", "--plot", str(tmp_path / "w.png"))
    assert code == 2 and "No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.svg"]   # no w.png, no partial file


@pytest.mark.parametrize("fails", ["report", "plot"])
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_outputs_failing_at_the_end_leave_nothing_and_the_results_still_print(tmp_path, capsys, monkeypatch,
                                                                              fails, fmt):
    """Written whole or not at all, all of them: a failure in one removes what this run wrote of the
    others, and the table (or JSON) the replays made is printed before the exit 2."""
    import gqa.reporting
    from matplotlib.figure import Figure

    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "kept.txt").write_text("an earlier run's")   # not this run's: left alone
    real_report, real_savefig = gqa.reporting.write_report, Figure.savefig

    calls = []

    def report_disk_full(built, directory):   # fifo's report written, gqa's half, then the disk is full
        calls.append(directory)
        written = real_report(built, directory)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(Path(directory) / "report.html"))
        return written

    def plot_disk_full(self, fname, **kwargs):
        real_savefig(self, fname, **kwargs)
        raise OSError(28, "No space left on device", str(fname))

    if fails == "report":
        monkeypatch.setattr(gqa.reporting, "write_report", report_disk_full)
    else:
        monkeypatch.setattr(Figure, "savefig", plot_disk_full)
    code, out, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo,gqa", "--eta-every", "0", "-o", fmt,
                         "--plot", str(tmp_path / "rep3.png"), "--report", str(tmp_path / "rep" / "new"))
    assert code == 2 and err.endswith("No space left on device\n") and "Traceback" not in err
    failed = tmp_path / "rep" / "new" / "gqa" / "report.html" if fails == "report" else tmp_path / "rep3.png"
    assert f"gqa: error: {failed}: No space left on device" in err   # the path that failed, not the folder
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["rep", "rep/kept.txt"]
    if fmt == "json":
        assert set(json.loads(out)["policies"]) == {"fifo", "gqa"}
    else:
        assert "gqa / fifo" in out


def test_reports_go_into_a_folder_an_earlier_run_wrote(tmp_path, capsys):
    first = as_json(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo", "--eta-every", "0",
                    "--report", str(tmp_path / "r"))
    (tmp_path / "r" / "fifo" / "notes.txt").write_text("mine")
    second = as_json(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo,gqa", "--eta-every", "0",
                     "--report", str(tmp_path / "r"))
    assert second["reports"] == {**first["reports"], "gqa": str(tmp_path / "r" / "gqa" / "report.html")}
    assert (tmp_path / "r" / "fifo" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["fifo", "gqa"]   # no staging left


def itp_cluster(folder: Path, name: str, rows: str) -> str:
    (folder / name).write_text("job_id,submission_time,duration,num_gpu\n" + rows)
    return str(folder / name)


def test_a_trace_the_loader_left_empty_says_why(tmp_path, capsys):
    """The note that says why, not the first (which says the clusters were merged)."""
    itp_cluster(tmp_path, "cluster10.csv", "a1,10,0,1\na2,20,0,2\n")
    trace = str(tmp_path)
    code, out, err = run(capsys, trace, "--gpus", "4")
    assert (code, out) == (2, "")
    assert err == f"gqa: error: {trace}: no jobs to replay (dropped 2 jobs with no duration (0 s))\n"


@pytest.mark.parametrize("content, message", [
    (b"- {name: a, gpus: 4, price_per_gpu_hour: 1, spot: true, reclaim_rate_per_hour: .inf}\n",
     "pools.yaml: line 1: pool 1: reclaim_rate_per_hour must be a number from 0 to 10, got inf"),   # never ended
    (b"- {name: a, gpus: 4, price_per_gpu_hour: 1}\n# caf\xe9\n", "pools.yaml: byte 0xe9 is not UTF-8"),
    # a key that is not text (a value written without its name) was a TypeError's traceback
    (b"- {name: od, gpus: 8, price_per_gpu_hour: 4.1, 0.5}\n",
     "pools.yaml: line 1: pool 1: unknown 0.5 (a pool's keys: "),
    (b"- {name: od, gpus: 8, price_per_gpu_hour: 4.1, since: 2026-13-45}\n",
     "pools.yaml: line 1: invalid timestamp '2026-13-45'"),
    # read as job files are (YAML 1.2): a key given twice is refused, not its last kept; `yes` is text
    (b"- name: od\n  gpus: 8\n  price_per_gpu_hour: 4.1\n  gpus: 64\n",
     "pools.yaml: line 4: duplicate key 'gpus' (first at line 2)"),
    (b"- {name: sp, gpus: 8, price_per_gpu_hour: 1.2, spot: yes}\n",
     "pools.yaml: line 1: pool 1: spot must be true or false, got 'yes'"),
])
def test_bad_pools_file_exits_2(tmp_path, capsys, content, message):
    pools = tmp_path / "pools.yaml"
    pools.write_bytes(content)
    code, out, err = run(capsys, GOLDEN, "--pools", str(pools))
    assert (code, out) == (2, "") and message in err and err.count("\n") == 1


def test_every_policy_replays_through_the_cli_with_ratios_against_a_chosen_base(capsys):
    data = as_json(capsys, GOLDEN, "--gpus", "4", "--policies", ",".join(NAMES), "--base", "sjf-oracle",
                   "--eta-every", "0")
    assert list(data["policies"]) == list(NAMES)
    assert all(s["finished"] == 8 for s in data["policies"].values())
    assert set(data["ratios_vs_sjf-oracle"]) == set(NAMES) - {"sjf-oracle"}
    assert data["ratios_vs_sjf-oracle"]["fifo"]["mean_jct"] >= 1   # nothing beats the oracle's mean JCT here
    code, out, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo,las", "--eta-every", "0")
    assert code == 0 and "las / fifo: mean wait" in out


@pytest.mark.parametrize("args, why", [
    (["--gpus", "4", "--base", "las-tiers"], "every job is in one tier, where it replays as las"),
    (["--gpus", "4", "--base", "gqa-slice", "--restart-cost", "5m"], "a resume's reload of 5m00s is at least"),
    (["--pools", "{pools}", "--base", "LAS"], "las counts one pool of identical GPUs"),
])
def test_a_base_the_run_leaves_out_is_refused_saying_why(tmp_path, capsys, args, why):
    """Replayed by default, then left out: the ratios against it would be none, and nothing would say so."""
    pools = tmp_path / "pools.yaml"
    pools.write_text("- {name: od, gpus: 2, price_per_gpu_hour: 4.0}\n- {name: sp, gpus: 2, price_per_gpu_hour: 1.5}\n")
    code, out, err = run(capsys, GOLDEN, *(a.format(pools=pools) for a in args))
    name = args[args.index("--base") + 1].lower()
    assert (code, out) == (2, "") and err.startswith(f"gqa: error: --base {name} is left out of this run: {why}")
    assert err.count("\n") == 1 and "replayed in" not in err


def test_las_refuses_pools_it_cannot_model(tmp_path, capsys):
    pools = tmp_path / "pools.yaml"
    pools.write_text("- {name: od, gpu_type: a100, spot: false, gpus: 2, price_per_gpu_hour: 4.0}\n"
                     "- {name: spot, gpu_type: a100, spot: true, gpus: 2, price_per_gpu_hour: 1.5}\n")
    code, out, err = run(capsys, GOLDEN, "--pools", str(pools), "--policies", "las")
    assert code == 2 and out == "" and "las counts one pool of identical GPUs" in err
    # named after another: refused before that one replays (on a whole trace, minutes to nothing)
    code, out, err = run(capsys, GOLDEN, "--pools", str(pools), "--policies", "fifo,las")
    assert code == 2 and out == "" and "las counts one pool" in err and "replayed" not in err
    data = as_json(capsys, GOLDEN, "--pools", str(pools), "--eta-every", "0")   # by default it is left out, said so
    assert list(data["policies"]) == [n for n in NAMES if n not in ("las", "las-tiers")]
    for name in ("las", "las-tiers"):
        assert any(line.startswith(f"{name} left out: las counts one pool") for line in data["assumptions"])


def test_gqa_slice_is_refused_a_reload_as_long_as_its_least_run(capsys):
    """A resume reloading for 2 minutes or more could be stopped again before any new work, forever."""
    code, out, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "gqa-slice", "--restart-cost", "5m")
    assert code == 2 and out == ""
    assert "gqa-slice: a resume's reload of 5m00s is at least its 2m00s least run" in err
    assert "give a restart cost under 2m00s" in err
    code, out, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "gqa,gqa-slice", "--restart-cost", "5m")
    assert code == 2 and out == "" and "gqa-slice: a resume's reload" in err and "replayed" not in err
    data = as_json(capsys, GOLDEN, "--gpus", "4", "--restart-cost", "2m", "--eta-every", "0")   # by default: left out
    assert "gqa-slice" not in data["policies"] and {"gqa", "las"} <= set(data["policies"])
    left_out = "gqa-slice left out: a resume's reload of 2m00s is at least"
    assert any(line.startswith(left_out) for line in data["assumptions"])
    data = as_json(capsys, GOLDEN, "--gpus", "4", "--policies", "gqa-slice", "--restart-cost", "119s",
                   "--eta-every", "0")
    assert data["policies"]["gqa-slice"]["finished"] == 8


def test_gqa_backfills_by_predictions_when_asked_and_the_baselines_never(tmp_path, capsys):
    # 200 past jobs of team t use a tenth of their hour; then "r" (asks 10 hours, runs 1) holds 2 of 4
    # GPUs, "head" needs all 4 and "mid" (team u, no history) asks 9 hours and uses them
    rows = [f"h{n},{n * 100},360,1,t,3600" for n in range(200)]
    rows += ["r,20500,3600,2,t,36000", "head,20501,600,4,t,3600", "mid,20502,32400,2,u,32400"]
    trace = tmp_path / "asks.csv"
    trace.write_text("id,submit_time,duration,gpus,team,wall_time\n" + "\n".join(rows) + "\n")
    args = [str(trace), "--gpus", "4", "--policies", "fifo-easy,gqa", "--eta-every", "0"]
    limits, predictions = as_json(capsys, *args), as_json(capsys, *args, "--backfill-by", "predictions")
    assert (limits["backfill_by"], predictions["backfill_by"]) == ("limits", "predictions")
    assert any(line.startswith("gqa and gqa-slice backfill by predictions") for line in predictions["assumptions"])
    assert not any("by predictions" in line for line in limits["assumptions"])
    assert predictions["policies"]["fifo-easy"] == limits["policies"]["fifo-easy"]
    # head no longer waits 9 hours behind mid: it starts when r ends, and mid after it
    assert predictions["policies"]["gqa"]["mean_jct"] < limits["policies"]["gqa"]["mean_jct"]
    code, out, err = run(capsys, *args, "--backfill-by", "guesses")
    assert code == 2 and out == "" and "--backfill-by: backfill counts run times by limits or predictions" in err


def test_estimates_mode_named_in_json_and_under_asked_jobs_killed(tmp_path, capsys):
    trace = synthetic(tmp_path)
    model = as_json(capsys, trace, "--gpus", "6", "--policies", "gqa", "--eta-every", "0")
    fitted = as_json(capsys, trace, "--gpus", "6", "--policies", "gqa", "--eta-every", "0", "--estimates", "fitted")
    assert (model["estimates"], fitted["estimates"]) == ("model", "fitted")
    assert model["policies"]["gqa"]["timed_out_share"] == 0  # the model never asks less than the run
    assert 0.1 < fitted["policies"]["gqa"]["timed_out_share"] < 0.5
    assert any(line.startswith("wall time") and "ALCF Theta" in line for line in fitted["assumptions"])
    code, out, err = run(capsys, trace, "--gpus", "6", "--policies", "gqa", "--eta-every", "0", "--estimates", "max")
    assert code == 0 and "partition maximum, 7d" in out


def test_bad_trace_exits_2_with_the_line(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("submit_time,duration,gpus\n0,10,1\n5,soon,1\n")
    code, out, err = run(capsys, str(bad), "--gpus", "2")
    assert code == 2 and "line 3" in err and "duration" in err
    code, _, err = run(capsys, str(tmp_path / "missing.csv"), "--gpus", "2")
    assert code == 2 and "no such file" in err
    # a NaN submit time never comes due: read, it kept the replay going forever
    bad.write_text("submit_time,duration,gpus\n0,10,1\nnan,10,1\n")
    code, out, err = run(capsys, str(bad), "--gpus", "2")
    assert (code, out) == (2, "") and "line 3: submit_time must be a finite number, got 'nan'" in err
    bad.write_bytes(b"submit_time,duration,gpus\n0,10,1\n\xff\n")
    code, out, err = run(capsys, str(bad), "--gpus", "2")
    assert (code, out) == (2, "") and "line 3: byte 0xff is not UTF-8" in err


@pytest.mark.parametrize("rows, message", [
    ("0,10,4\n", "its job asks for more than 2 GPUs, the largest gang this cluster can start"),
    ("0,10,4\n1,10,3\n", "all 2 jobs ask for more than 2 GPUs"),
])
def test_a_trace_whose_every_job_is_too_wide_says_so(tmp_path, capsys, rows, message):
    wide = tmp_path / "wide.csv"
    wide.write_text("submit_time,duration,gpus\n" + rows)
    code, out, err = run(capsys, str(wide), "--gpus", "2")
    assert code == 2 and out == "" and f"wide.csv: no jobs to replay: {message}" in err


def test_one_tier_replays_the_trace_as_if_it_gave_no_priorities(tmp_path, capsys):
    # one GPU: A runs; B (low, short) and C (high, long) wait for it
    trace = tmp_path / "tiers.csv"
    trace.write_text("id,submit_time,duration,gpus,priority,wall_time,team\n"
                     "A,0,100,1,normal,100,t\nB,1,10,1,low,10,t\nC,2,300,1,high,300,t\n")
    kept = as_json(capsys, str(trace), "--gpus", "1", "--policies", "fifo,gqa", "--eta-every", "0")
    one = as_json(capsys, str(trace), "--gpus", "1", "--policies", "fifo,gqa", "--eta-every", "0",
                  "--priorities", "one")
    assert kept["policies"]["gqa"]["mean_wait"] == (0 + (100 - 2) + (400 - 1)) / 3   # C first: its tier
    assert one["policies"]["gqa"]["mean_wait"] == (0 + (100 - 1) + (110 - 2)) / 3    # B first: shorter
    # fifo never reads tiers: the same replay, only its jobs counted by other tiers
    assert {**one["policies"]["fifo"], "tier_mean_jct": None} == {**kept["policies"]["fifo"], "tier_mean_jct": None}
    assert kept["policies"]["gqa"]["tier_mean_jct"] == {"high": 400 - 2, "normal": 100, "low": 410 - 1}
    assert one["policies"]["gqa"]["tier_mean_jct"] == {"normal": (100 + (110 - 1) + (410 - 2)) / 3}
    both = as_json(capsys, str(trace), "--gpus", "1", "--eta-every", "0")   # by default, with several tiers
    assert {"las", "las-tiers"} <= set(both["policies"])
    assert both["policies"]["las"]["mean_jct"] == (100 + (110 - 1) + (410 - 2)) / 3   # las: first come, first served
    # las-tiers: C preempts A at once; A resumes at 302 (60 s reload, 98 s left), then B
    assert both["policies"]["las-tiers"]["mean_jct"] == (460 + (470 - 1) + 300) / 3
    code, out, err = run(capsys, str(trace), "--gpus", "1", "--eta-every", "0", "--policies", "las,las-tiers")
    assert code == 0 and "las-tiers mean JCT by tier: high 5m00s, normal 7m40s, low 7m49s" in out
    assert any(line.startswith("priority: every job normal (--priorities one), though the trace gives 1 high, "
                               "1 low, 1 normal") for line in one["assumptions"])


@pytest.mark.slow
def test_report_of_each_policys_replay(capsys, tmp_path):
    data = as_json(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo,gqa", "--report", str(tmp_path / "r"))
    assert data["reports"] == {p: str(tmp_path / "r" / p / "report.html") for p in ("fifo", "gqa")}
    page = (tmp_path / "r" / "gqa" / "report.html").read_text()
    assert "golden.csv replayed under gqa" in page and page.count("data:image/png;base64,") == 6
    assert (tmp_path / "r" / "fifo" / "waits.png").read_bytes().startswith(b"\x89PNG")
    code, out, err = run(capsys, GOLDEN, "--gpus", "4", "--policies", "fifo", "--report", str(tmp_path / "t"))
    assert code == 0 and f"fifo: report in {tmp_path / 't' / 'fifo' / 'report.html'}" in err + out


def contended(folder: Path) -> str:
    """Two teams submitting the same twenty 1-GPU, 100-second jobs at once to one GPU."""
    rows = [f"{n},100,1,{team},,100" for n in range(20) for team in ("a", "b")]
    (folder / "two.csv").write_text("submit_time,duration,gpus,team,priority,wall_time\n" + "\n".join(rows) + "\n")
    return str(folder / "two.csv")


def test_shares_weight_the_teams_as_slurms_fairshare_does(capsys, tmp_path):
    trace = contended(tmp_path)
    equal = as_json(capsys, trace, "--gpus", "1", "--policies", "gqa")
    weighted = as_json(capsys, trace, "--gpus", "1", "--policies", "gqa", "--shares", "a=3,b=1,c=2")
    slowdown = {name: data["policies"]["gqa"]["team_slowdown"] for name, data in
                (("equal", equal), ("weighted", weighted))}
    assert slowdown["equal"]["a"] == pytest.approx(slowdown["equal"]["b"], rel=0.1)
    assert slowdown["weighted"]["a"] < 0.8 * slowdown["weighted"]["b"]   # a is served about 3 jobs to b's 1
    assert "fair share: a=3, b=1, c=2; a team not named: 1" in weighted["assumptions"]
    assert "teams given a share that submit no job here: c" in weighted["assumptions"]


@pytest.mark.parametrize("shares, message", [
    ("a", "--shares: shares are TEAM=SHARE pairs, comma-separated (vision=2,nlp=1), not 'a'"),
    ("a=2,=1", "--shares: shares are TEAM=SHARE pairs"),
    ("a=0", "--shares: the share of a must be a number above 0, not '0'"),
    ("a=-1", "--shares: the share of a must be a number above 0, not '-1'"),
    ("a=nan", "--shares: the share of a must be a number above 0, not 'nan'"),
    ("a=inf", "--shares: the share of a must be a number above 0, not 'inf'"),
    ("a=x", "--shares: the share of a must be a number above 0, not 'x'"),
    ("a=1,a=2", "--shares: a is given a share twice"),
])
def test_bad_shares_are_refused_before_any_replay(capsys, tmp_path, shares, message):
    code, out, err = run(capsys, contended(tmp_path), "--gpus", "1", "--shares", shares)
    assert (code, out) == (2, "")
    assert err.startswith(f"gqa: error: {message}") and len(err.strip().splitlines()) == 1


def test_with_pools_each_job_runs_only_on_the_gpu_type_the_trace_gives_it(capsys, tmp_path):
    trace, pools = tmp_path / "typed.csv", tmp_path / "pools.yaml"
    # four 1-GPU a100 jobs at once, on two a100 and two v100: two of them wait for an a100
    trace.write_text("submit_time,duration,gpus,gpu_type\n" + "0,100,1,a100\n" * 4)
    pools.write_text("- {name: a, gpu_type: a100, spot: false, gpus: 2, price_per_gpu_hour: 4}\n"
                     "- {name: v, gpu_type: v100, spot: false, gpus: 2, price_per_gpu_hour: 2}\n")
    typed = as_json(capsys, str(trace), "--pools", str(pools), "--policies", "fifo,gqa")
    alike = as_json(capsys, str(trace), "--gpus", "4", "--policies", "fifo,gqa")
    for name in ("fifo", "gqa"):
        assert typed["policies"][name]["mean_wait"] == 50.0 and typed["policies"][name]["makespan"] == 200.0
        assert typed["policies"][name]["cost"] == pytest.approx(4 * 100 * 4 / 3600)   # all on the a100 pool
        assert alike["policies"][name]["mean_wait"] == 0.0
    assert "GPU types as the trace gives them (a100 4 jobs): each runs only on its type; a job with none on any" \
        in typed["assumptions"]
    assert ("GPU types the trace gives (a100 4 jobs) set aside: every GPU alike (--pools with those gpu_type "
            "holds each job to its type)") in alike["assumptions"]


def test_a_job_of_a_type_no_pool_has_is_dropped_and_said(capsys, tmp_path):
    trace, pools = tmp_path / "typed.csv", tmp_path / "pools.yaml"
    trace.write_text("submit_time,duration,gpus,gpu_type\n0,100,1,h100\n0,100,4,a100\n0,100,1,a100\n0,50,1,\n")
    pools.write_text("- {name: a, gpu_type: a100, spot: false, gpus: 2, price_per_gpu_hour: 4}\n"
                     "- {name: v, gpu_type: v100, spot: false, gpus: 4, price_per_gpu_hour: 2}\n")
    data = as_json(capsys, str(trace), "--pools", str(pools), "--policies", "fifo")
    assert data["jobs"] == 2   # the 1-GPU a100 job and the untyped one
    assert "dropped 1 job of h100: no pool has that type (the pools have a100, v100)" in data["assumptions"]
    assert "dropped 1 job asking for more GPUs than the largest pool of their type has" in data["assumptions"]
    trace.write_text("submit_time,duration,gpus,gpu_type\n0,100,1,h100\n")
    code, out, err = run(capsys, str(trace), "--pools", str(pools))
    assert (code, out) == (2, "")
    assert err.startswith(f"gqa: error: {trace}: no jobs to replay (dropped 1 job of h100: no pool has that type")
