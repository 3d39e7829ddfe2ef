"""What `gqa submit` does with what the user did not say: the flags it leaves
unset change nothing in the file, and a name it makes up is a valid one."""

import pytest

from gqa.models.spec import MAX_NAME

REFUSED = [
    # (files, argv, words the message must contain): a scalar or list where a map belongs is refused,
    # as it is when no flag is given, not dropped for the defaults
    ({"job.yaml": "command: [python, t.py]\nname: x\nlimits: 4h\n"}, ["submit", "job.yaml"],
     ["job.yaml:3: limits: Input should be a valid dictionary"]),
    ({"job.yaml": "command: [python, t.py]\nname: x\nresources: 3\n"}, ["submit", "job.yaml"],
     ["job.yaml:3: resources: Input should be a valid dictionary"]),
    ({"job.yaml": "command: [python, t.py]\nname: x\nresources: [1, 2]\n"}, ["submit", "job.yaml"],
     ["job.yaml:3: resources: Input should be a valid dictionary"]),
    ({"job.yaml": "command: [python, t.py]\nname: x\nlimits: 4h\n"}, ["submit", "--gpus", "2", "job.yaml"],
     ["job.yaml:3: limits: Input should be a valid dictionary"]),
    ({"job.yaml": "command: [python, t.py]\nretries: 3\n"}, ["submit", "job.yaml"],
     ["retries: Input should be a valid dictionary"]),
    # sbatch's words: the #! line would name `/bin/bash\r`, and every line would end in \r
    ({"crlf.sh": "#!/bin/bash\r\n#SBATCH --time=5\r\ncd /tmp\r\necho done\r\n"}, ["submit", "crlf.sh"],
     ["crlf.sh:1: Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n)."]),
    ({"crlf.sh": "#!/bin/sh\n#SBATCH --time=5\necho done\r\n"}, ["submit", "crlf.sh"],
     ["crlf.sh:3: Batch script contains DOS line breaks"]),
    # a name the user gave is still refused
    ({"run.sh": "#!/bin/sh\necho\n"}, ["submit", "-J", "x" * (MAX_NAME + 1), "run.sh"],
     ["is not a valid name", f"max {MAX_NAME}; this is {MAX_NAME + 1}"]),
    ({"run.sh": "#!/bin/sh\n#SBATCH --job-name='a\tb'\necho\n"}, ["submit", "run.sh"], ["is not a valid name"]),
]


@pytest.mark.parametrize("files, argv, words", REFUSED, ids=[" ".join(c[1]) + " " + ",".join(c[0]) for c in REFUSED])
def test_refused_with_its_line_and_nothing_queued(cli, files, argv, words):
    for name, text in files.items():
        (cli.home / name).write_bytes(text.encode())
    code, out, err = cli(*argv)
    assert (code, out) == (2, ""), err
    assert err.startswith("gqa: error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert cli.job_count() == 0


def test_the_flags_still_override_a_files_maps(cli):
    (cli.home / "job.yaml").write_text("command: [python, t.py]\nresources: {gpus: 1, cpus: 2}\n"
                                       "limits: {wall_time: 1h}\n")
    job = cli.json("submit", "--gpus", "2", "--time", "4h", "job.yaml")
    spec = cli.store.get(job["id"]).spec
    assert (spec.resources.gpus, spec.resources.cpus, spec.limits.wall_time) == (2, 2, 4 * 3600)


LONG = "x" * 240 + ".sh"


@pytest.mark.parametrize("file, name", [
    (LONG, LONG[:MAX_NAME]),                   # cut to the limit, as a name given would have to be
    ("a\tb.sh", "a_b.sh"),                     # a character a name cannot hold, replaced
    ("train.sh", "train.sh"),
])
def test_a_default_name_from_the_scripts_file_is_made_valid(cli, file, name):
    (cli.home / file).write_text("#!/bin/sh\n#SBATCH --time=5\necho\n")
    job = cli.json("submit", file)
    assert cli.store.get(job["id"]).spec.name == name


@pytest.mark.parametrize("command, name", [
    (["/bin/" + "y" * 300], "y" * MAX_NAME),
    (["./a\tb"], "a_b"),
])
def test_a_default_name_from_the_command_is_made_valid(cli, command, name):
    job = cli.json("submit", "--", *command)
    assert cli.store.get(job["id"]).spec.name == name
