"""Shell completion: `gqa completion bash|zsh|fish` prints the script; a real
bash sources it and completes commands, options and the local queue's
unfinished job ids, each answer a fresh `gqa` process that must be quick."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.completion import job_ids

GQA = Path(sys.executable).with_name("gqa")
pytestmark = pytest.mark.skipif(not GQA.exists() or shutil.which("bash") is None,
                                reason="needs the installed gqa script and bash")
# one completion, as bash runs it on a Tab; printed as `words -> candidates`
COMPLETE = """
source <(gqa completion bash)
complete_words() {
    COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    _gqa_completion gqa
    echo "${COMPREPLY[*]}"
}
"""
QUICK = 3.0     # seconds per completion, as a guard on a loaded test machine; about 0.2 s of CPU each


def env_for(home) -> dict:
    return dict(os.environ, GQA_HOME=str(home), PATH=f"{GQA.parent}{os.pathsep}{os.environ['PATH']}")


def complete(home, *lines: tuple[str, ...]) -> list[list[str]]:
    """Each line's candidates, from one bash that sourced the script."""
    calls = "".join("complete_words " + " ".join(f"'{w}'" for w in words) + "\n" for words in lines)
    started = time.monotonic()
    proc = subprocess.run(["bash", "-c", COMPLETE + calls], env=env_for(home), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert (time.monotonic() - started) / len(lines) < QUICK
    return [line.split() for line in proc.stdout.splitlines()]


@pytest.mark.slow
def test_bash_completes_commands_options_subcommands_and_unfinished_job_ids(cli):
    cli("submit", "--array", "0-2", "--", "true")         # 1: 1_0 .. 1_2
    cli("submit", "--", "true")                           # 2
    cli("submit", "--", "true")                           # 3, cancelled below: not offered
    cli("submit", "--hold", "--", "true")                 # 4, held: still unfinished
    cli("cancel", "3")
    answers = complete(cli.home, ("gqa", "su"), ("gqa", "w"), ("gqa", "logs", "--f"), ("gqa", "local", "st"),
                       ("gqa", "cancel", ""), ("gqa", "status", "1_"), ("gqa", "wait", "2", ""))
    assert answers == [["submit"], ["wait", "whoami"], ["--follow"], ["start", "stop", "status"],
                       ["1", "2", "4"], ["1_0", "1_1", "1_2"], ["1", "2", "4"]]


def test_no_job_ids_without_a_local_queue_or_on_aws(tmp_path, monkeypatch):
    monkeypatch.setenv("GQA_HOME", str(tmp_path / "none"))
    assert job_ids("") == [] and not (tmp_path / "none").exists()     # completing creates no queue
    monkeypatch.setenv("GQA_HOME", str(tmp_path))
    monkeypatch.setenv("GQA_BACKEND", "aws")
    (tmp_path / "gqa.db").write_bytes(b"")
    assert job_ids("") == []


@pytest.mark.parametrize("shell, words, expected", [
    ("zsh", "gqa su", '"submit":"Queue a job."'),
    ("fish", "gqa logs --fo", "--follow"),
])
def test_zsh_and_fish_scripts_and_answers(tmp_path, shell, words, expected):
    script = subprocess.run([str(GQA), "completion", shell], capture_output=True, text=True, timeout=30)
    assert script.returncode == 0 and "_GQA_COMPLETE=complete_" + shell in script.stdout
    assert ("compdef _gqa_completion gqa" if shell == "zsh" else "complete --command gqa") in script.stdout
    env = dict(env_for(tmp_path), _GQA_COMPLETE=f"complete_{shell}", _TYPER_COMPLETE_ARGS=words,
               _TYPER_COMPLETE_FISH_ACTION="get-args")
    answer = subprocess.run([str(GQA)], env=env, capture_output=True, text=True, timeout=30)
    assert answer.returncode == 0 and expected in answer.stdout


def test_an_unknown_shell_is_one_line_and_exit_2(cli):
    assert cli("completion", "tcsh") == (2, "", "gqa: error: no completion for 'tcsh'; gqa writes it for bash, "
                                                "zsh, fish\n")
