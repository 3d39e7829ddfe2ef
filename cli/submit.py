"""`gqa submit`: queue a job from a YAML file, a script with #GQA/#SBATCH
directives, or a command after `--`."""

import sys
from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import daemon_down, note, print_json, user_errors
from .stdin_script import read_script, reads_stdin

Opt = typer.Option
SLURM = "Slurm's options"


@app.command("submit", no_args_is_help=False)
def submit(
    file: Annotated[Optional[str], typer.Argument(help="A job file (.yaml) or a script with #GQA / #SBATCH lines; "
                                                  "- or none given: a script on stdin, as sbatch reads one.",
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
    no_code: Annotated[bool, Opt("--no-code", help="AWS: send no code; the image holds it.")] = False,
    code_max_size: Annotated[str, Opt("--code-max-size", help="AWS: the largest code bundle, compressed.")]
    = "100Mi",
    notify: Annotated[Optional[str], Opt("--notify", help="Tell me when it begins, ends, fails or is requeued: "
                                         "EVENTS[:TO], e.g. end,fail or begin,end:me@example.org (TO: an address "
                                         "or webhook URL; default: you).")] = None,
    wait: Annotated[bool, Opt("--wait", "-W", help="Wait until the job ends; exit 0 only if it succeeded.")] = False,
    tasks: Annotated[Optional[int], Opt("--tasks", "-n", help="Tasks srun starts (Slurm's --ntasks).",
                                        rich_help_panel=SLURM)] = None,
    after: Annotated[Optional[list[str]], Opt("--after", help="Start after job ID succeeds; ID:notok, ID:any, "
                                              "ID:start; repeatable.", rich_help_panel=SLURM)] = None,
    dependency: Annotated[Optional[str], Opt("--dependency", "-d", help="Slurm's dependency: afterok:12, "
                                             "afterany:12:13, singleton.", rich_help_panel=SLURM)] = None,
    hold: Annotated[bool, Opt("--hold", help="Queue it held until `gqa release`.", rich_help_panel=SLURM)] = False,
    begin: Annotated[Optional[str], Opt("--begin", help="Not before: now+1hour, 16:00, tomorrow, "
                                        "2026-12-24T08:00.", rich_help_panel=SLURM)] = None,
    nice: Annotated[Optional[int], Opt("--nice", help="Lower it within its tier by N (negative: raise).",
                                       rich_help_panel=SLURM)] = None,
    exclusive: Annotated[bool, Opt("--exclusive", help="Nothing else runs on the machine meanwhile.",
                                   rich_help_panel=SLURM)] = False,
    output: Output = "table",
):
    """Queue a job. Prints its id; `-o json` prints {"id", "state", ...}.

    Examples: gqa submit job.yaml | gqa submit train.sh | gqa submit --gpus 2 --time 4h -- python train.py
    """
    fmt = check_output(output)
    params = dict(file=file, gpus=gpus, gpu_type=gpu_type, time=time, mem=mem, cpus=cpus, priority=priority,
                  team=team, name=name, retries=retries, array=array, env=env, workdir=workdir, shell=shell,
                  no_code=no_code, tasks=tasks, after=after, dependency=dependency, hold=hold, begin=begin,
                  nice=nice, exclusive=exclusive, notify=notify)
    from .context import TRAILING_COMMAND, caller_environment, caller_user

    with user_errors():
        command = TRAILING_COMMAND.get()
        stdin = None
        if reads_stdin([file] if file is not None else [], command):
            from gqa.models.errors import SpecError
            from gqa.models.limits import MAX_SCRIPT_BYTES

            try:
                stdin = read_script(MAX_SCRIPT_BYTES)
            except OSError as exc:
                raise SpecError(f"nothing to run: cannot read a script on stdin: {exc}") from None
        spec = spec_from_options(params, command, warn=note, stdin=stdin, environment=caller_environment())
        from .backend import backend

        be = backend()
        from .code import for_backend

        spec = for_backend(spec, be)
        if not no_code:
            from gqa.models.units import parse_size

            from .code import with_code

            spec = with_code(spec, be, max_bytes=parse_size(code_max_size), say=note if fmt == "table" else None)
        # the owner the daemon verified from the socket's peer credentials, when it ran this
        submitted, note_of_pass = recorded(be.submitter(), spec, environment=caller_environment(),
                                             owner=caller_user())
        running = not daemon_down(be)
    out, err = submitted_text(submitted, fmt, running=running, wait=wait, note_of_pass=note_of_pass)
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.stderr.write(err)
    if wait:
        from .waiting import wait_for

        with user_errors():
            code, final = wait_for(submitted.ref, list(submitted.ids), quiet=fmt == "json")
        if fmt == "json":
            print_json(dict(submitted_data(submitted), state=final[0]["state"], status=final[0]["status"],
                            results=final))
        raise typer.Exit(code)


def spec_from_options(params: dict, command: list[str] | None, *, warn, cwd: str | None = None,
                      stdin: bytes | None = None, environment: dict[str, str] | None = None):
    """The spec `gqa submit` asks for: the file (or `stdin`, a script read
    from it), the flags over it, the command after `--`. `environment`: the
    submitter's, whose SBATCH_* variables a batch script reads as sbatch does
    (a job file and a command do not). Shared with the queue daemon, which
    serves `gqa submit` for the light client (daemon/submit_command.py).
    Raises SpecError."""
    import time

    from gqa.models.errors import SpecError
    from gqa.models.loader import YAML_SUFFIXES, load_spec
    from gqa.models.notices import notify_option
    from gqa.models.sbatch_values import begin_time

    now = time.time()
    if command is not None and not command:
        raise SpecError("empty command after --")
    if params.get("shell") and command:
        command = [" ".join(command)]
    file = params.get("file")
    script = stdin is not None if file in (None, "-") else not file.endswith(YAML_SUFFIXES)
    overrides = {
        "name": params.get("name"), "team": params.get("team"), "priority": params.get("priority"),
        "array": params.get("array"), "workdir": params.get("workdir"),
        "shell": True if params.get("shell") else None,
        "env": _env_pairs(params["env"]) if params.get("env") else None,
        "resources": {"gpus": params.get("gpus"), "gpu_type": params.get("gpu_type"), "cpus": params.get("cpus"),
                      "memory": params.get("mem"), "tasks": params.get("tasks"),
                      "exclusive": True if params.get("exclusive") else None},
        "limits": {"wall_time": _wall_time(params.get("time"), script)},
        "retries": {"on_error": params["retries"]} if params.get("retries") is not None else None,
        "after": _dependency(params.get("after"), params.get("dependency")),
        "hold": True if params.get("hold") else None,
        "begin": begin_time(params["begin"], now) if params.get("begin") else None,
        "nice": params.get("nice"),
        "notify": notify_option(params["notify"]) if params.get("notify") else None,
    }
    kwargs = {"cwd": cwd} if cwd is not None else {}
    said: list[str] = []

    def warned(text: str) -> None:
        said.append(text)
        warn(text)

    spec = load_spec(file, overrides=overrides, command=command, warn=warned, now=now, stdin=stdin,
                     environment=environment, **kwargs)
    if _array_tasks_untold(spec) and not any("ARRAY_TASKS" in text for text in said):   # a script's own note
        warn("note: notify: an array's (or a sweep's) tasks are told of only with array_tasks (--notify "
             "end,array_tasks); gqa sends no notice for the array as a whole, so these tasks send none")
    # --no-code: the job's image holds the code, whatever bundle the file names
    return spec.model_copy(update={"code": None}) if params.get("no_code") else spec


def _array_tasks_untold(spec) -> bool:
    """An array (a sweep: its tasks are an array's) whose notify asks for events without array_tasks:
    each task's notice is skipped (models/notices.selected)."""
    events = spec.notify.events if spec.notify is not None else []
    return spec.is_group and bool(events) and "array_tasks" not in events


def recorded(submitter, spec, *, environment: dict[str, str] | None, owner: str | None):
    """The submission as wire.Submitted, and why its team's budget will hold it: the submit
    service says so where it runs here (services/submit.Recorded), and a shared queue's daemon in
    its answer; AWS's API, which admits later, does not."""
    record = getattr(submitter, "record", None)
    if record is None:
        answer = as_submitted(submitter.submit(spec, environment=environment, owner=owner))
        return answer, answer.note
    done = record(spec, environment=environment, owner=owner)
    return as_submitted(done.jobs), done.note


def as_submitted(answer):
    """A backend's answer to a submission as wire.Submitted: the API answers
    one; the local store's submitter gives the records themselves."""
    from gqa.http.wire import Submitted

    return answer if isinstance(answer, Submitted) else Submitted.of(answer)


def submitted_data(submitted) -> dict:
    first = submitted.first
    return {"id": submitted.ref, "state": first.state.value, "status": first.status.value,
            "count": submitted.count, "jobs": list(submitted.ids)}


def submitted_text(submitted, fmt: str, *, running: bool, wait: bool = False,
                   note_of_pass: str | None = None) -> tuple[str, str]:
    """What `gqa submit` prints on stdout and stderr once the jobs are recorded. `note_of_pass`:
    what the scheduling pass will do to them, said now (services/submit.Recorded.note)."""
    import json

    from gqa.models.job import JobState

    if fmt == "json":
        return ("" if wait else json.dumps(submitted_data(submitted), indent=2, default=str) + "\n"), ""
    ref = submitted.ref
    err = []
    if submitted.count > 1:
        err.append(f"{submitted.count} jobs: {submitted.first_id} .. {submitted.last_id}")
    if not running:
        err.append("note: the queue daemon is not running; jobs wait until `gqa local start`")
    first = submitted.first
    if first.state in (JobState.PENDING_APPROVAL, JobState.HELD) and first.reason:
        # it will not start by itself: said now, not at the first `gqa status`
        who = f"job {first.id} is" if submitted.count == 1 else f"its {submitted.count:,} jobs are"
        err.append(f"note: {who} {first.status.value}: {first.reason}")
    elif note_of_pass:
        # recorded QUEUED, held or cancelled at the next pass: said now, in the pass's words
        who = f"job {first.id}" if submitted.count == 1 else f"its {submitted.count:,} jobs"
        err.append(f"note: {who} {note_of_pass}")
    err.append(f"  gqa status {ref}    gqa logs {submitted.first_id} -f    gqa cancel {ref}")
    return ref + "\n", "".join(line + "\n" for line in err)


def _wall_time(time: str | None, script: bool) -> str | None:
    """--time as the spec takes it: on a batch script, a Slurm form rounded up to whole
    minutes, as sbatch keeps it (`--time 0:10` is a minute, as `#SBATCH --time=0:10`);
    gqa's own forms (30s) and a command's --time keep their seconds."""
    from gqa.models.errors import SpecError
    from gqa.models.sbatch_values import slurm_time, time_limit

    if not (time and script and slurm_time(time)):
        return time
    try:
        return f"{time_limit(time)}s"
    except SpecError:            # zero, or past the longest: the spec's check says so
        return time


def _dependency(after: list[str] | None, dependency: str | None) -> str | None:
    """--after ID[:how] (each one term) and --dependency TEXT, all of which must hold."""
    from gqa.models.dependency import after_flag

    terms = [after_flag(a) for a in after or ()] + ([dependency] if dependency else [])
    return ",".join(terms) or None


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            from gqa.models.errors import SpecError

            raise SpecError(f"--env needs NAME=VALUE, got {pair!r}")
        out[key] = value
    return out
