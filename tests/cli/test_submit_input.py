"""Bad input: one clear line on stderr, exit code 2, nothing written."""

import json

import pytest

BAD_YAML = "name: x\ncommand: [python, train.py]\nresources:\n  gpus: 2\n   gpu_type: a10g\n"
CASES = [
    # (files, argv, words the message must contain)
    ({"job.yaml": BAD_YAML}, ["submit", "job.yaml"], ["job.yaml:5", "malformed YAML"]),
    ({"job.yaml": "command: [a]\nresources:\n  gpu_typ: a10g\n"}, ["submit", "job.yaml"],
     ["job.yaml:3", "resources.gpu_typ", "did you mean 'gpu_type'"]),
    ({"job.yaml": "comand: [a]\n"}, ["submit", "job.yaml"], ["'comand'", "did you mean 'command'"]),
    ({"job.yaml": "- a\n- b\n"}, ["submit", "job.yaml"], ["must be a YAML mapping"]),
    ({}, ["submit", "missing.yaml"], ["no such file: missing.yaml"]),
    ({}, ["submit", "--gpus", "-1", "--", "true"], ["resources.gpus", "greater than or equal to 0"]),
    ({}, ["submit", "--gpus", "-2", "--", "true"], ["resources.gpus"]),
    ({}, ["submit", "--gpus", "8", "--", "true"], ["asks for 8 GPUs", "the queue has 4"]),
    ({}, ["submit", "--gpu-type", "h100", "--", "true"], ["h100", "the queue has 4 a10g"]),
    ({}, ["submit", "--time", "4x", "--", "true"], ["limits.wall_time", "invalid duration '4x'"]),
    ({}, ["submit", "--time", "0", "--", "true"], ["limits.wall_time", "positive"]),
    ({}, ["submit", "--mem", "lots", "--", "true"], ["resources.memory", "invalid size 'lots'"]),
    ({}, ["submit", "--mem", "1Ti", "--", "true"], ["the queue has 64Gi"]),
    ({}, ["submit", "--"], ["empty command"]),
    ({}, ["submit"], ["nothing to run"]),
    ({"job.yaml": "command: []\n"}, ["submit", "job.yaml"], ["command is empty"]),
    ({"job.yaml": "command: python train.py\n"}, ["submit", "job.yaml"], ["shell: true"]),
    ({}, ["submit", "--env", "1BAD=x", "--", "true"], ["invalid environment variable name '1BAD'"]),
    ({}, ["submit", "--env", "NOEQUALS", "--", "true"], ["NAME=VALUE"]),
    ({}, ["submit", "--env", "GQA_JOB_ID=7", "--", "true"], ["set by gqa"]),
    ({}, ["submit", "--priority", "urgent", "--", "true"], ["priority", "'high', 'normal' or 'low'", "'urgent'"]),
    ({}, ["submit", "--array", "5-1", "--", "true"], ["invalid array range"]),
    ({}, ["submit", "-o", "yaml", "--", "true"], ["unknown output format 'yaml'"]),
    ({"train.sh": "#!/bin/sh\n#GQA --gpu=2\necho hi\n"}, ["submit", "train.sh"], ["train.sh:2", "did you mean --gpus"]),
    ({"train.sh": "#!/bin/sh\n#SBATCH --time=soon\necho\n"}, ["submit", "train.sh"], ["invalid duration 'soon'"]),
    ({}, ["submit", "--notify", "whenever", "--", "true"], ["--notify 'WHENEVER'", "BEGIN, END, FAIL"]),
    ({}, ["submit", "--notify", "end:", "--", "true"], ["nothing after ':'"]),
    # a target no sender can use: refused here, not failed at every send
    ({}, ["submit", "--notify", "end:http://127.0.0.1:abc/hook", "--", "true"],
     ["notify.to", "'http://127.0.0.1:abc/hook'", "port must be a number from 1 to 65535"]),
    ({}, ["submit", "--notify", "end:https://hooks.example.org/caf\u00e9", "--", "true"],
     ["notify.to", "percent-encode"]),
    ({}, ["submit", "--notify", "end:mailto:ana@example.org", "--", "true"], ["notify.to", "give one e-mail address"]),
    ({"run.sh": "#!/bin/sh\n#SBATCH --mail-type=END --mail-user=ana@@bad\ntrue\n"}, ["submit", "run.sh"],
     ["notify.to", "'ana@@bad'", "give one e-mail address"]),
]


@pytest.mark.parametrize("files, argv, words", CASES, ids=[" ".join(c[1]) for c in CASES])
def test_bad_input_is_refused_with_a_clear_message_and_nothing_written(cli, files, argv, words):
    for name, text in files.items():
        (cli.home / name).write_text(text)
    code, out, err = cli(*argv)
    assert code == 2
    assert out == ""
    assert err.startswith("gqa: error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert cli.job_count() == 0


def test_sbatch_options_without_effect_are_noted(cli):
    (cli.home / "train.sh").write_text("#!/bin/sh\n#SBATCH --partition=gpu\n#SBATCH --gres=gpu:2\necho\n")
    code, out, err = cli("submit", "train.sh")
    assert code == 0 and out.strip() == "1"
    assert "train.sh:2: #SBATCH --partition=gpu has no effect here" in err
    assert cli.store.get("1").gpus == 2


@pytest.mark.parametrize("argv", [
    ["submit", "--array", "0-2", "--notify", "end", "--", "true"],
    ["submit", "job.yaml"],
])
def test_an_array_asking_for_notices_without_array_tasks_is_told_it_gets_none(cli, argv):
    """Each task's notice is skipped without array_tasks: said at submission, as the sbatch path says it."""
    (cli.home / "job.yaml").write_text("command: [python, train.py]\nsweep:\n  grid: {lr: [1, 2]}\n"
                                       "notify: {events: [begin]}\n")
    code, out, err = cli(*argv)
    assert code == 0 and out.strip() == "1"
    assert "note: notify: an array's (or a sweep's) tasks are told of only with array_tasks" in err
    code, out, err = cli(argv[0], "-o", "json", *argv[1:])
    assert code == 0 and json.loads(out)["id"] == "2"      # stdout stays one JSON object, the note on stderr
    assert "told of only with array_tasks" in err


@pytest.mark.parametrize("argv", [
    ["submit", "--array", "0-2", "--notify", "end,array_tasks", "--", "true"],
    ["submit", "--array", "0-2", "--", "true"],
    ["submit", "--notify", "end", "--", "true"],
])
def test_no_array_note_where_the_tasks_are_told_or_nothing_is_asked(cli, argv):
    code, _, err = cli(*argv)
    assert code == 0 and "array_tasks" not in err


def test_a_scripts_array_note_is_said_once(cli):
    (cli.home / "run.sh").write_text("#!/bin/sh\n#SBATCH --array=0-2\n#SBATCH --mail-type=END\ntrue\n")
    code, _, err = cli("submit", "run.sh")
    assert code == 0 and err.count("told of only with") == 1 and "run.sh:3: #SBATCH --mail-type" in err
