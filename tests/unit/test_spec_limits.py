"""Every bound on a job spec, with the exact line a user sees: small inputs
(an alias bomb, deep nesting, a huge grid, a NUL) are refused before they
cost memory or time, or yield a job that can never start."""

import os
import time
from pathlib import Path

import pytest

from gqa.models.errors import SpecError
from gqa.models.limits import MAX_SCRIPT_BYTES, MAX_SPEC_BYTES, MAX_YAML_DEPTH
from gqa.models.loader import default_name, load_spec, parse_yaml, validate
from gqa.models.spec import MAX_NAME


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def refused(path: str, **kwargs) -> str:
    start = time.perf_counter()
    with pytest.raises(SpecError) as caught:
        load_spec(path, **kwargs)
    assert time.perf_counter() - start < 1.5, "a limit must be checked before the work it bounds"
    return str(caught.value)


BILLION_LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['lol'] * 9)}]\n"
    for prev, name in zip([None, *"abcdefgh"], "abcdefghi")) + "command: [x]\n"


def nested(depth: int) -> str:
    return "command: [x]\ntags: " + "[" * depth + "]" * depth + "\n"


YAML_FILES = [
    # (id, job.yaml text, the whole message)
    ("larger than the limit", "command: [x]\n#" + "x" * MAX_SPEC_BYTES + "\n",
     "job.yaml: larger than 256 KiB, the limit for a job file"),
    ("duplicate key", "name: a\nresources:\n  gpus: 1\n  gpus: 2\ncommand: [x]\n",
     "job.yaml:4: duplicate key 'gpus' (first at line 3)"),
    ("duplicate top-level key", "command: [x]\nname: a\nteam: t\nname: b\n",
     "job.yaml:4: duplicate key 'name' (first at line 2)"),
    ("duplicate key in a flow mapping", "command: [x]\nenv: {A: '1', A: '2'}\n",
     "job.yaml:2: duplicate key 'A' (first at line 2)"),
    ("keys equal once read", "command: [x]\ntags:\n  true: a\n  True: b\n",
     "job.yaml:4: duplicate key True (first at line 3)"),
    ("nested one level too deep", nested(MAX_YAML_DEPTH), "job.yaml:2: nested deeper than 32 levels"),
    ("nested 100,000 deep", nested(100_000), "job.yaml:2: nested deeper than 32 levels"),
    ("billion laughs", BILLION_LAUGHS,
     "job.yaml:5: more than 10000 values (each alias counted as what it refers to)"),
    ("an alias repeating a long text", "x: &t " + "y" * 100_000 + "\ncommand: [" + ", ".join(["*t"] * 12) + "]\n",
     "job.yaml:2: more than 1 MiB of text (each alias counted as what it refers to)"),
    ("an alias inside its own node", "command: &c [x, *c]\n", "job.yaml:1: alias *c is inside the node it refers to"),
    ("a number too long", "command: [x]\nresources:\n  gpus: " + "1" * 65 + "\n",
     f"job.yaml:3: number '{'1' * 56}... is longer than 64 characters; quote it to make it text"),
    ("a float too long", "command: [x]\nretries: {on_error: 1." + "5" * 70 + "}\n",
     f"job.yaml:2: number '{('1.' + '5' * 70)[:56]}... is longer than 64 characters; quote it to make it text"),
    ("an impossible date", "command: [x]\nname: 2024-13-45\n",
     "job.yaml:2: invalid timestamp '2024-13-45': month must be in 1..12"),
    ("a bool that is not one", "command: [x]\nspot: !!bool maybe\n", "job.yaml:2: invalid bool 'maybe'"),
    ("a NUL character in the file", "command: [x]\nname: a\x00b\n",
     "job.yaml:2: malformed YAML: character U+0000 is not allowed"),
    ("two documents", "command: [x]\n---\ncommand: [y]\n",
     "job.yaml:2: malformed YAML: expected a single document in the stream, but found another document"),
    ("an array of a billion tasks", "command: [x]\narray: 0-1000000000\n",
     "job.yaml: array: array '0-1000000000' has 1000000001 tasks; at most 100000"),
    ("a 7x20 sweep grid", "command: [x]\nsweep:\n  grid:\n"
     + "".join(f"    p{i}: [{', '.join(str(v) for v in range(20))}]\n" for i in range(7)),
     "job.yaml:3: sweep has 1280000000 combinations; at most 100000"),
    ("a NUL in an argument", 'command: [python, train.py, "a\\0b"]\n', "job.yaml:1: command[2] contains a NUL byte"),
    ("a NUL in the workdir", 'command: [x]\nworkdir: "/data\\0"\n', "job.yaml:2: workdir contains a NUL byte"),
    ("wall time beyond a float", "command: [x]\nlimits: {wall_time: .inf}\n",
     "job.yaml:2: limits.wall_time: duration inf is not a finite number"),
    ("wall time overflowing in seconds", "command: [x]\nlimits: {wall_time: 1.0e+307}\n",
     "job.yaml:2: limits.wall_time: duration 1e+307 is too large"),
    ("memory beyond a float", "command: [x]\nresources: {memory: 1.0e+305}\n",
     "job.yaml:2: resources.memory: size 1e+305 is too large"),
]


@pytest.mark.parametrize("text, message", [row[1:] for row in YAML_FILES], ids=[row[0] for row in YAML_FILES])
def test_job_file_over_a_limit(text, message):
    Path("job.yaml").write_text(text)
    assert refused("job.yaml") == message


ALLOWED = [
    ("exactly the size limit", "command: [x]\n#" + "x" * (MAX_SPEC_BYTES - 15) + "\n"),
    ("anchors used modestly", "resources: {gpus: &n 2, cpus: *n}\ncommand: &c [python, t.py]\n"
                              "sweep:\n  grid:\n    a: [1, 2]\n    b: &vals [1, 2, 3]\n    c: *vals\n"),
    ("a merge key overridden", "resources:\n  <<: {gpus: 2, cpus: 4}\n  gpus: 3\ncommand: [x]\n"),
    ("an array of exactly the task limit", "command: [x]\narray: 0-99999\n"),
]


@pytest.mark.parametrize("text", [row[1] for row in ALLOWED], ids=[row[0] for row in ALLOWED])
def test_within_the_limits(text):
    Path("job.yaml").write_text(text)
    assert load_spec("job.yaml", overrides={"owner": "alice"})


def test_a_merge_key_overridden_reads_as_yaml_says():
    raw, _ = parse_yaml("x: &base {gpus: 2, cpus: 4}\nresources:\n  <<: *base\n  gpus: 3\n")
    assert raw["resources"] == {"gpus": 3, "cpus": 4}


def test_nesting_to_exactly_the_depth_limit_reads():
    raw, _ = parse_yaml("a: " + "[" * (MAX_YAML_DEPTH - 1) + "]" * (MAX_YAML_DEPTH - 1) + "\n")
    assert "a" in raw


SPECS = [
    # (id, raw spec, the whole message)
    ("NUL in an argument", {"command": ["python", "t.py", "a\x00b"]}, "command[2] contains a NUL byte"),
    ("NUL in a shell command", {"command": "echo a\x00", "shell": True}, "command contains a NUL byte"),
    ("NUL in the workdir", {"command": ["x"], "workdir": "/a\x00b"}, "workdir contains a NUL byte"),
    ("NUL in an env name", {"command": ["x"], "env": {"A\x00": "1"}},
     "environment variable name 'A\\x00' contains a NUL byte"),
    ("NUL in an env value", {"command": ["x"], "env": {"A": "1\x00"}}, "env['A'] contains a NUL byte"),
    ("NUL in the name", {"command": ["x"], "name": "a\x00"}, "name contains a NUL byte"),
    ("NUL in the team", {"command": ["x"], "team": "t\x00"}, "team contains a NUL byte"),
    ("NUL in a tag name", {"command": ["x"], "tags": {"k\x00": "v"}}, "tag name 'k\\x00' contains a NUL byte"),
    ("NUL in a tag value", {"command": ["x"], "tags": {"k": "v\x00"}}, "tags['k'] contains a NUL byte"),
    ("NUL in the image", {"command": ["x"], "image": "img\x00"}, "image contains a NUL byte"),
    ("NUL in a sweep value", {"command": ["x"], "sweep": {"grid": {"lr": ["1", "2\x00"]}}},
     "sweep.grid['lr'][1] contains a NUL byte"),
    ("NUL in a sweep parameter", {"command": ["x"], "sweep": {"grid": {"l\x00r": ["1"]}}},
     "sweep parameter 'l\\x00r' contains a NUL byte"),
    ("empty env name", {"command": ["x"], "env": {"": "1"}}, "env: an environment variable name is empty"),
    ("env name with =", {"command": ["x"], "env": {"A=B": "1"}}, "env: environment variable name 'A=B' contains '='"),
    ("relative workdir", {"command": ["x"], "workdir": "data"}, "workdir: must be an absolute path, got 'data'"),
    ("one argument beyond exec", {"command": ["x", "a" * (128 * 1024)]},
     "command[1] is 131073 bytes; exec takes at most 128 KiB in one string"),
    ("one env entry beyond exec", {"command": ["x"], "env": {"A": "a" * (128 * 1024)}},
     "env['A'] is 131075 bytes; exec takes at most 128 KiB in one string"),
    ("argv beyond exec", {"command": ["x"] + ["a" * 99_999] * 11},
     "command and env take 1100002 bytes; at most 1 MiB (exec takes 2 MiB, shared with the inherited environment)"),
    ("argv and env beyond exec",
     {"command": ["x"] + ["a" * 99_999] * 6, "env": {f"E{i}": "v" * 99_999 for i in range(5)}},
     "command and env take 1100017 bytes; at most 1 MiB (exec takes 2 MiB, shared with the inherited environment)"),
    ("sweep values beyond exec", {"command": ["x"] + ["a" * 99_999] * 10, "sweep": {"grid": {"p": ["v" * 60_000]}}},
     "command and env take 1060007 bytes; at most 1 MiB (exec takes 2 MiB, shared with the inherited environment)"),
    ("a wall time of 10**400 minutes", {"command": ["x"], "limits": {"wall_time": 10**400}},
     "limits.wall_time: duration (a huge number) is not a finite number"),
    ("a wall time with 100 digits", {"command": ["x"], "limits": {"wall_time": "9" * 100}},
     "limits.wall_time: invalid duration: longer than 64 characters"),
    ("an array limit with 40 digits", {"command": ["x"], "array": "0-9%" + "9" * 40},
     f"array: invalid array limit '%{'9' * 40}': use %N with N >= 1"),
]


@pytest.mark.parametrize("raw, message", [row[1:] for row in SPECS], ids=[row[0] for row in SPECS])
def test_impossible_value(raw, message):
    with pytest.raises(SpecError) as caught:
        validate(raw | {"owner": "alice"})
    assert str(caught.value) == message


def test_the_exec_bound_is_inclusive():
    # 11 bytes ("x" and a NUL, then each argument and its NUL) short of 1 MiB in all
    job = validate({"command": ["x", "a" * (128 * 1024 - 1)] + ["b" * 99_999] * 9, "owner": "alice"})
    assert len(job.command) == 11


# -- scripts: the header is parsed, the whole script kept (as sbatch keeps it) ------

def test_script_header_larger_than_the_limit():
    Path("run.sh").write_text("#!/bin/sh\n" + "#SBATCH --comment=x\n" * (MAX_SPEC_BYTES // 20 + 1) + "echo\n")
    assert refused("run.sh") == "run.sh: the #GQA/#SBATCH header is larger than 256 KiB"


def test_script_with_one_comment_line_larger_than_the_limit():
    Path("run.sh").write_text("#" * (MAX_SPEC_BYTES + 1) + "\necho\n")
    assert refused("run.sh") == "run.sh: the #GQA/#SBATCH header is larger than 256 KiB"


@pytest.mark.parametrize("body", [
    b"echo " + b"x" * (MAX_SCRIPT_BYTES - 100) + b"\n",                 # a long first command
    b"exec python - <<'EOF'\n" + b"print(1)\n" * (MAX_SCRIPT_BYTES // 10) + b"EOF\n",
], ids=["long first command", "long body"])
def test_a_script_up_to_the_limit_is_kept_as_submitted(body):
    data = b"#!/bin/sh\n#SBATCH --gres=gpu:2\n" + body
    Path("run.sh").write_bytes(data)
    job = load_spec("run.sh", overrides={"owner": "alice"})
    assert job.resources.gpus == 2
    assert job.script.text.encode() == data and job.script.path == os.path.abspath("run.sh")
    assert job.argv(script="/copy") == ["/bin/sh", "/copy"]


@pytest.mark.parametrize("body", [
    b"echo " + b"x" * (4 * MAX_SCRIPT_BYTES) + b"\n",
    b"exit 0\n" + os.urandom(4 * MAX_SCRIPT_BYTES),
], ids=["long first command", "binary payload"])
def test_a_script_past_the_limit_is_refused_unread(body):
    Path("run.sh").write_bytes(b"#!/bin/sh\n#SBATCH --gres=gpu:2\n" + body)
    assert refused("run.sh") == ("run.sh: larger than 512 KiB, the limit for a batch script (its job keeps a copy): "
                                 "run a larger program from a short script")


def test_a_script_that_is_not_text_is_refused():
    Path("run.sh").write_bytes(b"#!/bin/sh\necho\n\xff\xfe\n")
    assert refused("run.sh") == "run.sh is not a text file"
    Path("run.sh").write_bytes(b"#!/bin/sh\necho\n\x00\n")       # sbatch refuses a NUL too
    assert refused("run.sh") == "run.sh: script contains a NUL byte"


def test_a_command_with_no_script_keeps_none():
    assert load_spec(command=["python", "train.py"], overrides={"owner": "alice"}).script is None


def test_script_header_that_is_not_text():
    Path("run.sh").write_bytes(b"#!/bin/sh\n#SBATCH --job-name=\xff\xfe\necho\n")
    assert refused("run.sh") == "run.sh is not a text file"


def test_a_script_with_a_byte_order_mark_is_refused_as_sbatch_refuses_it():
    Path("run.sh").write_bytes(b"\xef\xbb\xbf#!/bin/bash\n#SBATCH --gpus=3\necho\n")
    assert refused("run.sh").startswith("run.sh starts with a UTF-8 byte order mark, which a script cannot have")
    Path("job.yaml").write_bytes(b"\xef\xbb\xbfcommand: [echo]\n")        # YAML allows one
    assert load_spec("job.yaml", overrides={"owner": "alice"}).command == ["echo"]


@pytest.mark.parametrize("data, line", [
    (b"#!/bin/bash\r\n#SBATCH --time=5\r\ncd somewhere\r\necho done\r\n", 1),
    (b"#!/bin/bash\n#SBATCH --time=5\necho done\r\n", 3),          # past the header too, as sbatch reads it all
    (b"\xef\xbb\xbf#!/bin/bash\r\necho\r\n", 1),
])
def test_a_script_with_dos_line_breaks_is_refused_as_sbatch_refuses_it(data, line):
    Path("run.sh").write_bytes(data)
    assert refused("run.sh") == (f"run.sh:{line}: Batch script contains DOS line breaks (\\r\\n) instead of "
                                 "expected UNIX line breaks (\\n).")
    assert refused(None, stdin=data).startswith(f"stdin:{line}: Batch script contains DOS line breaks")


@pytest.mark.parametrize("data", [b"#!/bin/bash\necho a\rb\n", b"#!/bin/sh\necho\r"])
def test_a_carriage_return_not_before_a_line_break_is_kept(data):
    Path("run.sh").write_bytes(data)
    assert load_spec("run.sh", overrides={"owner": "alice"}).script.text == data.decode()


@pytest.mark.parametrize("file, name", [
    ("train.sh", "train.sh"),
    ("x" * 243, "x" * MAX_NAME),                   # cut to the limit a given name meets
    ("a\tb.sh", "a_b.sh"),                         # what a name cannot hold, replaced
    ("a\\b\x7f.sh", "a_b_.sh"),
    ("", "job"),
])
def test_a_default_name_is_made_valid(file, name):
    assert default_name(file) == name
    assert validate({"command": ["x"], "name": default_name(file)}).name == name


def test_a_path_with_a_nul_is_no_file():
    assert refused("a\x00b.yaml") == "no such file: a\\x00b.yaml"   # shown escaped: one printable line


# -- the submitter's directory -------------------------------------------------------

@pytest.fixture
def elsewhere(tmp_path):
    other = tmp_path / "client"
    other.mkdir()
    (other / "job.yaml").write_text("command: [python, t.py]\n")
    (other / "rel.yaml").write_text("command: [python, t.py]\nworkdir: data\n")
    (other / "run.sh").write_text("#!/bin/sh\n#SBATCH --gres=gpu:2\necho\n")
    return other


@pytest.mark.parametrize("path, workdir", [
    ("job.yaml", ""),
    ("rel.yaml", "data"),
    ("{other}/job.yaml", ""),
])
def test_cwd_replaces_the_process_directory(elsewhere, path, workdir):
    job = load_spec(path.format(other=elsewhere), cwd=str(elsewhere), overrides={"owner": "alice"})
    assert job.workdir == str(Path(elsewhere, workdir))
    assert os.getcwd() != str(elsewhere)                 # never a chdir


def test_cwd_resolves_a_script_and_its_command(elsewhere):
    job = load_spec("run.sh", cwd=str(elsewhere), overrides={"owner": "alice"})
    assert job.command == ["/bin/sh", str(elsewhere / "run.sh")]
    assert job.workdir == str(elsewhere)
    assert job.resources.gpus == 2


@pytest.mark.parametrize("overrides, workdir", [
    ({"workdir": "sub"}, "sub"),
    ({"workdir": "/abs"}, "/abs"),
    ({}, ""),
])
def test_a_command_alone_resolves_its_workdir_against_cwd(elsewhere, overrides, workdir):
    job = load_spec(command=["true"], cwd=str(elsewhere), overrides={"owner": "alice", **overrides})
    assert job.workdir == str(Path(elsewhere, workdir))


def test_without_cwd_the_process_directory_applies(tmp_path):
    Path("job.yaml").write_text("command: [x]\nworkdir: data\n")
    assert load_spec("job.yaml", overrides={"owner": "alice"}).workdir == str(tmp_path / "data")
    assert load_spec(command=["x"], overrides={"owner": "alice"}).workdir == str(tmp_path)


@pytest.mark.parametrize("message, shown", [
    ("env.\r: Input should be a valid string", "job.yaml:3: env.\\r: Input should be a valid string"),
    ("name\nx: too long", "job.yaml:3: name\\nx: too long"),
    ("tags.a\x00b: bad", "job.yaml:3: tags.a\\x00b: bad"),
    ("workdir: must be absolute, got 'données'", "job.yaml:3: workdir: must be absolute, got 'données'"),
])
def test_a_spec_error_is_one_line_whatever_the_user_typed(message, shown):
    from gqa.models.errors import SpecError

    assert str(SpecError(message, source="job.yaml", line=3)) == shown
