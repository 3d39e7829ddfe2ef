"""Slurm's commands for a login shell: a batch script that starts `#!/bin/bash -l`
(or `--login`, common where scripts load modules) reads the profile, and Debian's
/etc/profile, or a user's ~/.bash_profile, sets PATH anew: `srun python train.py`
would find no srun (under Slurm it is in /usr/bin and survives).

Bash reads the file BASH_ENV names after the login files, in every non-interactive
shell. So a job's BASH_ENV is a file written beside its tools (`write_bash_env`)
that puts their directory first on PATH again where it is missing (a bash started
by the script finds it there and adds nothing), then reads the BASH_ENV the job's
own environment had, kept in GQA_USER_BASH_ENV (`with_bash_env`), as bash would
have: expanded as in double quotes, a leading ~ too, nothing when the name is empty
or no file is there, a name without a slash in the current directory, not on PATH.
The tools' directory is checked again after it, so the job's file may reset PATH too.

Only bash reads BASH_ENV: a `#!/bin/sh -l` script on a system whose sh is dash
keeps what its profile sets."""

from __future__ import annotations

import os
import shlex
from collections.abc import MutableMapping
from pathlib import Path

from .slurm_tools import install_file

BASH_ENV = "BASH_ENV"
USER_BASH_ENV = "GQA_USER_BASH_ENV"    # the BASH_ENV the job's environment had ("" for none)
FILE_NAME = "gqa-bash-env"             # beside the tools; not executable, so no command on PATH

_HEADER = """\
# gqa: every bash of this job reads this file (BASH_ENV). A login shell's profile may have
# set PATH anew: the job's Slurm commands (srun, scontrol, ...) come first on it again, and
# the job's own BASH_ENV, kept in GQA_USER_BASH_ENV, is read as bash would have read it.
"""

# a script run with -x (#!/bin/bash -x) traces none of this file's own lines
_QUIET = """\
{ __gqa_trace=${-//[!x]/}; set +x; } 2>/dev/null
"""
_TRACE_AGAIN = """\
if [ -n "$__gqa_trace" ]; then unset __gqa_trace; set -x; else unset __gqa_trace; fi
"""

# bash expands BASH_ENV's value as in double quotes and reads the file without a PATH search;
# a name that expands to nothing, or names no file, is passed over in silence, as bash does
_USER_FILE = """\
if [ -n "${GQA_USER_BASH_ENV-}" ]; then
  __gqa_bash_env=${GQA_USER_BASH_ENV//'"'/'\\"'}
  eval "__gqa_bash_env=\\"$__gqa_bash_env\\"" || __gqa_bash_env=$GQA_USER_BASH_ENV
  case $__gqa_bash_env in
  "~"*)
    __gqa_home=${__gqa_bash_env%%/*}
    case $__gqa_home in
    *[!A-Za-z0-9._+~-]*) ;;
    *) eval "__gqa_home=$__gqa_home"
       __gqa_bash_env=$__gqa_home${__gqa_bash_env#"${__gqa_bash_env%%/*}"} ;;
    esac
    unset __gqa_home ;;
  esac
  case $__gqa_bash_env in
  */*) ;;
  ?*) __gqa_bash_env=./$__gqa_bash_env ;;
  esac
  if [ -n "$__gqa_bash_env" ] && [ -e "$__gqa_bash_env" ]; then
    if [ -n "$__gqa_trace" ]; then set -x; fi
    . "$__gqa_bash_env"
    { __gqa_trace=${-//[!x]/}; set +x; } 2>/dev/null
  fi
  unset __gqa_bash_env
fi
"""


def bash_env_text(tools: str | os.PathLike[str]) -> str:
    """The file's text for the tools in directory `tools` (an absolute path)."""
    directory = shlex.quote(str(tools))
    first_on_path = (f'case ":${{PATH-}}:" in\n'
                     f'*:{directory}:*) ;;\n'
                     f'*) PATH={directory}${{PATH:+:$PATH}}; export PATH ;;\n'
                     f'esac\n')
    return _HEADER + _QUIET + first_on_path + _USER_FILE + first_on_path + _TRACE_AGAIN


def write_bash_env(tools: str | os.PathLike[str]) -> Path:
    """Write the file into the tools' directory, mode 0644 (a job may run as another user than
    the one who installed the tools): written whole beside its name and renamed over it, and
    left alone when it already says the same. Its path."""
    directory = Path(os.path.abspath(tools))   # as the job's PATH names it: links left as they are
    path = directory / FILE_NAME
    install_file(path, bash_env_text(directory), 0o644)
    return path


def with_bash_env(env: MutableMapping[str, str], bash_env: str | os.PathLike[str]) -> None:
    """Point the job's BASH_ENV at `bash_env` (written by `write_bash_env`), keeping the job's
    own in GQA_USER_BASH_ENV. An environment that already went through here (a job submitted
    from inside a gqa job) keeps the value it kept then, so no file ends up reading itself."""
    current = env.get(BASH_ENV, "")
    if Path(current).name == FILE_NAME:
        user = env.get(USER_BASH_ENV, "")
    else:
        user = current
    env[USER_BASH_ENV] = user
    env[BASH_ENV] = _as_bash_env(str(bash_env))


def _as_bash_env(path: str) -> str:
    """The path as BASH_ENV must say it: bash expands the value as between double quotes, so
    a home named `h$USER` would name another file, unread, and the tools be lost again."""
    return "".join("\\" + c if c in '\\$`' else c for c in path)
