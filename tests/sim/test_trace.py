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
    text = ("id,submit_time,duration,gpus,team,priority,wall_time,user,name,gpu_type\n"
            "x,2024-01-01T00:00:00Z,1h,8,nlp,high,4h,bob,pretrain,a100\n"
            "y,2024-01-01T00:10:00,600,1,vision,2,,,,\n")
    a, b = load_trace(write(tmp_path / "t.csv", text)).jobs
    assert (a.id, a.duration, a.gpus, a.team, a.priority, a.wall_time, a.user, a.name, a.gpu_type) == \
        ("x", 3600.0, 8, "nlp", "high", 14400.0, "bob", "pretrain", "a100")
    assert b.gpu_type is None
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
    # float() reads these; no time is one (a NaN submit time never came due: the replay never ended)
    ("nan,10,1", "line 3: submit_time must be a finite number, got 'nan'"),
    ("inf,10,1", "line 3: submit_time must be a finite number, got 'inf'"),
    ("0,nan,1", "line 3: duration must be a finite number, got 'nan'"),
    ("0,1e400,1", "line 3: duration must be a finite number, got '1e400'"),
    ("0,10,nan", "line 3: gpus must be a finite number"),
    # beyond any run or any date: a unit mistake
    ("0,1e300,1", "line 3: duration of 1e\\+300 s is over 10 years"),
    ("0,400000000,1", "line 3: duration of 4e\\+08 s is over 10 years"),
    ("1700000000000,10,1", "line 3: submit_time 1.7e\\+12 is over 1e\\+11 s .* not milliseconds"),
    ("-1e300,10,1", "line 3: submit_time -1e\\+300 is over"),
    ("9999-01-01T00:00:00,10,1", "line 3: submit_time 2.5.*e\\+11 is over"),
])
def test_csv_bad_row_names_the_line(tmp_path, row, message):
    path = write(tmp_path / "t.csv", f"submit_time,duration,gpus\n0,10,1\n{row}\n")
    with pytest.raises(TraceError, match=message):
        load_trace(path)


@pytest.mark.parametrize("wall, message", [
    ("nan", "line 2: wall_time must be a finite number, got 'nan'"),
    ("inf", "line 2: wall_time must be a finite number, got 'inf'"),
    ("1e300", "line 2: wall_time of 1e\\+300 s is over 10 years"),
])
def test_csv_bad_wall_time(tmp_path, wall, message):
    with pytest.raises(TraceError, match=message):
        load_trace(write(tmp_path / "w.csv", f"submit_time,duration,gpus,wall_time\n0,10,1,{wall}\n"))


def test_csv_at_the_bounds_is_read(tmp_path):
    trace = load_trace(write(tmp_path / "t.csv", "submit_time,duration,gpus,wall_time\n"
                             f"1e11,{10 * 365 * 86400},1,{10 * 365 * 86400}\n-1e11,1,1,\n"))
    assert [(j.submit_time, j.duration) for j in trace.jobs] == [(-1e11, 1.0), (1e11, 315360000.0)]


def test_csv_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"submit_time,duration,gpus,name\n0,10,1,ok\n5,10,1,caf\xe9\n")
    with pytest.raises(TraceError, match="t.csv: line 3: byte 0xe9 is not UTF-8"):
        load_trace(path)


def test_csv_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes("submit_time,duration,gpus,name\n0,10,1,café\n".encode("utf-8-sig"))
    [job] = load_trace(path).jobs
    assert (job.submit_time, job.name) == (0.0, "café")
    path.write_bytes("submit_time,duration,gpus,name\n0,10,1,a\n".encode("utf-8-sig") + b"1,10,1,caf\xe9\n")
    with pytest.raises(TraceError, match="t.csv: line 3: byte 0xe9 is not UTF-8"):   # not 0x61, 3 bytes early
        load_trace(path)


def test_csv_field_over_the_csv_limit_names_the_line(tmp_path):
    path = write(tmp_path / "t.csv", "submit_time,duration,gpus,name\n0,10,1,a\n1,10,1," + "x" * 200_000 + "\n")
    with pytest.raises(TraceError, match="t.csv: line 3: field larger than field limit"):
        load_trace(path)


def test_csv_bad_priority_and_missing_header(tmp_path):
    with pytest.raises(TraceError, match="line 2: priority must be high, normal or low"):
        load_trace(write(tmp_path / "p.csv", "submit_time,duration,gpus,priority\n0,10,1,urgent\n"))
    with pytest.raises(TraceError, match="line 1: the header needs submit_time,duration,gpus"):
        load_trace(write(tmp_path / "h.csv", "time,duration,gpus\n0,10,1\n"))


def compressed(kind: str, data: bytes) -> bytes:
    import bz2
    import gzip
    import lzma
    import zipfile

    if kind == "zip":
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("jobs.csv", data)
        return out.getvalue()
    return {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}[kind](data)


@pytest.mark.parametrize("kind, tool", [("gzip", "gunzip"), ("bzip2", "bunzip2"), ("xz", "unxz"), ("zip", "unzip")])
@pytest.mark.parametrize("text", ["submit_time,duration,gpus\n0,10,1\n",
                                  "JobID|Submit|Start|End|ElapsedRaw|AllocTRES\n"])
def test_a_compressed_trace_is_refused_saying_so(tmp_path, kind, tool, text):
    """Not as text whose first byte is not UTF-8 (0x8b, for gzip), which says nothing of why."""
    path = tmp_path / "trace.csv.z"
    path.write_bytes(compressed(kind, text.encode()))
    with pytest.raises(TraceError, match=f"^{path}: compressed with {kind}; {tool} it first \\(a trace is text\\)$"):
        load_trace(path)


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
    assert any("dropped 1 job " in n for n in trace.notes)


def test_itp_cluster_selection_and_folder(tmp_path):
    path = itp_tarball(tmp_path / "raw-traces.tar.gz", {"cluster01": "a1,10,100,8\n", "cluster02": "b1,20,60,4\n"})
    assert [j.id for j in load_trace(f"{path}:cluster02").jobs] == ["b1"]
    with pytest.raises(TraceError, match="no cluster07"):
        load_trace(f"{path}:cluster07")
    folder = tmp_path / "itp"
    folder.mkdir()
    write(folder / "cluster03.csv", "job_id,submission_time,duration,num_gpu\nc1,5,9,1\n")
    assert [j.id for j in load_trace(folder).jobs] == ["c1"]


@pytest.mark.parametrize("row, message", [
    ("a2,x,1,1", "submission_time is not a number: 'x'"),
    ("a2,nan,1,1", "submission_time must be a finite number, got 'nan'"),
    ("a2,1,inf,1", "duration must be a finite number, got 'inf'"),
    ("a2,1,1e12,1", "duration of 1e\\+12 s is over 10 years"),
    ("a2,1,10,2.5", "num_gpu must be a whole number, got '2.5'"),
    ("a2,1,10", "num_gpu is empty"),
    # refused with the line, as the generic CSV refuses them (no published trace has one)
    ("a2,1,-50,1", "duration must be 0 or more, got '-50'"),
    ("a2,1,10,-1", "num_gpu must be 0 or more, got '-1'"),
])
def test_itp_bad_row(tmp_path, row, message):
    path = itp_tarball(tmp_path / "raw-traces.tar.gz", {"cluster01": f"a1,10,100,8\n{row}\n"})
    with pytest.raises(TraceError, match=f"cluster01.csv: line 3: {message}.* \\(expected job_id,"):
        load_trace(path)


def test_itp_member_that_is_not_utf8(tmp_path):
    path = tmp_path / "raw-traces.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        data = b"job_id,submission_time,duration,num_gpu\na1,10,100,8\n\xff\n"
        info = tarfile.TarInfo("cluster01.csv")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(TraceError, match="cluster01.csv: line 3: byte 0xff is not UTF-8"):
        load_trace(path)


def test_itp_missing_column(tmp_path):
    folder = tmp_path / "itp"
    folder.mkdir()
    write(folder / "cluster01.csv", "job_id,submitted,duration,num_gpu\na1,10,100,8\n")
    with pytest.raises(TraceError, match="cluster01.csv: line 2: no submission_time column"):
        load_trace(folder)


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


@pytest.mark.parametrize("row, message", [
    ("p1,1,1,x,1000,,BE,Failed,1,2,1", "num_gpu is not a number: 'x'"),
    ("p1,1,1,1,1000,,BE,Failed,nan,2,1", "creation_time must be a finite number, got 'nan'"),
    ("p1,1,1,1,1000,,BE,Failed,1,inf,1", "deletion_time must be a finite number, got 'inf'"),
    ("p1,1,1,1,1000,,BE,Failed,1,1e10,1", "a pod's life of 1e\\+10 s is over 10 years"),
    ("p1,1,1,1,1000,,BE,Failed,2e12,3e12,1", "creation_time 2e\\+12 is over"),
])
def test_alibaba_bad_row(tmp_path, row, message):
    path = write(tmp_path / "openb_pod_list_default.csv", ALIBABA_HEADER + row + "\n")
    with pytest.raises(TraceError, match=f"line 2: {message}.* \\(expected the openb pod list's"):
        load_trace(path)


def test_alibaba_missing_column_and_bytes(tmp_path):
    path = write(tmp_path / "openb_pod_list_default.csv", "name,num_gpu,pod_phase\np1,1,Succeeded\n")
    with pytest.raises(TraceError, match="line 2: no qos column"):
        load_trace(path)
    path.write_bytes(ALIBABA_HEADER.encode() + b"p\x80,1,1,1,1000,,BE,Failed,1,2,1\n")
    with pytest.raises(TraceError, match="line 2: byte 0x80 is not UTF-8"):
        load_trace(path)


# -- told by the header, whatever the file's name -----------------------------------

ITP_HEADER = "job_id,submission_time,duration,num_gpu\n"


@pytest.mark.parametrize("name", ["cluster10.csv", "itp.csv"])
def test_an_itp_cluster_file_is_read_by_its_header(tmp_path, name):
    path = write(tmp_path / name, ITP_HEADER + "b1,20,60,4\na1,10,100,8\n")
    trace = load_trace(path)
    assert trace.format == "itp" and [j.id for j in trace.jobs] == ["a1", "b1"]
    stem = name.removesuffix(".csv")
    assert trace.notes == [f"ITP 2021: 1 cluster(s) merged into one queue ({stem})"]
    if stem == "cluster10":   # picked by name, as a member of the tarball is
        assert [j.id for j in load_trace(f"{path}:cluster10").jobs] == ["a1", "b1"]


def test_an_alibaba_pod_list_is_read_by_its_header(tmp_path):
    path = write(tmp_path / "alibaba.csv", ALIBABA_HEADER + "p1,1000,1024,1,500,,BE,Failed,10,610,12\n")
    trace = load_trace(path)
    assert trace.format == "alibaba" and [(j.id, j.duration) for j in trace.jobs] == [("p1", 600.0)]


# -- rows a published trace says never ran: each counted under its reason ------------

def test_itp_rows_with_no_duration_or_no_gpus_are_counted_apart(tmp_path):
    path = itp_tarball(tmp_path / "raw-traces.tar.gz", {"cluster01": "a1,10,100,8\na2,20,0,1\na3,30,0,2\na4,40,50,0\n"})
    trace = load_trace(path)
    assert [j.id for j in trace.jobs] == ["a1"]
    assert trace.notes[1:] == ["dropped 2 jobs with no duration (0 s)", "dropped 1 job with no GPUs (num_gpu 0)"]


def test_alibaba_pod_that_ended_as_it_was_created_is_counted(tmp_path):
    rows = ["p1,1000,1024,1,1000,,BE,Failed,10,610,12",
            "p2,1000,1024,1,1000,,BE,Failed,20,20,20",     # deleted as it was created: no run time
            "p3,1000,1024,1,1000,,BE,Pending,30,900,"]     # never scheduled
    trace = load_trace(write(tmp_path / "openb_pod_list_default.csv", ALIBABA_HEADER + "\n".join(rows) + "\n"))
    assert [j.id for j in trace.jobs] == ["p1"]
    assert trace.notes[0] == ("Alibaba v2023: kept 1 of 3 pods (GPU pods that succeeded or are BE/Burstable; "
                              "1 never scheduled and 1 with no run time (deleted as created) dropped); "
                              "GPU fractions count as 1 GPU")


def test_alibaba_pod_deleted_before_it_was_created_names_the_line(tmp_path):
    path = write(tmp_path / "openb_pod_list_default.csv",
                 ALIBABA_HEADER + "p1,1000,1024,1,1000,,BE,Failed,10,610,12\np2,1,1,1,1000,,BE,Failed,50,40,50\n")
    with pytest.raises(TraceError, match="line 3: deletion_time 40 is before creation_time 50 \\(expected the openb"):
        load_trace(path)
