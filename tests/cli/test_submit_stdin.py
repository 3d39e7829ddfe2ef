"""`gqa submit` with the batch script on stdin, as `sbatch <<EOF` and
`sbatch -` take one: its #SBATCH lines are read and the job keeps it."""

import io
import sys

import pytest

from cli.code import for_backend
from cli.stdin_script import file_argument
from gqa.models.errors import SpecError
from gqa.models.limits import MAX_SCRIPT_BYTES
from gqa.models.loader import load_spec

SCRIPT = "#!/bin/bash\n#SBATCH --time=5\n#SBATCH -J heredoc\necho \"$@\"\n"


def piped(monkeypatch, data: bytes):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize("argv", [["submit"], ["submit", "-"], ["submit", "--hold", "-"]])
def test_a_script_on_stdin_is_read_and_kept_as_the_jobs(cli, monkeypatch, argv):
    piped(monkeypatch, SCRIPT.encode())
    code, out, err = cli(*argv)
    assert code == 0, err
    spec = cli.store.get(out.strip()).spec
    assert spec.script is not None and spec.script.text == SCRIPT and spec.script.path == "/dev/stdin"
    assert spec.command == ["/bin/bash", "/dev/stdin"]
    assert spec.name == "heredoc" and spec.limits.wall_time == 300 and spec.output == "slurm-%j.out"


def test_a_script_on_stdin_takes_its_arguments_after_the_separator(cli, monkeypatch):
    piped(monkeypatch, b"echo hi\n")
    code, out, err = cli("submit", "-", "--", "0.1", "3")
    assert code == 0, err
    spec = cli.store.get(out.strip()).spec
    assert spec.command == ["/bin/sh", "/dev/stdin", "0.1", "3"] and spec.name == "sbatch"   # sbatch's name


def test_a_named_script_leaves_stdin_alone(cli, monkeypatch):
    (cli.home / "run.sh").write_text("#!/bin/sh\necho from-file\n")
    piped(monkeypatch, b"#!/bin/sh\necho from-stdin\n")
    code, out, err = cli("submit", "run.sh")
    assert code == 0, err
    assert "from-file" in cli.store.get(out.strip()).spec.script.text
    assert sys.stdin.read() == "#!/bin/sh\necho from-stdin\n"


@pytest.mark.parametrize("data, words", [
    (b"", "nothing to run: the script on stdin is empty"),
    (b"  \n\n", "nothing to run: the script on stdin is empty"),
    (b"#!/bin/sh\n" + b"#" * MAX_SCRIPT_BYTES, "stdin: larger than 512 KiB, the limit for a batch script"),
    (b"#!/bin/sh\n#SBATCH --tim=5\n", "stdin:2"),
])
def test_a_bad_script_on_stdin_is_refused(cli, monkeypatch, data, words):
    piped(monkeypatch, data)
    code, out, err = cli("submit")
    assert code == 2 and out == "" and words in err, err
    assert cli.job_count() == 0


@pytest.mark.parametrize("args, file", [
    ([], None), (["-"], "-"), (["run.sh"], "run.sh"), (["--gpus", "2", "-"], "-"), (["-G2", "run.sh"], "run.sh"),
    (["-G", "2"], None), (["--gpus=2", "--wait", "run.sh"], "run.sh"), (["-n", "3", "--hold"], None),
    (["--hold", "job.yaml"], "job.yaml"), (["-o", "json"], None),
])
def test_the_light_client_finds_the_file_argument(args, file):
    assert file_argument(args) == file


def test_a_script_on_stdin_is_not_sent_to_aws(tmp_path):
    spec = load_spec(overrides={"owner": "alice"}, stdin=b"echo hi\n", cwd=str(tmp_path))

    class Aws:
        def code_store(self):   # a backend that bundles code
            raise AssertionError

    with pytest.raises(SpecError, match="a script on stdin runs on the local queue only"):
        for_backend(spec, Aws())
