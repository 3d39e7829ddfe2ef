"""gqa.models.loader and gqa.models.spec: a job file, a script with directives
and command-line flags become one validated JobSpec, or one clear SpecError."""

import os
import re
from pathlib import Path

import pytest

from tests.builders import spec
from gqa.models.errors import SpecError
from gqa.models.loader import load_spec, parse_directives, parse_yaml, script_command, validate, validate_json
from gqa.models.spec import JobSpec, Priority

GiB, MiB = 1024**3, 1024**2


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def write(name: str, text: str, *, executable: bool = False) -> str:
    Path(name).write_text(text)
    if executable:
        os.chmod(name, 0o755)
    return name


def field(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


# -- bad job files -------------------------------------------------------------

BAD_YAML = [
    # (id, file text, expected message fragment, expected line or None)
    ("unclosed flow list", "name: x\ncommand: [a, b\nteam: y\n", "malformed YAML: expected ',' or ']'", 3),
    ("bad indentation", "name: x\n  bad: indent\ncommand: [a]\n", "malformed YAML: mapping values are not allowed", 2),
    ("tab indentation", "name: x\ncommand:\n\t- a\n", "malformed YAML: found character '\\t'", 3),
    ("misspelt nested field", "command: [a]\nresources:\n  gpu_typ: a10g\n",
     "unknown field 'resources.gpu_typ'; did you mean 'gpu_type'?", 3),
    ("misspelt top-level field", "comand: [python, train.py]\n", "unknown field 'comand'; did you mean 'command'?", 1),
    ("misspelt field among others", "command: [a]\nlimits:\n  walltime: 1h\n",
     "unknown field 'limits.walltime'; did you mean 'wall_time'?", 3),
    ("unknown field, nothing close", "command: [a]\nresources:\n  zzzz: 1\n",
     "unknown field 'resources.zzzz'; valid fields: cpus, exclusive, gpu_type, gpus, gpus_option, gpus_per_task, "
     "memory, memory_option, tasks", 3),
    ("negative GPUs", "command: [a]\nresources:\n  gpus: -2\n",
     "resources.gpus: Input should be greater than or equal to 0", 3),
    ("GPUs not a number", "command: [a]\nresources:\n  gpus: two\n",
     "resources.gpus: Input should be a valid integer", 3),
    ("unparseable wall time", "command: [a]\nlimits:\n  wall_time: forever\n",
     "limits.wall_time: invalid duration 'forever'", 3),
    ("zero wall time", "command: [a]\nlimits:\n  wall_time: 0\n", "limits.wall_time: duration must be positive", 3),
    ("unparseable grace", "command: [a]\ncheckpoint:\n  grace: soon\n", "checkpoint.grace: invalid duration 'soon'", 3),
    ("unparseable memory", "command: [a]\nresources:\n  memory: lots\n", "resources.memory: invalid size 'lots'", 3),
    ("unknown on_timeout", "command: [a]\nlimits:\n  on_timeout: later\n", "limits.on_timeout:", 3),
    ("backoff above its cap", "command: [a]\nretries:\n  backoff: 10m\n  max_backoff: 1m\n",
     "retries: max_backoff must be at least backoff", 2),
    ("an endless GPU-hour cap", "command: [a]\nlimits:\n  max_gpu_hours: .inf\n",
     "limits.max_gpu_hours: Input should be a finite number", 3),
    ("a begin time that never comes", "command: [a]\nbegin: .inf\n", "begin: Input should be a finite number", 2),
    ("empty command list", "command: []\n", "command is empty", None),
    ("empty first argument", "command: ['']\n", "command is empty", None),
    ("empty shell command", "command: ''\nshell: true\n", "command is empty", None),
    ("string command without shell", "command: python train.py\n",
     "command is a string; give an argv list (e.g. [python, train.py]) or set shell: true", None),
    ("shell with several arguments", "command: [python, train.py]\nshell: true\n",
     "with shell: true, command must be one string", None),
    ("missing command", "name: x\n", "command: is required", None),
    ("env name starting with a digit", "command: [a]\nenv:\n  1BAD: x\n",
     "env: invalid environment variable name '1BAD'", 2),
    ("env name with a dash", "command: [a]\nenv:\n  MY-VAR: x\n", "invalid environment variable name 'MY-VAR'", 2),
    ("reserved GQA env", "command: [a]\nenv:\n  GQA_JOB_ID: x\n",
     "environment variable GQA_JOB_ID is set by gqa for every attempt", 2),
    ("reserved GQA_RESUME_FROM", "command: [a]\nenv:\n  GQA_RESUME_FROM: /x\n", "GQA_RESUME_FROM is set by gqa", 2),
    ("reserved CUDA_VISIBLE_DEVICES", "command: [a]\nenv:\n  CUDA_VISIBLE_DEVICES: '0'\n",
     "CUDA_VISIBLE_DEVICES is set by gqa", 2),
    ("unknown priority", "command: [a]\npriority: urgent\n",
     "priority: must be one of 'high', 'normal' or 'low', got 'urgent'", 2),
    ("invalid team name", "command: [a]\nteam: 'bad team'\n", "team: 'bad team' is not a valid name", 2),
    ("bad array", "command: [a]\narray: 5-1\n", "array: invalid array range '5-1'", None),
    ("array and sweep", "command: [a]\narray: 0-3\nsweep:\n  grid:\n    lr: [1]\n",
     "either array or sweep, not both", None),
    ("empty sweep grid", "command: [a]\nsweep:\n  grid: {}\n", "sweep.grid: sweep grid is empty", 3),
    ("sweep parameter without values", "command: [a]\nsweep:\n  grid:\n    lr: []\n",
     "sweep parameter 'lr' has no values", 3),
    ("sweep into a reserved env name", "command: [a]\nsweep:\n  grid:\n    GQA_ATTEMPT: [1]\n  pass_as: env\n",
     "sweep parameter 'GQA_ATTEMPT' cannot be an environment variable name", 2),
    ("a key that reads like a type", "command: [a]\n'list[str]': 1\n", "unknown field 'list[str]'", 2),
    ("a nested key that reads like a type", "command: [a]\nresources:\n  str: 1\n", "unknown field 'resources.str'", 3),
    # only true and false are booleans, and a count is a number: what is written is what the job gets
    ("yes is a word, not a boolean", "command: [a]\nspot: yes\n",
     "spot: Input should be a valid boolean (true or false), got 'yes'", 2),
    ("a quoted false is a word", "command: [a]\nhold: 'false'\n",
     "hold: Input should be a valid boolean (true or false), got 'false'", 2),
    ("on is a word", "command: [a]\nresources:\n  exclusive: on\n",
     "resources.exclusive: Input should be a valid boolean (true or false), got 'on'", 3),
    ("a boolean is no count", "command: [a]\nresources: {gpus: true}\n",
     "resources.gpus: Input should be a valid integer, got true", 2),
    ("a quoted count is a word", "command: [a]\nresources:\n  gpus: '2'\n",
     "resources.gpus: Input should be a valid integer, got '2'", 3),
    ("a fractional count", "command: [a]\nresources:\n  gpus: 1.5\n",
     "resources.gpus: Input should be a valid integer, got 1.5", 3),
    ("a quoted nice", "command: [a]\nnice: '5'\n", "nice: Input should be a valid integer, got '5'", 2),
    ("a quoted retry count", "command: [a]\nretries:\n  on_error: '3'\n",
     "retries.on_error: Input should be a valid integer, got '3'", 3),
    ("a null among a sweep's values", "command: [a]\nsweep:\n  grid:\n    lr: [0.1, null]\n",
     "sweep.grid.lr.1: Input should be a string, an integer, a number or a boolean, got null", 4),
    ("a null tag", "command: [a]\ntags:\n  run: null\n", "tags.run: Input should be a valid string, got null", 3),
    ("a number for a key", "command: [a]\n1: x\n", "1: a key must be text, got 1", 2),
    ("a number for a nested key", "command: [a]\nresources:\n  2: x\n", "resources.2: a key must be text, got 2",
     3),
    ("a boolean array", "command: [a]\narray: true\n", "array: Input should be a valid string, got true", 2),
    ("a list, not a mapping", "- a\n- b\n", "a job file must be a YAML mapping", 1),
    ("a scalar, not a mapping", "hello\n", "a job file must be a YAML mapping", 1),
    ("an empty file", "", "a job file must be a YAML mapping", 1),
]


@pytest.mark.parametrize("text, message, line", [row[1:] for row in BAD_YAML], ids=[row[0] for row in BAD_YAML])
def test_bad_job_file(text, message, line):
    path = write("job.yaml", text)
    with pytest.raises(SpecError, match=re.escape(message)) as caught:
        load_spec(path)
    assert caught.value.line == line
    assert str(caught.value).startswith(f"job.yaml:{line}: " if line else "job.yaml: ")


@pytest.mark.parametrize("text, path, value", [
    ("array: 5\n", "array", "5"),                             # one task, as sbatch reads --array=5
    ("array: 0\n", "array", "0"),
    ("spot: true\n", "spot", True),
    ("hold: false\n", "hold", False),
    ("resources: {gpus: 2, exclusive: true}\n", "resources.gpus", 2),
    ("nice: -5\n", "nice", -5),
])
def test_a_job_file_s_typed_values_are_what_the_job_gets(text, path, value):
    job = load_spec(write("job.yaml", "command: [a]\n" + text), overrides={"owner": "alice"})
    assert field(job, path) == value


def test_parse_yaml_reports_the_line_of_every_key():
    raw, lines = parse_yaml("name: x\nresources:\n  gpus: 2\ncommand:\n  - python\n  - t.py\n")
    assert raw == {"name": "x", "resources": {"gpus": 2}, "command": ["python", "t.py"]}
    assert lines[("name",)] == 1
    assert lines[("resources", "gpus")] == 3
    assert lines[("command", 1)] == 6


@pytest.mark.parametrize("setup, message", [
    (lambda: None, "no such file: missing.yaml"),
    (lambda: os.mkdir("missing.yaml"), "missing.yaml is a directory"),
    (lambda: Path("missing.yaml").write_bytes(b"\xff\xfe\x00binary"), "missing.yaml is not a text file"),
])
def test_unreadable_file(setup, message):
    setup()
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec("missing.yaml")


@pytest.mark.parametrize("text, message", [
    ('{"command": ["a"], "x[": 1}', "unknown field 'x['"),
    ('{"command": ["a"], "resources": {"(": 1}}', "unknown field 'resources.('"),
    ("[" * 10_000 + "]" * 10_000, "Invalid JSON: recursion limit exceeded"),
    ("not json", "Invalid JSON"),
])
def test_validate_json_names_the_key(text, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        validate_json(text)


def test_a_shebang_that_cannot_be_split():
    with pytest.raises(SpecError, match=re.escape("run.sh:1: cannot parse the #! line: No closing quotation")):
        load_spec(write("run.sh", "#!/bin/sh '\necho\n"))


def test_nothing_to_run():
    with pytest.raises(SpecError, match="nothing to run"):
        load_spec()


@pytest.mark.parametrize("raw, message", [
    ({"command": ["a"], "resources": {"gpus": -1}}, "resources.gpus"),
    ({"command": ["a"], "limits": {"wall_time": "1y"}}, "limits.wall_time: invalid duration '1y'"),
    ({"command": ["a"], "retries": {"on_error": -1}}, "retries.on_error"),
    ({"command": ["a"], "spot": "perhaps"}, "spot:"),
    ({"command": ["a"], "name": "a" * 5000}, "name: '" + "a" * 36 + "... is not a valid name: printable characters "
                                             "without '/' (max 200; this is 5,000)"),    # a line, not 5,000 a's
    ({"command": ["a"], "team": "t" * 300}, "team: '" + "t" * 36 + "... is not a valid name"),
])
def test_validate_names_the_field(raw, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        validate(raw)


# -- good job files ------------------------------------------------------------

FULL = """\
name: resnet
team: vision
owner: bob
priority: high
command: [python, train.py, --epochs, "90"]
env:
  SEED: 42
  DEBUG: true
resources:
  gpus: 4
  gpu_type: a10g
  cpus: 16
  memory: 64Gi
limits:
  wall_time: 1-12:00:00
  on_timeout: requeue
retries:
  on_error: 2
  backoff: 30s
  max_backoff: 10m
checkpoint:
  every: 15m
  grace: 2m
tags:
  project: imagenet
"""


@pytest.mark.parametrize("path, value", [
    ("name", "resnet"),
    ("team", "vision"),
    ("owner", "bob"),
    ("priority", Priority.HIGH),
    ("command", ["python", "train.py", "--epochs", "90"]),
    ("env", {"SEED": "42", "DEBUG": "true"}),
    ("resources.gpus", 4),
    ("resources.gpu_type", "a10g"),
    ("resources.cpus", 16),
    ("resources.memory", 64 * GiB),
    ("limits.wall_time", 36 * 3600),
    ("limits.on_timeout", "requeue"),
    ("retries.on_error", 2),
    ("retries.backoff", 30),
    ("retries.max_backoff", 600),
    ("checkpoint.every", 900),
    ("checkpoint.grace", 120),
    ("tags", {"project": "imagenet"}),
])
def test_yaml_file(path, value, tmp_path):
    job = load_spec(write("job.yaml", FULL))
    assert field(job, path) == value
    assert job.workdir == str(tmp_path)


def test_flags_override_file_values_and_keep_the_rest():
    path = write("job.yaml", FULL)
    job = load_spec(path, overrides={"resources": {"gpus": 2}, "team": None, "priority": "low",
                                     "limits": {"wall_time": "2h"}})
    assert job.resources.gpus == 2
    assert job.resources.gpu_type == "a10g"         # from the file
    assert job.team == "vision"                       # None means "flag not given"
    assert job.priority == Priority.LOW
    assert job.limits.wall_time == 7200
    assert job.limits.on_timeout == "requeue"        # from the file


def test_command_after_dashes_replaces_the_files_command():
    job = load_spec(write("job.yaml", FULL), command=["python", "eval.py"])
    assert job.command == ["python", "eval.py"]


def test_command_alone():
    job = load_spec(command=["/usr/bin/python3", "train.py"], overrides={"owner": "alice"})
    assert job.command == ["/usr/bin/python3", "train.py"]
    assert job.name == "python3"


def test_shell_command():
    job = validate({"command": "python train.py | tee log", "shell": True, "owner": "alice"})
    assert job.argv() == ["/bin/sh", "-c", "python train.py | tee log"]


@pytest.mark.parametrize("overrides", [
    {"limits": {"wall_time": "90m"}, "resources": {"memory": "16Gi"}},
    {"retries": {"on_error": 3, "backoff": "1m", "max_backoff": "1h"}, "checkpoint": {"grace": "30s"}},
    {},
])
def test_spec_survives_a_json_round_trip(overrides):
    # Records store the spec as JSON; durations and sizes must not be re-read as minutes or MiB.
    job = spec(**overrides)
    assert JobSpec.model_validate_json(job.model_dump_json()) == job
    assert JobSpec.model_validate(job.model_dump()) == job


# -- scripts with directives -------------------------------------------------------

def directives(text: str, warn=None) -> JobSpec:
    """The spec the directives in `text` describe."""
    raw = parse_directives(text, warn=warn)
    return validate({"command": ["x"], "owner": "alice", **raw})


@pytest.mark.parametrize("lines, path, value", [
    ("#SBATCH --gres=gpu:2", "resources.gpus", 2),
    ("#SBATCH --gres=gpu:a10g:2", "resources.gpus", 2),
    ("#SBATCH --gres=gpu:a10g:2", "resources.gpu_type", "a10g"),
    ("#SBATCH --gres gpu:3", "resources.gpus", 3),
    ("#SBATCH --gpus=4", "resources.gpus", 4),
    ("#SBATCH --gpus=h100:8", "resources.gpu_type", "h100"),
    ("#SBATCH -G4", "resources.gpus", 4),
    ("#SBATCH --time=1-00:00:00", "limits.wall_time", 86400),
    ("#SBATCH --time=30", "limits.wall_time", 1800),
    ("#SBATCH -t 2:00:00", "limits.wall_time", 7200),
    ("#SBATCH --mem=16G", "resources.memory", 16 * GiB),
    ("#SBATCH --mem=512", "resources.memory", 512 * MiB),
    ("#SBATCH --mem=2048M", "resources.memory", 2 * GiB),
    ("#SBATCH --cpus-per-task=8", "resources.cpus", 8),
    ("#SBATCH -c 4", "resources.cpus", 4),
    ("#SBATCH --job-name=train", "name", "train"),
    ("#SBATCH -J myjob", "name", "myjob"),
    ("#SBATCH --qos=high", "priority", Priority.HIGH),
    ("#SBATCH --qos=urgent", "priority", Priority.HIGH),
    ("#SBATCH --account=vision", "team", "vision"),
    ("#SBATCH --array=0-9%2", "array", "0-9%2"),
    ("#SBATCH --gres=gpu:2  # two of them", "resources.gpus", 2),
    ("#SBATCH --gres=gpu:2 --time=1:00:00", "limits.wall_time", 3600),
    ("#GQA --gpus 2 --team vision", "team", "vision"),
    ("#GQA --gpus 2 --team vision", "resources.gpus", 2),
    ("#GQA --gpu-type h100", "resources.gpu_type", "h100"),
    ("#GQA --priority low", "priority", Priority.LOW),
    ("#GQA --retries 3", "retries.on_error", 3),
    ("#SBATCH --gres=gpu:2\n#GQA --gpus 4", "resources.gpus", 4),     # later lines win
    ("#!/bin/bash\n#SBATCH --gres=gpu:2", "resources.gpus", 2),          # after a shebang
    ("#SBATCH --gres=gpu:2\n\n# a comment\n#SBATCH --time=30", "limits.wall_time", 1800),
    ("#SBATCH --gres=gpu:2\necho hi\n#SBATCH --gres=gpu:8", "resources.gpus", 2),  # stop at the first command
    ("#SBATCH --gres=gpu:2\necho hi\n#GQA --bogus", "resources.gpus", 2),
    ("#SBATCH\t--time=3", "limits.wall_time", 180),                      # any blank after the word
    ("#GQA\t--retries 3", "retries.on_error", 3),
    ("#SBATCH --gres=gpu:2\n  #SBATCH --gres=gpu:8", "resources.gpus", 2),  # indented: a comment to sbatch
    ("#SBATCH --gres=gpu:2\n\t#SBATCH --time=30", "limits.wall_time", None),
    ("#SBATCH --gres=gpu:2\n#SBATCH--time=30", "limits.wall_time", None),  # no blank: another word
])
def test_directives(lines, path, value):
    assert field(directives(lines + "\npython train.py\n"), path) == value


@pytest.mark.parametrize("text, warning", [
    ("#SBATCH --partition=gpu\n", "script:1: #SBATCH --partition=gpu has no effect here: one machine"),
    ("#!/bin/sh\n#SBATCH -p gpu\n", "script:2: #SBATCH -p gpu has no effect here: one machine"),
])
def test_an_sbatch_option_without_effect_is_noted(text, warning):
    warnings: list[str] = []
    job = directives(text + "#SBATCH --gres=gpu:2\n", warn=warnings.append)
    assert len(warnings) == 1 and warnings[0].startswith(warning), warnings
    assert job.resources.gpus == 2


@pytest.mark.parametrize("text, message, line", [
    ("#GQA --gpu-typo a10g\n", "unknown #GQA option '--gpu-typo'; did you mean --gpu-type?", 1),
    ("#!/bin/sh\n#GQA --gpus 1\n#GQA --tem vision\n", "unknown #GQA option '--tem'; did you mean --team?", 3),
    ("#GQA --gpus\n", "#GQA option --gpus needs a value", 1),
    ("#SBATCH --gres=tpu:2\n", "--gres 'tpu:2': gqa gives whole GPUs and nothing else", 1),
    ("#SBATCH --time\n", "#SBATCH option --time needs a value", 1),
    ("#SBATCH --gres=gpu:2\n#SBATCH --partiton=gpu\n", "unknown #SBATCH option '--partiton'; did you mean "
                                                       "--partition?", 2),
    ("#SBATCH --gpus=two\n", "--gpus needs a whole number, got 'two'", 1),
    ("#SBATCH --cpus-per-task=many\n", "--cpus-per-task needs a whole number", 1),
    ("#GQA --team 'vision\n", "cannot parse directive", 1),
])
def test_bad_directive(text, message, line):
    with pytest.raises(SpecError, match=re.escape(message)) as caught:
        parse_directives(text, source="run.sh")
    assert caught.value.line == line
    assert str(caught.value).startswith(f"run.sh:{line}: ")


def test_script_job(tmp_path):
    text = "#!/bin/bash\n#SBATCH --gres=gpu:2\n#SBATCH --time=1:00:00\npython train.py \"$@\"\n"
    job = load_spec(write("train.sh", text), command=["--lr", "0.1"], overrides={"owner": "alice"})
    assert job.command == ["/bin/bash", str(tmp_path / "train.sh"), "--lr", "0.1"]
    assert job.name == "train.sh"                    # sbatch names a job after its script's file
    assert job.submit_dir == str(tmp_path)
    assert job.resources.gpus == 2
    assert job.limits.wall_time == 3600
    assert job.workdir == str(tmp_path)


def test_script_job_name_directive_and_flags():
    text = "#SBATCH -J resnet --gres=gpu:2\necho\n"
    job = load_spec(write("run.sh", text), overrides={"owner": "alice", "resources": {"gpus": 1}})
    assert job.name == "resnet"
    assert job.resources.gpus == 1                   # flags win over directives


def test_script_directive_error_names_the_file():
    with pytest.raises(SpecError, match=re.escape("run.sh:2: unknown #GQA option '--gpu'")):
        load_spec(write("run.sh", "#!/bin/sh\n#GQA --gpu 2\n"))


@pytest.mark.parametrize("text, executable, expected", [
    ("#!/bin/bash\necho\n", True, ["{path}"]),
    ("#!/usr/bin/env python3 -u\nprint(1)\n", False, ["/usr/bin/env", "python3", "-u", "{path}"]),
    ("#!/bin/bash\necho\n", False, ["/bin/bash", "{path}"]),
    ("echo hi\n", False, ["/bin/sh", "{path}"]),
    ("", False, ["/bin/sh", "{path}"]),
])
def test_script_command(text, executable, expected, tmp_path):
    path = write("job.sh", text, executable=executable)
    full = str(tmp_path / "job.sh")
    assert script_command(path, text) == [part.format(path=full) for part in expected]


@pytest.mark.parametrize("value, stored", [("a10g", "a10g"), (["a10g", "l4"], "a10g,l4"), ("a10g, l4", "a10g,l4"),
                                           (["l4", "l4"], "l4")])
def test_several_acceptable_gpu_types(value, stored):
    from gqa.models.loader import validate

    assert validate({"command": ["a"], "resources": {"gpu_type": value}}).resources.gpu_type == stored


def test_a_bad_gpu_type_name_is_refused():
    from gqa.models.errors import SpecError
    from gqa.models.loader import validate

    with pytest.raises(SpecError, match="invalid GPU type 'a 10'"):
        validate({"command": ["a"], "resources": {"gpu_type": ["a 10"]}})


def test_a_spec_read_back_from_a_store_keeps_reading_under_rules_made_stricter_since():
    """A job submitted before a rule tightened (a wall time past 100 years, a recipient no webhook)
    must still read, in the daemon and in every view; a new submission is held to the rule."""
    import json

    from gqa.models.records import with_changes
    from tests.builders import job_record

    old = json.dumps({"command": ["true"], "limits": {"wall_time": f"{200 * 365 * 86400}s"},
                      "notify": {"events": ["end"], "to": "ftp://files.example.org"}})
    job = with_changes(job_record(id="1", group="1"), spec_json=old)
    assert job.spec.limits.wall_time == 200 * 365 * 86400 and job.spec.notify.to == "ftp://files.example.org"
    with pytest.raises(SpecError, match="too large; at most 36500d"):
        validate(json.loads(old))


@pytest.mark.parametrize("to", ["http://127.0.0.1:abc/hook", "ana@@bad", "mailto:ana@example.org",
                                "https://hooks.example.org/caf\u00e9"])
def test_a_job_queued_with_a_target_refused_now_still_reads(to):
    """Targets are checked at submission; a job queued before (its notice fails at send) still reads."""
    import json

    from gqa.models.records import with_changes
    from tests.builders import job_record

    old = json.dumps({"command": ["true"], "notify": {"events": ["end"], "to": to}})
    assert with_changes(job_record(id="1", group="1"), spec_json=old).spec.notify.to == to
    with pytest.raises(SpecError, match="notify.to"):
        validate(json.loads(old))
