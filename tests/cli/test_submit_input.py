"""Bad input: one clear line on stderr, exit code 2, nothing written."""

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
