"""The job spec: what a user asks for. Loaded from YAML, CLI flags or script
directives (see loader.py); validated here, once, for every backend."""

import getpass
import math
import os
import re
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, Strict, ValidationInfo,
                      field_validator, model_validator)
from pydantic_core import PydanticCustomError

from .array_syntax import parse_array
from .code import check_digest
from .errors import SpecError
from .limits import (MAX_DURATION, MAX_EXEC_BYTES, MAX_EXEC_STRING_BYTES, MAX_SCRIPT_BYTES, MAX_TASKS, count_text,
                     size_text)
from .dependency import parse_dependency
from .notice_targets import target_problem
from .priority import Priority
from .sbatch_values import export as exported_names
from .signals import warning_signal
from .units import parse_duration, parse_size, shown

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by the queue for every attempt; a spec may not override them.
RESERVED_ENV = ("GQA_JOB_ID", "GQA_ATTEMPT", "GQA_CHECKPOINT_DIR", "GQA_CHECKPOINT_URI",
                "GQA_RESUME_FROM", "GQA_ARRAY_INDEX", "GQA_CODE_URI", "CUDA_VISIBLE_DEVICES")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# An owner may also be a cloud identity: an IAM user (names may hold + = @), an
# assumed role's "Role/session", an Identity Center user's e-mail address.
OWNER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+=/-]{0,128}$")
MAX_NAME = 200
TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$")

# The pydantic error type of a problem whose message names its own field
# ("command[2] contains a NUL byte"): the loader shows it without a prefix.
NAMED_PROBLEM = "gqa_named_problem"


def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError(NAMED_PROBLEM, "{message}", {"message": message})


def _no_nul(text: str, what: str) -> None:
    # exec and chdir take C strings: a NUL makes a job that can never start
    if "\x00" in text:
        raise _problem(f"{what} contains a NUL byte")


# Validating a spec read back from a store: the rules a submission meets today may be stricter than
# those the spec met when it was submitted, and a job already queued or run must still read
STORED = {"stored": True}


def stored(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("stored"))


def _duration(value: Any, info: ValidationInfo) -> Any:
    try:
        return None if value is None else parse_duration(value, most=None if stored(info) else MAX_DURATION)
    except SpecError as exc:  # pydantic reports ValueErrors with the field's location
        raise ValueError(str(exc)) from None


def _size(value: Any) -> Any:
    try:
        return None if value is None else parse_size(value)
    except SpecError as exc:
        raise ValueError(str(exc)) from None


# Serialized with their unit: a bare number reads as minutes (durations) or MiB
# (sizes), so a spec dumped as plain seconds or bytes would not load back the same.
Duration = Annotated[int, BeforeValidator(_duration), PlainSerializer(lambda v: f"{v}s", return_type=str), Field(gt=0)]
Size = Annotated[int, BeforeValidator(_size), PlainSerializer(lambda v: f"{v}B", return_type=str), Field(gt=0)]


class _Strict(BaseModel):
    # YAML's .inf and .nan are no numbers a job means (.inf passes gt=0; begin: .inf would never start)
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)


# What a job file says is what the job gets: only true and false are booleans (`yes` and "false" are
# words, refused), and a count is a number (`gpus: true` and "2" refused), never a coerced word.
# Every other source builds these fields typed: flags, #SBATCH lines, JSON, a stored spec
StrictBool = Annotated[bool, Strict()]
StrictCount = Annotated[int, Strict()]


class Resources(_Strict):
    gpus: StrictCount = Field(1, ge=0, le=4096, description="GPUs, all granted at once (gang); 0 for a CPU-only job")
    gpu_type: str | None = Field(None, description="e.g. a10g, or several: [a10g, l4] / 'a10g,l4'; any when unset")

    @field_validator("gpu_type", mode="before")
    @classmethod
    def _types(cls, value: Any) -> Any:
        """One type or a list of acceptable ones, kept as 'a10g,l4'."""
        if value is None:
            return None
        names = value if isinstance(value, list) else str(value).split(",")
        names = [str(n).strip() for n in names if str(n).strip()]
        if not names:
            raise ValueError("gpu_type is empty")
        for name in names:
            if not TYPE_RE.match(name):
                raise ValueError(f"invalid GPU type {name!r}: use letters, digits, '.', '_' or '-'")
        return ",".join(dict.fromkeys(names))
    cpus: StrictCount | None = Field(None, ge=1, le=4096, description="CPUs for the whole job (all its tasks)")
    memory: Size | None = None
    tasks: StrictCount = Field(1, ge=1, le=1024, description="copies `srun` starts by default (Slurm's --ntasks)")
    gpus_per_task: StrictCount | None = Field(None, ge=1, le=4096,
                                              description="each srun task sees this many of the GPUs")
    exclusive: StrictBool = Field(False, description="nothing else runs on the machine while it runs")
    gpus_option: Literal["--gpus", "--gpus-per-node"] | None = Field(
        None, description="the sbatch option that asked for the GPUs: it names the SLURM_GPUS* variable set")
    memory_option: Literal["--mem-per-cpu", "--mem-per-gpu"] | None = Field(
        None, description="the sbatch option that asked for the memory per CPU or per GPU: it names the "
                          "SLURM_MEM_PER_* variable set (SLURM_MEM_PER_NODE without one)")

    @model_validator(mode="after")
    def _tasks_fit(self) -> "Resources":
        if self.gpus_per_task is not None and self.gpus_per_task * self.tasks > self.gpus:
            raise ValueError(f"{self.tasks} tasks of {self.gpus_per_task} GPUs need {self.gpus_per_task * self.tasks} "
                             f"GPUs; the job asks for {self.gpus}")
        return self


class Limits(_Strict):
    wall_time: Duration | None = Field(None, description="killed (SIGTERM, grace, SIGKILL) after this")
    max_gpu_hours: float | None = Field(None, gt=0)
    on_timeout: Literal["stop", "requeue"] = "stop"
    time_min: Duration | None = Field(None, description="Slurm's --time-min: the least wall time it accepts")
    signal: str | None = Field(None, description="Slurm's --signal: [B:]SIG[@seconds] before the wall time")

    @field_validator("signal")
    @classmethod
    def _signal(cls, value: str | None) -> str | None:
        return None if value is None else warning_signal(value).text()

    @model_validator(mode="after")
    def _min_below_limit(self) -> "Limits":
        if self.time_min is not None and self.wall_time is not None and self.time_min > self.wall_time:
            raise ValueError(f"time_min ({self.time_min}s) is longer than wall_time ({self.wall_time}s)")
        return self


class Retries(_Strict):
    on_error: StrictCount = Field(0, ge=0, le=100, description="application errors retried this many times")
    # Batch could not run it (no capacity, the platform failed before the container ran): such
    # failures cost nothing and say nothing about the job, but a job that can never be placed
    # must not wait forever. Six attempts with the default backoff span about half an hour.
    on_capacity: StrictCount = Field(5, ge=0, le=1000,
                             description="capacity failures in a row retried this many times, then FAILED "
                                         "(a spot job first falls back to on demand)")
    backoff: Duration = 10
    max_backoff: Duration = 600

    @model_validator(mode="after")
    def _ordered(self) -> "Retries":
        if self.max_backoff < self.backoff:
            raise ValueError("max_backoff must be at least backoff")
        return self


class Checkpoint(_Strict):
    every: Duration | None = Field(None, description="hint: how often the job checkpoints")
    grace: Duration | None = Field(None, description="seconds between SIGTERM and SIGKILL")


class Sweep(_Strict):
    grid: dict[str, list[str | int | float | bool]]
    pass_as: Literal["args", "env"] = "args"

    @field_validator("grid", mode="before")
    @classmethod
    def _as_written(cls, grid: Any) -> Any:
        # a job file's numbers as written (`1e-4`, not 0.0001): they reach the command as text
        if isinstance(grid, dict):
            return {k: [getattr(v, "yaml_text", v) for v in vs] if isinstance(vs, list) else vs
                    for k, vs in grid.items()}
        return grid

    @field_validator("grid")
    @classmethod
    def _non_empty(cls, grid: dict[str, list]) -> dict[str, list]:
        if not grid:
            raise ValueError("sweep grid is empty")
        for key, values in grid.items():
            if not values:
                raise ValueError(f"sweep parameter {key!r} has no values")
            _no_nul(key, f"sweep parameter {key!r}")
            for i, value in enumerate(values):
                if isinstance(value, str):
                    _no_nul(value, f"sweep.grid[{key!r}][{i}]")
        tasks = sweep_size(grid)
        if tasks > MAX_TASKS:
            raise _problem(f"sweep has {count_text(tasks)} combinations; at most {MAX_TASKS}")
        return grid

    @model_validator(mode="after")
    def _env_keys(self) -> "Sweep":
        if self.pass_as == "env":
            for key in self.grid:
                if not ENV_NAME.match(key) or key in RESERVED_ENV:
                    raise ValueError(f"sweep parameter {key!r} cannot be an environment variable name")
        return self


MailEvent = Literal["begin", "end", "fail", "requeue", "time_limit", "all", "array_tasks"]


class Notify(_Strict):
    """Slurm's --mail-type/--mail-user: which events of the job are sent, and to whom
    (models/notices.py: what each event means)."""

    events: list[MailEvent] = Field(default_factory=lambda: list[MailEvent](["end", "fail"]))
    to: str | None = Field(None, description="an e-mail address or a webhook URL; the owner when unset")

    @field_validator("to")
    @classmethod
    def _to(cls, to: str | None, info: ValidationInfo) -> str | None:
        # an address, a user, or an http(s) webhook a sender can use: checked at submission, where a mistake
        # is one line, and not on a spec read back (a job queued under looser rules still reads)
        if to is not None and not stored(info):
            if not to.isprintable() or any(c.isspace() for c in to):
                problem: str | None = "no spaces or control characters"
            else:
                problem = target_problem(to)
            if problem:
                raise ValueError(f"{shown(to)} is not an e-mail address, a user name or an http(s):// webhook URL: "
                                 f"{problem}")
        return to


class Script(_Strict):
    """A batch script as it was when submitted: every attempt runs this copy
    in place of `path`, as Slurm runs the copy sbatch made, so an edit or a
    removal after submission changes no queued job."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False, allow_inf_nan=False)

    path: str = Field(description="the script's absolute path, as the command names it")
    text: str = Field(repr=False)

    @field_validator("path")
    @classmethod
    def _path(cls, path: str) -> str:
        _no_nul(path, "script.path")
        if not os.path.isabs(path):
            raise ValueError(f"must be an absolute path, got {path!r}")
        return path

    @field_validator("text")
    @classmethod
    def _text(cls, text: str, info: ValidationInfo) -> str:
        _no_nul(text, "script")   # sbatch refuses one too: no shell reads past it
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_SCRIPT_BYTES and not stored(info):
            raise _problem(f"the script is {size:,} bytes; at most {size_text(MAX_SCRIPT_BYTES)}")
        return text


class JobSpec(_Strict):
    name: str = "job"
    team: str = "default"
    owner: str = Field(default_factory=lambda: _os_user())
    priority: Priority = Priority.NORMAL
    command: list[str] | str
    shell: StrictBool = False
    workdir: str | None = None
    submit_dir: str | None = Field(None, description="where it was submitted from (SLURM_SUBMIT_DIR); workdir "
                                                     "when unset")
    env: dict[str, str] = Field(default_factory=dict)
    export: str | None = Field(None, description="Slurm's --export: ALL (unset), NONE, or [ALL,]VAR,... of the "
                                                 "submitter's environment")
    resources: Resources = Field(default_factory=Resources)
    limits: Limits = Field(default_factory=Limits)
    retries: Retries = Field(default_factory=Retries)
    spot: StrictBool = False
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    tags: dict[str, str] = Field(default_factory=dict)
    image: str | None = None
    code: str | None = Field(None, description="sha256:<hex>, the bundle of the submitter's directory (AWS)")
    array: str | None = Field(None, description="Slurm-style index list: 0-499, 1,3,5, 0-9:2, 0-99%10")
    sweep: Sweep | None = None
    after: str | None = Field(None, description="Slurm's --dependency: afterok:12, afterany:12:13, singleton")
    hold: StrictBool = Field(False, description="queued held: it starts only after `gqa release`")
    begin: float | None = Field(None, gt=0, description="not started before this time (epoch seconds)")
    output: str | None = Field(None, description="Slurm's --output pattern (%j %x %A %a %u %N %%), besides gqa's log")
    error: str | None = Field(None, description="Slurm's --error pattern; stderr goes with output when unset")
    input: str | None = Field(None, description="Slurm's --input: a file as the job's stdin")
    open_mode: Literal["truncate", "append"] | None = Field(
        None, description="Slurm's --open-mode: append keeps what output and error files hold (default truncate)")
    requeue: StrictBool = Field(True, description="requeued after a preemption or reclaim (false: it fails instead)")
    nice: StrictCount = Field(0, ge=-10000, le=10000, description="lowers (or, negative, raises) it within its tier")
    notify: Notify | None = None
    script: Script | None = Field(None, description="the batch script as submitted, run in place of its file")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        # Slurm takes almost any text as a job name (bert_lr=3e-4); what cannot
        # be shown on one line or put in a file name is refused.
        _no_nul(value, "name")
        if not value or len(value) > MAX_NAME or any(ch in value for ch in "/\\") \
                or any(not ch.isprintable() for ch in value):
            raise ValueError(f"{shown(value)} is not a valid name: printable characters without '/' "
                             f"(max {MAX_NAME}; this is {len(value):,})")
        return value

    @field_validator("team")
    @classmethod
    def _identifier(cls, value: str, info: ValidationInfo) -> str:
        _no_nul(value, info.field_name or "team")
        if not NAME_RE.match(value):
            raise ValueError(f"{shown(value)} is not a valid name: use letters, digits, '.', '_' or '-' (max 63)")
        return value

    @field_validator("after")
    @classmethod
    def _after(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return parse_dependency(value).text()
        except SpecError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("array", mode="before")
    @classmethod
    def _one_index(cls, value: Any) -> Any:
        """`array: 5` is the one task 5, as sbatch reads --array=5 (a boolean is no index)."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("export")
    @classmethod
    def _export(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            text, given = exported_names(value)
        except SpecError as exc:
            raise ValueError(str(exc)) from None
        if given:
            raise ValueError(f"{value!r}: export names variables; their values go in env")
        return text

    @field_validator("output", "error", "input")
    @classmethod
    def _stream(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            _no_nul(value, info.field_name or "output")
            if not value.strip():
                raise ValueError("is empty")
        return value

    @field_validator("owner")
    @classmethod
    def _owner(cls, value: str) -> str:
        if not OWNER_RE.match(value):
            raise ValueError(f"{value!r} is not a valid owner: use letters, digits and . _ @ + = / - (max 129)")
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _stringify_env(cls, env: Any) -> Any:
        if isinstance(env, dict):
            return {k: _scalar_text(v) for k, v in env.items()}
        return env

    @field_validator("command")
    @classmethod
    def _command_text(cls, command: list[str] | str) -> list[str] | str:
        if isinstance(command, str):
            _no_nul(command, "command")
        else:
            for i, arg in enumerate(command):
                _no_nul(arg, f"command[{i}]")
        return command

    @field_validator("workdir", "submit_dir")
    @classmethod
    def _workdir(cls, workdir: str | None) -> str | None:
        if workdir is not None:
            _no_nul(workdir, "workdir")
            if not os.path.isabs(workdir):  # the daemon's own directory means nothing to the submitter
                raise ValueError(f"must be an absolute path, got {workdir!r}")
        return workdir

    @field_validator("image")
    @classmethod
    def _image(cls, image: str | None) -> str | None:
        if image is not None:
            _no_nul(image, "image")
        return image

    @field_validator("code")
    @classmethod
    def _code(cls, code: str | None) -> str | None:
        return None if code is None else check_digest(code)

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        for key, value in tags.items():
            _no_nul(key, f"tag name {key!r}")
            _no_nul(value, f"tags[{key!r}]")
        return tags

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key, value in env.items():
            _no_nul(key, f"environment variable name {key!r}")
            _no_nul(value, f"env[{key!r}]")
            if not key:
                raise ValueError("an environment variable name is empty")
            if "=" in key:
                raise ValueError(f"environment variable name {key!r} contains '='")
            if not ENV_NAME.match(key):
                raise ValueError(f"invalid environment variable name {key!r}: "
                                 "use letters, digits and _, not starting with a digit")
            if key in RESERVED_ENV:
                raise ValueError(f"environment variable {key} is set by gqa for every attempt; choose another name")
        return env

    @property
    def is_group(self) -> bool:
        """Whether it makes several jobs: an array's tasks or a sweep's points."""
        return self.array is not None or self.sweep is not None

    @model_validator(mode="after")
    def _command_shape(self) -> "JobSpec":
        command = self.command
        if isinstance(command, str):
            if not self.shell:
                raise ValueError("command is a string; give an argv list (e.g. [python, train.py]) or set shell: true")
            if not command.strip():
                raise ValueError("command is empty")
        else:
            if not command or not str(command[0]).strip():
                raise ValueError("command is empty")
            if self.shell and len(command) != 1:
                raise ValueError("with shell: true, command must be one string")
        if self.script is not None and (self.shell or isinstance(command, str) or self.script.path not in command):
            raise ValueError("script: the command does not run it (its path is no argument of the command)")
        if self.array is not None and self.sweep is not None:
            raise ValueError("a job has either array or sweep, not both")
        if self.array is not None:
            try:
                parse_array(self.array)
            except SpecError as exc:  # as a ValueError it is reported like every other field
                raise ValueError(f"array: {exc}") from None
        return self

    @model_validator(mode="after")
    def _fits_exec(self) -> "JobSpec":
        """What exec would refuse (E2BIG), refused here instead of at every start."""
        strings = ([("command", self.command)] if isinstance(self.command, str)
                   else [(f"command[{i}]", arg) for i, arg in enumerate(self.command)])
        strings += [(f"env[{key!r}]", f"{key}={value}") for key, value in self.env.items()]
        total = len("/bin/sh -c ") + 1 if self.shell or isinstance(self.command, str) else 0
        for what, text in strings:
            size = len(text.encode("utf-8", "surrogatepass")) + 1
            if size > MAX_EXEC_STRING_BYTES:
                raise _problem(f"{what} is {size} bytes; "
                               f"exec takes at most {size_text(MAX_EXEC_STRING_BYTES)} in one string")
            total += size
        total += _longest_sweep_values(self.sweep)
        if total > MAX_EXEC_BYTES:
            raise _problem(f"command and env take {total} bytes; at most {size_text(MAX_EXEC_BYTES)} "
                           "(exec takes 2 MiB, shared with the inherited environment)")
        return self

    def argv(self, *, script: str | None = None) -> list[str]:
        """What to exec: the argv list, or `/bin/sh -c STRING` for shell: true.
        `script`: where the copy of the batch script is, run in its file's place."""
        if isinstance(self.command, str):
            return ["/bin/sh", "-c", self.command]
        if self.shell:
            return ["/bin/sh", "-c", self.command[0]]
        argv = list(self.command)
        if script is not None and self.script is not None:
            argv[argv.index(self.script.path)] = script   # the first: the later ones are the script's arguments
        return argv


def sweep_size(grid: dict[str, list]) -> int:
    """How many jobs a grid becomes: counted, never listed."""
    return math.prod(len(values) for values in grid.values())


def _longest_sweep_values(sweep: "Sweep | None") -> int:
    """Bytes the longest value of each sweep parameter adds to a task's exec."""
    if sweep is None:
        return 0
    return sum(max(len(f"--{key}={_scalar_text(v)}".encode("utf-8", "surrogatepass")) + 1 for v in values)
               for key, values in sweep.grid.items())


def _scalar_text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return getattr(value, "yaml_text", None) or str(value)   # a job file's `1.10` stays 1.10
    return value


def _os_user() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = os.environ.get("USER", "unknown")
    return user if NAME_RE.match(user) else "unknown"


SPEC_FIELDS: dict[str, type[BaseModel]] = {
    "": JobSpec, "resources": Resources, "limits": Limits, "retries": Retries,
    "checkpoint": Checkpoint, "sweep": Sweep, "notify": Notify, "script": Script,
}
