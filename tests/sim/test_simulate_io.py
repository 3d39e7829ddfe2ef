"""`gqa simulate`'s inputs and outputs as files: a FIFO or a device refused unopened, a pipe read once
(and only so far), a cluster selection only where there are clusters, the files written as the umask
says, money to the cent, and the trace's own runs compared only on a cluster that could hold them."""

import json
import os
import signal
import stat
import threading

import pytest

import cli.simulate
import gqa.sim.trace
from cli.main import main
from gqa.sim.outputs import Outputs
from gqa.sim.report import print_table
from gqa.sim.trace import TraceError, load_trace

TRACE = "submit_time,duration,gpus,wall_time\n0,100,2,200\n10,50,1,100\n20,30,1,100\n30,40,2,100\n"
POOLS = "- {name: od, gpu_type: a100, spot: false, gpus: 2, price_per_gpu_hour: 3.6}\n"
# four one-GPU jobs that ran at once: their cluster had at least 4 GPUs
DUMP = ("JobID|Submit|Start|End|Elapsed|AllocTRES|Timelimit|Account|State\n"
        "200|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T02:00:00|02:00:00|gres/gpu=1|03:00:00|a|COMPLETED\n"
        "201|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|gres/gpu=1|02:00:00|a|COMPLETED\n"
        "202|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T00:10:00|10:00|gres/gpu=1|30:00|a|COMPLETED\n"
        "203|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T00:10:00|00:10:00|gres/gpu=1|30:00|a|COMPLETED\n")


@pytest.fixture(autouse=True)
def no_hang():
    """A read that would wait for ever fails the test instead."""
    def stop(*_):
        raise TimeoutError("blocked reading the input")
    before = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, before)


def run(capsys, *args):
    capsys.readouterr()
    code = main(["simulate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def pipe(data: bytes | None = None, *, endless: bool = False) -> int:
    """A pipe's reading end, already open, its writer feeding it `data` (or zeros for ever, until
    the reader goes) and closing."""
    read_end, write_end = os.pipe()

    def feed():
        try:
            if endless:
                while True:
                    os.write(write_end, bytes(1 << 16))
            view = memoryview(data or b"")
            while view:
                view = view[os.write(write_end, view):]
        except OSError:   # the reader closed its end
            pass
        finally:
            os.close(write_end)
    threading.Thread(target=feed, daemon=True).start()
    return read_end


def test_a_fifo_or_a_device_is_refused_as_the_trace_or_the_pools_without_reading_it(tmp_path, capsys):
    fifo = tmp_path / "fifo1"
    os.mkfifo(fifo)
    trace = tmp_path / "t1.csv"
    trace.write_text(TRACE)
    for args, named in [((str(fifo), "--gpus", "2"), f"{fifo}: not a regular file (a FIFO)"),
                        (("/dev/zero", "--gpus", "2"), "/dev/zero: not a regular file (a character device)"),
                        ((str(trace), "--pools", "/dev/zero"), "/dev/zero: not a regular file (a character device)"),
                        ((str(trace), "--pools", str(fifo)), f"{fifo}: not a regular file (a FIFO)")]:
        code, out, err = run(capsys, *args, "--policies", "fifo")
        assert (code, out) == (2, ""), err
        assert err.startswith(f"gqa: error: {named}") and err.count("\n") == 1


def test_a_fifo_in_a_trace_folder_is_refused_unopened(tmp_path):
    os.mkfifo(tmp_path / "cluster01.csv")
    with pytest.raises(TraceError, match="cluster01.csv: not a regular file \\(a FIFO\\)"):
        load_trace(tmp_path)


def test_a_trace_through_a_pipe_is_read_once_and_replayed(capsys):
    read_end = pipe(TRACE.encode())
    try:
        code, out, err = run(capsys, f"/dev/fd/{read_end}", "--gpus", "2", "--policies", "fifo", "-o", "json")
    finally:
        os.close(read_end)
    assert code == 0, err
    data = json.loads(out)
    assert (data["trace"], data["jobs"]) == (str(read_end), 4)


def test_a_dump_through_a_pipe_and_pools_through_another_read_as_from_files(tmp_path, capsys):
    trace = tmp_path / "t1.csv"
    trace.write_text(TRACE)
    pools = pipe(POOLS.encode())
    try:
        code, out, err = run(capsys, str(trace), "--pools", f"/dev/fd/{pools}", "--policies", "fifo", "-o", "json")
    finally:
        os.close(pools)
    assert code == 0, err
    assert json.loads(out)["policies"]["fifo"]["cost"] == pytest.approx(0.36)
    dump = pipe(DUMP.encode())
    try:
        code, out, err = run(capsys, f"/dev/fd/{dump}", "--gpus", "4", "--policies", "fifo", "-o", "json")
    finally:
        os.close(dump)
    assert code == 0, err
    assert json.loads(out)["as_it_ran"]["jobs"] == 4


def test_a_bad_trace_through_a_pipe_is_named_as_given(capsys):
    read_end = pipe(b"submit_time,duration,gpus\n0,soon,1\n")
    try:
        code, out, err = run(capsys, f"/dev/fd/{read_end}", "--gpus", "2")
    finally:
        os.close(read_end)
    assert (code, out) == (2, "")
    assert err.startswith(f"gqa: error: /dev/fd/{read_end}: line 2: duration") and err.count("\n") == 1


def test_a_pipe_that_never_ends_is_refused_at_the_cap(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(gqa.sim.trace, "MAX_STREAM_BYTES", 1 << 20)
    read_end = pipe(endless=True)
    try:
        code, out, err = run(capsys, f"/dev/fd/{read_end}", "--gpus", "2")
    finally:
        os.close(read_end)
    assert (code, out) == (2, "")
    assert f"/dev/fd/{read_end}: more than 1 MiB through a pipe; save it to a file" in err
    trace = tmp_path / "t1.csv"
    trace.write_text(TRACE)
    read_end = pipe(endless=True)
    try:
        code, out, err = run(capsys, str(trace), "--pools", f"/dev/fd/{read_end}")
    finally:
        os.close(read_end)
    assert (code, out) == (2, "") and f"/dev/fd/{read_end}: more than 1 MiB through a pipe" in err


@pytest.mark.parametrize("trace, format_name", [(TRACE, "a CSV trace"), (DUMP, "Slurm's accounting (sacct)")],
                         ids=["csv", "sacct"])
def test_a_cluster_selection_is_refused_where_the_trace_has_no_clusters(tmp_path, capsys, trace, format_name):
    path = tmp_path / "trace.txt"
    path.write_text(trace)
    code, out, err = run(capsys, f"{path}:cluster04", "--gpus", "4", "--policies", "fifo")
    assert (code, out) == (2, "")
    assert f"{path}: :cluster04 picks clusters of an ITP trace, and this is {format_name}" in err


@pytest.fixture
def umask_022():
    before = os.umask(0o022)
    yield
    os.umask(before)


def test_plot_and_report_outputs_get_the_modes_the_umask_gives(tmp_path, umask_022):
    plot = tmp_path / "waits.png"
    plot.write_bytes(b"old")
    plot.chmod(0o644)
    outputs = Outputs()
    outputs.file(plot).write_bytes(b"new")
    staged = outputs.folder(tmp_path / "reports" / "fifo")
    (staged / "report.html").write_text("<html>")
    outputs.commit()
    assert stat.S_IMODE(plot.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "reports" / "fifo").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "reports").stat().st_mode) == 0o755


def test_the_cost_line_shows_cents_halves_up(capsys):
    from rich.console import Console

    summary = {"mean_wait": 1.0, "p99_wait": 1.0, "mean_jct": 2.0, "mean_slowdown": 1.0, "utilisation": 0.5,
               "makespan": 10.0, "max_team_slowdown": 1.0, "jain_fairness": 1.0, "preemptions": 0, "reclaims": 0,
               "unfinished": 0, "timed_out": 0, "timed_out_share": 0.0, "cost": 0.035, "spot_saving": 1234.565}
    console = Console(width=200, force_terminal=False)
    print_table(console, "t.csv", 2, 4, [], {"fifo": summary})
    assert "fifo cost: $0.04, spot saved $1,234.57" in capsys.readouterr().out


def test_the_cost_line_agrees_with_the_json(tmp_path, capsys):
    trace, pools = tmp_path / "t1.csv", tmp_path / "p.yaml"
    trace.write_text(TRACE)
    pools.write_text(POOLS)
    code, out, err = run(capsys, str(trace), "--pools", str(pools), "--policies", "fifo")
    assert code == 0, err
    assert "fifo cost: $0.36, spot saved $0.00" in out


def test_as_it_ran_is_left_out_where_the_replay_has_fewer_gpus_than_the_jobs_held(tmp_path, capsys):
    dump = tmp_path / "sacct.txt"
    dump.write_text(DUMP)
    code, out, err = run(capsys, str(dump), "--gpus", "2", "--policies", "fifo", "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    assert "as_it_ran" not in data and "ratios_vs_as_it_ran" not in data
    said = [line for line in data["assumptions"] if line.startswith("as it ran")]
    assert said == ["as it ran: not shown, as the jobs held 4 GPUs at once as they ran, more than the 2 "
                    "replayed: give --gpus the GPUs their cluster had"]
    code, out, err = run(capsys, str(dump), "--gpus", "2", "--policies", "fifo")
    assert code == 0 and "\nas it ran " not in out and " / as it ran" not in out
    code, out, err = run(capsys, str(dump), "--gpus", "4", "--policies", "fifo", "-o", "json")
    assert code == 0 and json.loads(out)["as_it_ran"]["jobs"] == 4


def test_a_pools_file_over_its_cap_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli.simulate, "MAX_POOLS_BYTES", 1 << 10)
    trace, pools = tmp_path / "t1.csv", tmp_path / "p.yaml"
    trace.write_text(TRACE)
    pools.write_text(POOLS + "#" * 2000 + "\n")
    code, out, err = run(capsys, str(trace), "--pools", str(pools))
    assert (code, out) == (2, "") and f"{pools}: more than 1 KiB, more than a pools file holds" in err
