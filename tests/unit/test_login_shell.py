"""The BASH_ENV a job gets (gqa/runtime/login_shell.py): gqa's file, with the job's
own BASH_ENV kept for it to read; and the file's text for a tools directory."""

import pytest

from gqa.runtime.login_shell import BASH_ENV, USER_BASH_ENV, bash_env_text, with_bash_env

OURS = "/state/slurm-bin/gqa-bash-env"


@pytest.mark.parametrize("env, kept", [
    ({}, ""),
    ({BASH_ENV: ""}, ""),
    ({BASH_ENV: "/home/ann/.bash_env"}, "/home/ann/.bash_env"),
    ({BASH_ENV: "$HOME/.bash_env"}, "$HOME/.bash_env"),                       # kept as written: bash expands it
    # submitted from inside a gqa job: the outer job's kept value, never gqa's own file (it would read itself)
    ({BASH_ENV: "/tmp/gqa-tools-x/gqa-bash-env", USER_BASH_ENV: "/home/ann/.bash_env"}, "/home/ann/.bash_env"),
    ({BASH_ENV: "/other/slurm-bin/gqa-bash-env"}, ""),
    ({BASH_ENV: OURS, USER_BASH_ENV: ""}, ""),
    # the job's own BASH_ENV (its spec's env) wins over a value an outer job kept
    ({BASH_ENV: "/home/ann/new_env", USER_BASH_ENV: "/home/ann/.bash_env"}, "/home/ann/new_env"),
])
def test_the_jobs_own_bash_env_is_kept_and_gqas_file_named(env, kept):
    with_bash_env(env, OURS)
    assert env == {BASH_ENV: OURS, USER_BASH_ENV: kept}


def test_the_file_names_its_tools_directory_quoted():
    text = bash_env_text("/srv/gqa state/slurm-bin")
    assert text.count("*:'/srv/gqa state/slurm-bin':*) ;;") == 2       # checked before and after the job's file
    assert "PATH='/srv/gqa state/slurm-bin'${PATH:+:$PATH}; export PATH" in text
