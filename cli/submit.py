"""`gqa submit`: queue a job from a YAML file, a script with #GQA/#SBATCH
directives, or a command after `--`."""

import sys
from typing import Annotated, Optional

import typer

from .options import Output, check_output
from .output import fail, note, print_json, user_errors

Opt = typer.Option


def submit(
    file: Annotated[Optional[str], typer.Argument(help="A job file (.yaml) or a script with #GQA / #SBATCH lines.",
                                                  show_default=False)] = None,
    gpus: Annotated[Optional[int], Opt("--gpus", "-G", help="GPUs, all granted together.")] = None,
    gpu_type: Annotated[Optional[str], Opt("--gpu-type", help="GPU type, e.g. a10g (default: any).")] = None,
    time: Annotated[Optional[str], Opt("--time", "-t", help="Wall-time limit: 90m, 4h, 1d, 1-12:00:00.")] = None,
    mem: Annotated[Optional[str], Opt("--mem", help="Memory: 16Gi, 512Mi.")] = None,
    cpus: Annotated[Optional[int], Opt("--cpus", "-c", help="CPUs.")] = None,
    priority: Annotated[Optional[str], Opt("--priority", "-p", help="high, normal or low.")] = None,
    team: Annotated[Optional[str], Opt("--team", "-A", help="Team (fair share and quotas).")] = None,
    name: Annotated[Optional[str], Opt("--name", "-J", help="Job name.")] = None,
    retries: Annotated[Optional[int], Opt("--retries", help="Retry application errors this many times.")] = None,
    array: Annotated[Optional[str], Opt("--array", "-a", help="Array indices: 0-499, 1,3,5, 0-99%10.")] = None,
    env: Annotated[Optional[list[str]], Opt("--env", "-e", help="NAME=VALUE, repeatable.")] = None,
    workdir: Annotated[Optional[str], Opt("--workdir", "-D", help="Working directory (default: here).")] = None,
    shell: Annotated[bool, Opt("--shell", help="Run the command through /bin/sh -c.")] = False,
    wait: Annotated[bool, Opt("--wait", "-W", help="Wait until the job ends; exit 0 only if it succeeded.")] = False,
    output: Output = "table",
):
    """Queue a job. Prints its id; `-o json` prints {"id", "state", ...}.

    Examples: gqa submit job.yaml | gqa submit train.sh | gqa submit --gpus 2 --time 4h -- python train.py
    """
    from .main import TRAILING_COMMAND

    fmt = check_output(output)
    command = TRAILING_COMMAND.get()
    if command is not None and not command:
        fail("empty command after --")
    if shell and command:
        command = [" ".join(command)]
    overrides = {
        "name": name, "team": team, "priority": priority, "array": array, "workdir": workdir,
        "shell": True if shell else None,
        "env": _env_pairs(env) if env else None,
        "resources": {"gpus": gpus, "gpu_type": gpu_type, "cpus": cpus, "memory": mem},
        "limits": {"wall_time": time},
        "retries": {"on_error": retries} if retries is not None else None,
    }
    from .context import caller_environment, caller_user

    with user_errors():
        from gqa.models.loader import load_spec

        spec = load_spec(file, overrides=overrides, command=command, warn=note)
        from .backend import backend

        be = backend()
        # the owner the daemon verified from the socket's peer credentials, when it ran this
        jobs = be.submitter().submit(spec, environment=caller_environment(), owner=caller_user())
        running = not be.local or be.daemon_pid() is not None
    first = jobs[0]
    ref = first.group if (len(jobs) > 1 or first.array_index is not None) else first.id
    if fmt == "json":
        data = {"id": ref, "state": first.state.value, "status": first.status.value, "jobs": [j.id for j in jobs]}
        if not wait:
            print_json(data)
    else:
        sys.stdout.write(ref + "\n")
        sys.stdout.flush()
        if len(jobs) > 1:
            note(f"{len(jobs)} jobs: {jobs[0].id} .. {jobs[-1].id}")
        if not running:
            note("note: the queue daemon is not running; jobs wait until `gqa local start`")
        note(f"  gqa status {ref}    gqa logs {jobs[0].id} -f    gqa cancel {ref}")
    if wait:
        from .waiting import wait_for

        with user_errors():
            code, final = wait_for([j.id for j in jobs], quiet=fmt == "json")
        if fmt == "json":
            print_json(dict(data, state=final[0]["state"], status=final[0]["status"], results=final))
        raise typer.Exit(code)


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            fail(f"--env needs NAME=VALUE, got {pair!r}")
        out[key] = value
    return out
