"""`gqa --version` / `-V`: the package's version, answered by the light
client before any command's module (typer, pydantic, rich) loads."""

import subprocess
import sys
from importlib.metadata import version

import pytest

from cli.main import main
from tests.chaos.harness import gqa_executable

EXPECTED = f"gqa {version('gqa')}\n"
# the light client, run as the console script runs it, saying at exit which heavy modules it loaded
LIGHT = ("import atexit, sys\n"
         "atexit.register(lambda: sys.stderr.write(','.join(m for m in ('typer', 'pydantic', 'rich') "
         "if m in sys.modules)))\n"
         "from cli.client import run\n"
         "sys.argv = ['gqa', *sys.argv[1:]]\n"
         "run()\n")


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_as_a_real_process(flag):
    proc = subprocess.run([*gqa_executable(), flag], capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (0, EXPECTED), proc.stderr


def test_version_loads_no_command_module():
    proc = subprocess.run([sys.executable, "-c", LIGHT, "--version"], capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EXPECTED, "")


def test_version_in_process_and_after_the_profile_option(capsys):
    assert main(["--profile", "other", "-V"]) == 0
    assert capsys.readouterr().out == EXPECTED
