"""Trace loaders: generic CSV, ITP 2021 tarball, Alibaba v2023 pod list."""

import io
import tarfile

import pytest

from gqa.sim.trace import TraceError, load_trace


def write(path, text: str):
    path.write_text(text)
    return path


# -- generic CSV -----------------------------------------------------------------

def test_csv_minimal_columns_in_seconds(tmp_path):
    trace = load_trace(write(tmp_path / "t.csv", "submit_time,duration,gpus\n5,60,2\n0,30.5,1\n"))
    assert trace.format == "csv"
    assert [(j.submit_time, j.duration, j.gpus) for j in trace.jobs] == [(0.0, 30.5, 1), (5.0, 60.0, 2)]
    assert trace.jobs[0].team is None and trace.jobs[0].wall_time is None


def test_csv_optional_columns_iso_times_and_units(tmp_path):
    text = ("id,submit_time,duration,gpus,team,priority,wall_time,user,name\n"
            "x,2024-01-01T00:00:00Z,1h,8,nlp,high,4h,bob,pretrain\n"
            "y,2024-01-01T00:10:00,600,1,vision,2,,,\n")
    a, b = load_trace(write(tmp_path / "t.csv", text)).jobs
    assert (a.id, a.duration, a.gpus, a.team, a.priority, a.wall_time, a.user, a.name) == \
        ("x", 3600.0, 8, "nlp", "high", 14400.0, "bob", "pretrain")
    assert b.submit_time - a.submit_time == 600.0  # a time without a zone is UTC
    assert (b.priority, b.wall_time, b.user) == ("low", None, None)


@pytest.mark.parametrize("row, message", [
    ("0,abc,1", "line 3: duration is not seconds or a duration"),
    ("yesterday,10,1", "line 3: submit_time is not seconds or an ISO-8601 time"),
    ("0,10,1.5", "line 3: gpus must be a whole number"),
    ("0,10,0", "line 3: gpus must be a whole number >= 1"),
    ("0,-5,1", "line 3: duration must be positive"),
    ("0,10,", "line 3: gpus is empty"),
    ("0,10,1,9", "line 3: more fields than the header has"),
])
def test_csv_bad_row_names_the_line(tmp_path, row, message):
    path = write(tmp_path / "t.csv", f"submit_time,duration,gpus\n0,10,1\n{row}\n")
    with pytest.raises(TraceError, match=message):
        load_trace(path)


def test_csv_bad_priority_and_missing_header(tmp_path):
    with pytest.raises(TraceError, match="line 2: priority must be high, normal or low"):
        load_trace(write(tmp_path / "p.csv", "submit_time,duration,gpus,priority\n0,10,1,urgent\n"))
    with pytest.raises(TraceError, match="line 1: the header needs submit_time,duration,gpus"):
        load_trace(write(tmp_path / "h.csv", "time,duration,gpus\n0,10,1\n"))


def test_missing_path(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "nope.csv")


# -- ITP 2021 ------------------------------------------------------------------------

def itp_tarball(path, clusters: dict[str, str]):
    with tarfile.open(path, "w:gz") as tar:
        for name, body in clusters.items():
            data = ("job_id,submission_time,duration,num_gpu\n" + body).encode()
            info = tarfile.TarInfo(f"{name}.csv")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("LICENSE")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"MIT"))
    return path


def test_itp_tarball_merges_clusters_by_submit_time(tmp_path):
    path = itp_tarball(tmp_path / "raw-traces.tar.gz", {
        "cluster01": "a1,10,100,8\na2,30,50,1\n",
        "cluster02": "b1,20,60,64\nb2,30,70,2\nb3,40,0,1\n",
    })
    trace = load_trace(path)
    assert trace.format == "itp"
    assert [j.id for j in trace.jobs] == ["a1", "b1", "a2", "b2"]  # equal times: cluster order
    assert [(j.submit_time, j.duration, j.gpus) for j in trace.jobs][:2] == [(10.0, 100.0, 8), (20.0, 60.0, 64)]
    assert any("dropped 1 jobs" in n for n in trace.notes)


def test_itp_cluster_selection_and_folder(tmp_path):
    path = itp_tarball(tmp_path / "raw-traces.tar.gz", {"cluster01": "a1,10,100,8\n", "cluster02": "b1,20,60,4\n"})
    assert [j.id for j in load_trace(f"{path}:cluster02").jobs] == ["b1"]
    with pytest.raises(TraceError, match="no cluster07"):
        load_trace(f"{path}:cluster07")
    folder = tmp_path / "itp"
    folder.mkdir()
    write(folder / "cluster03.csv", "job_id,submission_time,duration,num_gpu\nc1,5,9,1\n")
    assert [j.id for j in load_trace(folder).jobs] == ["c1"]


def test_itp_bad_row(tmp_path):
    path = itp_tarball(tmp_path / "raw-traces.tar.gz", {"cluster01": "a1,10,100,8\na2,x,1,1\n"})
    with pytest.raises(TraceError, match="cluster01.csv line 3"):
        load_trace(path)


# -- Alibaba v2023 ------------------------------------------------------------------

ALIBABA_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                  "creation_time,deletion_time,scheduled_time\n")


def test_alibaba_keeps_training_like_pods(tmp_path):
    rows = [
        "p0,1000,1024,1,1000,,LS,Running,0,9000,0",          # LS still running: inference, dropped
        "p1,1000,1024,1,500,,BE,Failed,10,610,12",            # BE, a GPU fraction: 1 GPU, low
        "p2,1000,1024,8,1000,,Burstable,Running,20,1020,20",  # Burstable: normal
        "p3,1000,1024,2,1000,,LS,Succeeded,30,330,31",        # finished LS: high
        "p4,1000,1024,0,0,,BE,Succeeded,40,100,40",           # no GPU
        "p5,1000,1024,1,1000,,BE,Pending,50,900,",            # never scheduled
        "p6,1000,1024,1,1000,,BE,Failed,60,60,60",            # no duration
    ]
    path = write(tmp_path / "openb_pod_list_default.csv", ALIBABA_HEADER + "\n".join(rows) + "\n")
    trace = load_trace(path)
    assert trace.format == "alibaba"
    assert [(j.id, j.submit_time, j.duration, j.gpus, j.priority) for j in trace.jobs] == [
        ("p1", 10.0, 600.0, 1, "low"), ("p2", 20.0, 1000.0, 8, "normal"), ("p3", 30.0, 300.0, 2, "high")]
    assert load_trace(tmp_path).format == "alibaba"  # the folder holding it


def test_alibaba_bad_row(tmp_path):
    path = write(tmp_path / "openb_pod_list_default.csv", ALIBABA_HEADER + "p1,1,1,x,1000,,BE,Failed,1,2,1\n")
    with pytest.raises(TraceError, match="line 2"):
        load_trace(path)
