"""What a Batch job with code runs, as a real process: the command
gqa.models.code.launch_command gives Batch, with the bundle the CLI would
build, from a file:// source in place of S3. The command runs in the
unpacked copy with its arguments, as the runtime's child: its exit code (or
the first failed srun step's) is the job's, and SIGTERM is passed on to it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gqa.adapters.local.code_bundle import build
from gqa.models import code
from gqa.models.loader import validate

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "lib").mkdir(parents=True)
    (proj / "lib" / "answer.txt").write_text("42\n")
    (proj / "train.py").write_text(
        "import os, signal, sys, time\n"
        "print('cwd', os.getcwd(), 'args', sys.argv[1:], 'answer', open('lib/answer.txt').read().strip(),"
        " flush=True)\n"
        "if '--wait' in sys.argv:\n"
        "    def stop(*_):\n"
        "        open(os.environ['MARK'], 'w').write(str(os.getpid())); sys.exit(143)\n"
        "    signal.signal(signal.SIGTERM, stop)\n"
        "    open(os.environ['READY'], 'w').write(str(os.getpid()))\n"
        "    time.sleep(30)\n"
        "sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)\n")
    (proj / "run.sh").write_text("#!/bin/sh\necho \"script in $(pwd) with $*\"\nexit 3\n")
    os.chmod(proj / "run.sh", 0o755)
    return proj


def stored(tmp_path: Path, proj: Path) -> str:
    """The bundle of `proj` where a job would fetch it from; its digest."""
    bundle = build(proj)
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    (store / f"{code.hex_of(bundle.digest)}.tar.gz").write_bytes(bundle.data)
    return bundle.digest


def launch(tmp_path: Path, proj: Path, command, *, shell: bool = False, env: dict | None = None,
           digest: str | None = None, **kw) -> subprocess.Popen:
    digest = digest or stored(tmp_path, proj)
    spec = validate({"command": command, "shell": shell, "workdir": str(proj), "code": digest})
    argv = code.launch_command(spec)
    argv[0] = sys.executable                 # the image's python3
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path),
                   code.URI_ENV: (tmp_path / "store" / f"{code.hex_of(digest)}.tar.gz").as_uri(), **(env or {})}
    return subprocess.Popen(argv, env=environment, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def test_the_command_runs_in_the_unpacked_copy_with_its_arguments_and_exit_code(tmp_path):
    proj = project(tmp_path)
    done = launch(tmp_path, proj, ["python3", "train.py", "--lr", "0.1", "7"])
    out, err = done.communicate(timeout=30)
    assert done.returncode == 7, err
    cwd = out.split()[1]
    assert Path(cwd).parent == tmp_path and Path(cwd).name.startswith("gqa-code-") and cwd != str(proj)
    assert "args ['--lr', '0.1', '7'] answer 42" in out


def test_a_script_named_by_its_path_in_the_submitters_directory_runs_from_the_copy(tmp_path):
    proj = project(tmp_path)
    done = launch(tmp_path, proj, [str(proj / "run.sh"), str(proj / "lib")])
    out, err = done.communicate(timeout=30)
    assert done.returncode == 3, err
    copy = out.split()[2]
    assert out.strip() == f"script in {copy} with {copy}/lib" and copy != str(proj)


def test_a_shell_job_runs_in_the_copy(tmp_path):
    proj = project(tmp_path)
    done = launch(tmp_path, proj, "cat lib/answer.txt && exit 5", shell=True)
    out, err = done.communicate(timeout=30)
    assert (done.returncode, out) == (5, "42\n"), err


def test_sigterm_is_passed_on_to_the_job(tmp_path):
    proj = project(tmp_path)
    ready, mark = tmp_path / "ready", tmp_path / "mark"
    job = launch(tmp_path, proj, ["python3", "train.py", "--wait"], env={"READY": str(ready), "MARK": str(mark)})
    deadline = time.monotonic() + 30
    while not ready.exists() or not ready.read_text():
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()
        time.sleep(0.05)
    child = int(ready.read_text())
    assert child != job.pid and os.getpgid(child) == child     # the runtime's child, leading its own group
    job.send_signal(signal.SIGTERM)
    job.communicate(timeout=30)
    assert job.returncode == 143 and mark.read_text() == str(child)


def test_a_script_whose_srun_step_failed_fails_though_it_ends_with_exit_0(tmp_path):
    proj = project(tmp_path)
    (proj / "job.sh").write_text("#!/bin/bash\n"
                                 "echo host=$(scontrol show hostnames | head -n1)\n"
                                 "srun -n 2 python3 train.py 3\n"
                                 "echo after\nexit 0\n")
    os.chmod(proj / "job.sh", 0o755)
    done = launch(tmp_path, proj, [str(proj / "job.sh")])
    out, err = done.communicate(timeout=60)
    assert done.returncode == 3, err
    assert f"host={socket.gethostname()}" in out and out.count("answer 42") == 2 and "after" in out
    assert "but a step failed with exit code 3 (step 0: srun -n 2 python3 train.py 3)" in err
    assert not list(tmp_path.glob("gqa-tools-*"))          # the tools' directory goes with the job


def test_a_command_ended_by_a_signal_exits_128_and_the_signal(tmp_path):
    proj = project(tmp_path)
    done = launch(tmp_path, proj, "kill -KILL $$", shell=True)
    _, err = done.communicate(timeout=30)
    assert done.returncode == 128 + signal.SIGKILL, err


def test_a_command_that_cannot_start_exits_127_saying_so(tmp_path):
    proj = project(tmp_path)
    done = launch(tmp_path, proj, ["./no-such-program"])
    _, err = done.communicate(timeout=30)
    assert done.returncode == 127 and "gqa: cannot run './no-such-program' in the job's code (gqa-code-" in err


WARNED = ("trap 'echo shell warned >> warned; kill $!' USR1\n"
          "python3 -c 'import signal, sys, time\n"
          "signal.signal(signal.SIGUSR1, lambda *_: (open(\"warned\", \"a\").write(\"step warned\\n\"), sys.exit(0)))\n"
          "time.sleep(20)' &\n"
          "wait $!; wait $!\ncp warned \"$OUT\"\n")


@pytest.mark.parametrize("asked, got", [("USR1@1", "step warned\n"), ("B:USR1@1", "shell warned\n")])
def test_the_warning_signal_reaches_the_steps_or_with_b_the_batch_shell(tmp_path, asked, got):
    proj = project(tmp_path)
    (proj / "job.sh").write_text("#!/bin/bash\n" + WARNED)
    os.chmod(proj / "job.sh", 0o755)
    out = tmp_path / "warned.txt"
    started = time.monotonic()
    done = launch(tmp_path, proj, [str(proj / "job.sh")],
                  env={"GQA_WARN_SIGNAL": asked, "GQA_WALL_END": str(int(time.time()) + 3), "OUT": str(out)})
    _, err = done.communicate(timeout=60)
    assert done.returncode == 0 and out.read_text() == got, err
    assert time.monotonic() - started < 15 and "gqa: SIGUSR1 to the job's" in err


STEPS_WARNED = ("#!/bin/bash\n"
                "srun -n 2 python3 -c 'import os, signal, sys, time\n"
                "rank = os.environ[\"SLURM_PROCID\"]\n"
                "def warned(*_):\n"
                "    print(\"rank\", rank, \"warned\", flush=True)\n"
                "    sys.exit(0)\n"
                "signal.signal(signal.SIGUSR1, warned)\n"
                "time.sleep(20)' | cat > \"$OUT\"\n")


def test_the_warning_reaches_the_srun_steps_and_leaves_the_scripts_pipe_alone(tmp_path):
    proj = project(tmp_path)
    (proj / "job.sh").write_text(STEPS_WARNED)
    os.chmod(proj / "job.sh", 0o755)
    out = tmp_path / "piped.txt"
    done = launch(tmp_path, proj, [str(proj / "job.sh")],
                  env={"GQA_WARN_SIGNAL": "USR1@1", "GQA_WALL_END": str(int(time.time()) + 3), "OUT": str(out)})
    _, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    assert sorted(out.read_text().splitlines()) == ["rank 0 warned", "rank 1 warned"]   # through `| cat`
    assert "gqa: SIGUSR1 to the job's steps (1 process)" in err


def test_a_bundle_that_cannot_be_fetched_exits_69_with_the_reason(tmp_path):
    proj = project(tmp_path)
    digest = stored(tmp_path, proj)
    (tmp_path / "store" / f"{code.hex_of(digest)}.tar.gz").write_bytes(b"not what was submitted")
    done = launch(tmp_path, proj, ["python3", "train.py"], digest=digest)
    out, err = done.communicate(timeout=30)
    assert done.returncode == code.FETCH_FAILED and out == ""
    assert err.startswith("gqa: the job's code at file://") and f"not the {code.hex_of(digest)} it was" in err


def test_an_image_without_gqa_exits_69_and_says_what_it_needs(tmp_path):
    spec = validate({"command": ["true"], "workdir": "/w", "code": "sha256:" + "0" * 64})
    argv = [sys.executable, "-S", *code.launch_command(spec)[1:]]   # -S: no site-packages, so no gqa
    done = subprocess.run(argv, cwd=tmp_path, env={"PATH": os.environ["PATH"]}, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == code.FETCH_FAILED
    assert "this image cannot fetch the job's code" in done.stderr and 'pip install "gqa[aws]"' in done.stderr
