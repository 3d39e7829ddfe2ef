"""sbatch's options as one table, and the reader of `#SBATCH` / `#GQA` lines
that uses it the way sbatch's getopt does: `--opt=value`, `--opt value`,
`-o value`, `-ovalue`, flags without a value, grouped short flags (`-Hv`),
and options whose value is optional (`--nice`, `--exclusive`), which take it
only after '='.

Every row is one of three verdicts:
  honoured  its value goes into the spec (the row's `apply`);
  refused   it would change what runs and gqa cannot do it: a SpecError;
  noted     it changes nothing on one machine: accepted, with a note through `warn`.
An option sbatch does not know is refused, as sbatch refuses it. `#GQA`
lines are strict: the honoured rows and gqa's own options (GQA_ONLY), nothing
else. The README's "Slurm scripts" table lists this table row by row."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable, Final, Literal

from . import sbatch_values as values
from .array_syntax import parse_array
from .dependency import parse_dependency
from .errors import SpecError
from .priority import Priority
from .sbatch_request import Request
from .signals import warning_signal

Verdict = Literal["honoured", "refused", "noted"]
HONOURED: Final = "honoured"
REFUSED: Final = "refused"
NOTED: Final = "noted"
VALUE, FLAG, OPTIONAL = "value", "flag", "optional"


@dataclass(frozen=True)
class Option:
    long: str                      # --output
    short: str | None              # -o
    takes: str                     # VALUE, FLAG or OPTIONAL
    verdict: Verdict
    effect: str                    # what gqa does: how (honoured) or why (refused, noted)
    apply: Callable[[str | None, Request], None] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.long,) + ((self.short,) if self.short else ())


# -- the converters of the honoured rows ---------------------------------------------------------

def _field(*path: str, convert: Callable[[str], Any] = str) -> Callable[[str | None, Request], None]:
    def apply(value: str | None, request: Request) -> None:
        fragment: Any = convert(value or "")
        for key in reversed(path):
            fragment = {key: fragment}
        request.put(fragment)
    return apply


def _keep(name: str, convert: Callable[[str], Any]) -> Callable[[str | None, Request], None]:
    return lambda value, request: request.keep(name, convert(value or ""))


def _gpus(option: str, convert: Callable[[str], Any]) -> Callable[[str | None, Request], None]:
    """A GPU request, and the option that made it: Slurm exports SLURM_GPUS for
    --gpus and SLURM_GPUS_PER_NODE for --gpus-per-node, nothing for --gres."""
    def apply(value: str | None, request: Request) -> None:
        request.keep("gpus", convert(value or ""))
        request.keep("gpus_option", option if option != "--gres" else None)
    return apply


def _constant(*path: str, value: Any) -> Callable[[str | None, Request], None]:
    return _field(*path, convert=lambda _: value)


def _memory(name: str, option: str) -> Callable[[str | None, Request], None]:
    def apply(value: str | None, request: Request) -> None:
        size = values.memory_bytes(value or "", option)
        if size is None:
            if name != "mem":
                raise SpecError(f"{option} 0: give a size, e.g. 4G")
            request.note(f"{_said(request, option, value)} asks for all of a node's memory: the job gets no "
                         "memory limit")
        request.keep(name, size)
    return apply


def _said(request: Request, option: str, value: str | None) -> str:
    """What asked for `option`, as a note names it: the directive, or sbatch's input environment variable."""
    return f"{request.variable}={value}" if request.variable else f"#SBATCH {option}={value}"


# checked as they are read, so that a bad value names its line
def _time_limit(value: str) -> str:
    return f"{values.time_limit(value)}s"


def _array(value: str) -> str:
    parse_array(value)
    return value


def _time(value: str | None, request: Request) -> None:
    # Slurm: "A time limit of zero requests that no time limit be imposed", in any of its forms
    # (0, 00:00:00, 0-0); -1 is its INFINITE
    text = (value or "").strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "-1") or values.zero_time(text):
        request.note(f"{_said(request, '--time', value)}: the job gets no wall-time limit beyond the queue's own")
        return
    request.put({"limits": {"wall_time": _time_limit(text)}})


def _exclusive(value: str | None, request: Request) -> None:
    if value is None:
        request.put({"resources": {"exclusive": True}})
    elif value.strip().lower() in ("user", "mcs", "topo"):
        request.note(f"{_said(request, '--exclusive', value)}: nodes shared only with like jobs have no meaning on one "
                     "machine; the job shares it as any job does")
    else:
        raise SpecError(f"--exclusive={value}: use --exclusive, or =user, =mcs or =topo")


def _nice(value: str | None, request: Request) -> None:
    text = "100" if value is None else value.strip()        # Slurm's adjustment when no number is given
    try:
        request.put({"nice": int(text)})
    except ValueError:
        raise SpecError(f"--nice needs a whole number, got {value!r}") from None


def _export(value: str | None, request: Request) -> None:
    export, given = values.export(value or "")
    request.put({"export": export, "env": given} if given else {"export": export})


def _mail_type(value: str | None, request: Request) -> None:
    events, noted = values.mail_types(value or "")
    if noted:
        request.note(f"#SBATCH --mail-type: gqa sends no {', '.join(noted)} notice")
    request.keep("mail_type", events)


def _begin(value: str | None, request: Request) -> None:
    if request.now is None:
        raise SpecError("--begin is read against the time of submission; give it to `gqa submit --begin`")
    request.put({"begin": values.begin_time(value or "", request.now)})


def _nodes(value: str | None, request: Request) -> None:
    values.nodes(value or "")


def _qos(value: str) -> str:
    return _QOS.get(value.strip().lower(), value)


_QOS = {**{p.value: p.value for p in Priority}, "urgent": Priority.HIGH.value, "debug": Priority.HIGH.value}

ONE_MACHINE = "one machine: gqa places a job on a machine with the GPUs it asks for"


def _honoured(long: str, short: str | None, takes: str, effect: str,
              apply: Callable[[str | None, Request], None]) -> Option:
    return Option(long, short, takes, HONOURED, effect, apply)


def _refused(long: str, short: str | None, takes: str, why: str) -> Option:
    return Option(long, short, takes, REFUSED, why)


def _noted(long: str, short: str | None, takes: str, why: str) -> Option:
    return Option(long, short, takes, NOTED, why)


OPTIONS: tuple[Option, ...] = (
    # what runs, and where its streams go
    _honoured("--output", "-o", VALUE, "`output`: stdout to this file pattern (%j %x %A %a ...), besides gqa's log",
              _field("output")),
    _honoured("--error", "-e", VALUE, "`error`: stderr to this file pattern (with stdout when unset)",
              _field("error")),
    _honoured("--open-mode", None, VALUE, "`open_mode`: append, or truncate (the default) --output and --error "
              "files when a job starts; a requeue or retry appends", _field("open_mode", convert=values.open_mode)),
    _honoured("--input", "-i", VALUE, "`input`: the job's stdin from this file pattern", _field("input")),
    _honoured("--chdir", "-D", VALUE, "`workdir`, relative to the directory it was submitted from",
              _field("workdir")),
    _honoured("--job-name", "-J", VALUE, "`name` (default: the script's file name, as in Slurm)", _field("name")),
    _honoured("--export", None, VALUE, "`export`: ALL (the default), NONE (the queue's own environment), or "
              "[ALL,]VAR[=value],... (values into `env`)", _export),
    _honoured("--container-image", None, VALUE, "`image`: the container the job runs in (AWS; the local queue "
              "refuses it)", _field("image")),
    # resources
    _honoured("--gpus", "-G", VALUE, "`resources.gpus` [and `gpu_type`] from [type:]N",
              _gpus("--gpus", lambda v: values.typed_count(v, "--gpus"))),
    _honoured("--gpus-per-node", None, VALUE, "`resources.gpus` from [type:]N (one node)",
              _gpus("--gpus-per-node", lambda v: values.typed_count(v, "--gpus-per-node"))),
    _honoured("--gpus-per-task", None, VALUE, "`resources.gpus_per_task`; GPUs = this x tasks unless --gpus is given",
              _keep("gpus_per_task", lambda v: values.typed_count(v, "--gpus-per-task"))),
    _honoured("--gres", None, VALUE, "`resources.gpus` and `gpu_type` from gpu[:type]:N, MIG profiles as types "
              "(gpu:1g.10gb:1), several joined with ','; other gres are refused",
              _gpus("--gres", values.gres)),
    _honoured("--mem", None, VALUE, "`resources.memory` (whole K/M/G/T binary, a B may follow: 2GB; "
              "a bare number MiB; 0: no limit, noted)",
              _memory("mem", "--mem")),
    _honoured("--mem-per-cpu", None, VALUE, "`resources.memory` = this x CPUs (not with --mem or --mem-per-gpu)",
              _memory("mem_per_cpu", "--mem-per-cpu")),
    _honoured("--mem-per-gpu", None, VALUE, "`resources.memory` = this x GPUs (not with --mem or --mem-per-cpu)",
              _memory("mem_per_gpu", "--mem-per-gpu")),
    _honoured("--cpus-per-task", "-c", VALUE, "`resources.cpus` = this x tasks",
              _keep("cpus_per_task", lambda v: values.count(v, "--cpus-per-task"))),
    _honoured("--cpus-per-gpu", None, VALUE, "`resources.cpus` = this x GPUs (not with --cpus-per-task)",
              _keep("cpus_per_gpu", lambda v: values.count(v, "--cpus-per-gpu"))),
    _honoured("--ntasks", "-n", VALUE, "`resources.tasks`: the copies srun starts",
              _keep("ntasks", lambda v: values.count(v, "--ntasks"))),
    _honoured("--ntasks-per-node", None, VALUE, "`resources.tasks` (one node), unless --ntasks is given",
              _keep("ntasks_per_node", lambda v: values.count(v, "--ntasks-per-node"))),
    _honoured("--ntasks-per-gpu", None, VALUE, "`resources.tasks` = this x GPUs, unless --ntasks is given",
              _keep("ntasks_per_gpu", lambda v: values.count(v, "--ntasks-per-gpu"))),
    _honoured("--nodes", "-N", VALUE, "1 (or a range from 1) is what gqa gives; more is refused: a job runs on "
              "one machine", _nodes),
    _honoured("--exclusive", None, OPTIONAL, "`resources.exclusive`: nothing else runs on the machine "
              "(=user, =mcs, =topo are noted)", _exclusive),
    # time and order
    _honoured("--time", "-t", VALUE, "`limits.wall_time` (Slurm's forms, rounded up to whole minutes as Slurm "
              "keeps them: 0:10 is 1:00; gqa's 30s keeps its seconds; UNLIMITED or zero: no limit, noted)", _time),
    _honoured("--time-min", None, VALUE, "`limits.time_min` (whole minutes, as --time)",
              _field("limits", "time_min", convert=_time_limit)),
    _honoured("--signal", None, VALUE, "`limits.signal`: [B:]SIG[@seconds] before the wall time",
              _field("limits", "signal", convert=lambda v: warning_signal(v).text())),
    _honoured("--dependency", "-d", VALUE,
              "`after` (afterok, afternotok, afterany, after, after:ID+min, aftercorr, singleton)",
              _field("after", convert=lambda v: parse_dependency(v).text())),
    _honoured("--hold", "-H", FLAG, "`hold`: queued held until `gqa release`", _constant("hold", value=True)),
    _honoured("--begin", "-b", VALUE, "`begin` (now+N[units], HH:MM[:SS], midnight, noon, today, tomorrow, "
              "YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY]; local time)", _begin),
    _honoured("--array", "-a", VALUE, "`array` (with %N: at most N at once)", _field("array", convert=_array)),
    _honoured("--requeue", None, FLAG, "`requeue`: a preempted or reclaimed job queues again (the default)",
              _constant("requeue", value=True)),
    _honoured("--no-requeue", None, FLAG, "`requeue: false`: a preemption or reclaim fails the job",
              _constant("requeue", value=False)),
    _honoured("--nice", None, OPTIONAL, "`nice` (100 without a number): lower within its tier",
              _nice),
    _honoured("--qos", "-q", VALUE, "`priority`: high, normal or low (urgent and debug are high)",
              _field("priority", convert=_qos)),
    _honoured("--account", "-A", VALUE, "`team`: account names are gqa teams", _field("team")),
    _honoured("--mail-type", None, VALUE, "`notify.events`: BEGIN END FAIL REQUEUE ALL TIME_LIMIT* ARRAY_TASKS, "
              "NONE, sent by e-mail, webhook or SNS (see Notifications); INVALID_DEPEND, STAGE_OUT are "
              "noted", _mail_type),
    _honoured("--mail-user", None, VALUE, "`notify.to` (with --mail-type; alone it sends nothing, as in Slurm)",
              _keep("mail_user", str)),
    _honoured("--comment", None, VALUE, "the tag `comment`", _field("tags", "comment")),
    # accepted without effect on one machine
    _noted("--priority", None, VALUE, "a Slurm priority is an administrator's number; gqa orders by tier "
           "(--qos) and fair share"),
    _noted("--partition", "-p", VALUE, f"{ONE_MACHINE} (--gres TYPE chooses a GPU type)"),
    _noted("--constraint", "-C", VALUE, "gqa knows no node features; ask for a GPU type with --gres=gpu:TYPE:N"),
    _noted("--prefer", None, VALUE, "gqa knows no node features"),
    _noted("--cluster-constraint", None, VALUE, "one cluster"),
    _noted("--reservation", None, VALUE, "gqa has no reservations: the job waits its turn in the queue"),
    _noted("--nodelist", "-w", VALUE, ONE_MACHINE),
    _noted("--nodefile", "-F", VALUE, ONE_MACHINE),
    _noted("--exclude", "-x", VALUE, ONE_MACHINE),
    _noted("--mincpus", None, VALUE, "CPUs come from --cpus-per-task"),
    _noted("--tmp", None, VALUE, "gqa reserves no scratch disk"),
    _noted("--licenses", "-L", VALUE, "gqa counts no licenses"),
    _noted("--wckey", None, VALUE, "gqa accounts by team (--account)"),
    _noted("--profile", None, VALUE, "gqa keeps its own usage figures"),
    _noted("--acctg-freq", None, VALUE, "gqa keeps its own usage figures"),
    _noted("--hint", None, VALUE, "a placement hint; the job gets the CPUs it asks for"),
    _noted("--threads-per-core", None, VALUE, "a placement hint; the job gets the CPUs it asks for"),
    _noted("--cores-per-socket", None, VALUE, "a placement hint; the job gets the CPUs it asks for"),
    _noted("--sockets-per-node", None, VALUE, "a placement hint; the job gets the CPUs it asks for"),
    _noted("--extra-node-info", "-B", VALUE, "a placement hint; the job gets the CPUs it asks for"),
    _noted("--ntasks-per-core", None, VALUE, "a placement hint; tasks come from --ntasks"),
    _noted("--ntasks-per-socket", None, VALUE, "a placement hint; tasks come from --ntasks"),
    _noted("--core-spec", "-S", VALUE, "no cores are set aside for the system"),
    _noted("--thread-spec", None, VALUE, "no threads are set aside for the system"),
    _noted("--distribution", "-m", VALUE, "tasks are laid out on one machine"),
    _noted("--mem-bind", None, VALUE, "a binding hint"),
    _noted("--cpu-freq", None, VALUE, "gqa leaves CPU frequencies alone"),
    _noted("--gpu-bind", None, VALUE, "each srun task sees the GPUs gqa gives it (--gpus-per-task)"),
    _noted("--gpu-freq", None, VALUE, "gqa leaves GPU clocks alone"),
    _noted("--tres-bind", None, VALUE, "a binding hint"),
    _noted("--gres-flags", None, VALUE, "a binding hint"),
    _noted("--switches", None, VALUE, "one machine: no network switches between its tasks"),
    _noted("--network", None, VALUE, "one machine: no network between its tasks"),
    _noted("--resv-ports", None, OPTIONAL, "one machine: srun needs no reserved ports"),
    _noted("--segment", None, VALUE, "one machine"),
    _noted("--contiguous", None, FLAG, "one machine"),
    _noted("--spread-job", None, FLAG, "one machine"),
    _noted("--use-min-nodes", None, FLAG, "one machine"),
    _noted("--wait-all-nodes", None, VALUE, "one machine"),
    _noted("--overcommit", "-O", FLAG, "tasks get the CPUs the job asks for"),
    _noted("--oversubscribe", "-s", FLAG, "gqa shares a machine between jobs unless --exclusive, never a GPU"),
    _noted("--get-user-env", None, OPTIONAL, "a job starts from the submitting shell's environment (--export)"),
    _noted("--propagate", None, OPTIONAL, "the submitting shell's resource limits are not carried over"),
    _noted("--kill-on-invalid-dep", None, VALUE, "gqa ends a job whose dependency can never be met, "
           "with the reason"),
    _noted("--no-kill", "-k", OPTIONAL, "one machine: no node of the job can fail alone"),
    _noted("--reboot", None, FLAG, "gqa never reboots a machine for a job"),
    _noted("--delay-boot", None, VALUE, "gqa never reboots a machine for a job"),
    _noted("--power", None, VALUE, "gqa manages no power"),
    _noted("--mcs-label", None, VALUE, "gqa has no MCS labels"),
    _noted("--extra", None, VALUE, "gqa knows no node features"),
    _noted("--stepmgr", None, FLAG, "steps are managed in the job"),
    _noted("--oom-kill-step", None, OPTIONAL, "the job's memory limit applies to the job as a whole"),
    _noted("--ignore-pbs", None, FLAG, "gqa reads no #PBS lines"),
    _noted("--quiet", "-Q", FLAG, "sbatch's own output; `gqa submit` prints the id"),
    _noted("--verbose", "-v", FLAG, "sbatch's own output; `gqa submit` prints the id"),
    _noted("--parsable", None, FLAG, "`gqa submit` prints the id alone (or -o json)"),
    _noted("--wait", "-W", FLAG, "in a script it changes nothing; `gqa submit --wait` waits"),
    # refused: gqa would run something other than what was asked
    _refused("--uid", None, VALUE, "a job runs as whoever submits it"),
    _refused("--gid", None, VALUE, "a job runs as whoever submits it"),
    _refused("--test-only", None, FLAG, "it would submit nothing; gqa has no dry run"),
    _refused("--deadline", None, VALUE, "gqa does not remove a job that cannot end by a deadline"),
    _refused("--clusters", "-M", VALUE, "one gqa queue is one cluster"),
    _refused("--het-job", None, FLAG, "heterogeneous jobs (and `#SBATCH hetjob`) need several kinds of node"),
    _refused("--wrap", None, VALUE, "a script is already the command; outside one use `gqa submit -- CMD`"),
    _refused("--batch", None, VALUE, "the batch step's node features cannot be chosen on one machine"),
    _refused("--container", None, VALUE, "an OCI bundle is not run; on AWS use --container-image"),
    _refused("--container-id", None, VALUE, "an OCI bundle is not run; on AWS use --container-image"),
    _refused("--bb", None, VALUE, "burst buffers stage data the job expects; gqa has none"),
    _refused("--bbf", None, VALUE, "burst buffers stage data the job expects; gqa has none"),
    _refused("--export-file", None, VALUE, "the environment comes from the submitting shell and --export"),
    _refused("--gpus-per-socket", None, VALUE, "GPUs per socket need the socket count; use --gpus"),
    _refused("--tres-per-task", None, VALUE, "write --cpus-per-task and --gpus-per-task"),
    _refused("--help", "-h", FLAG, "sbatch would print its help and submit nothing"),
    _refused("--usage", None, FLAG, "sbatch would print its usage and submit nothing"),
    _refused("--version", "-V", FLAG, "sbatch would print its version and submit nothing"),
)

# gqa's own options, for #GQA lines only (--priority takes gqa's tier names there)
GQA_ONLY: tuple[Option, ...] = (
    _honoured("--team", None, VALUE, "`team`", _field("team")),
    _honoured("--priority", None, VALUE, "`priority`: high, normal or low", _field("priority")),
    _honoured("--gpu-type", None, VALUE, "`resources.gpu_type`", _field("resources", "gpu_type")),
    _honoured("--name", None, VALUE, "`name`", _field("name")),
    _honoured("--cpus", None, VALUE, "`resources.cpus` for the whole job",
              _keep("cpus", lambda v: values.count(v, "--cpus"))),
    _honoured("--retries", None, VALUE, "`retries.on_error`",
              _field("retries", "on_error", convert=lambda v: values.count(v, "--retries"))),
)


def _index(options: tuple[Option, ...]) -> dict[str, Option]:
    return {name: option for option in options for name in option.names}


SBATCH = _index(OPTIONS)
GQA = {**{n: o for n, o in SBATCH.items() if o.verdict == HONOURED}, **_index(GQA_ONLY)}


def read_args(args: list[str], request: Request, *, strict: bool) -> None:
    """One directive line's words, as sbatch's getopt reads them, into `request`."""
    prefix = "#GQA" if strict else "#SBATCH"
    table = GQA if strict else SBATCH
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg.partition("=")
            option = _known(name, arg, table, prefix, request)
            if option.takes == FLAG and eq:
                raise request.error(f"{prefix} {name} takes no value, got {arg!r}")
            if option.takes == VALUE and not eq:
                if i >= len(args):
                    raise request.error(f"{prefix} option {name} needs a value")
                value, i = args[i], i + 1
            _use(option, value if eq or option.takes == VALUE else None,
                 f"{prefix} {arg if eq else f'{name} {value}'.strip()}", request)
        elif arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                short = "-" + arg[j]
                option = _known(short, short, table, prefix, request)
                if option.takes != VALUE:              # a flag: more short options may follow it
                    _use(option, None, f"{prefix} {short}", request)
                    j += 1
                    continue
                value = arg[j + 1:]
                if not value:
                    if i >= len(args):
                        raise request.error(f"{prefix} option {short} needs a value")
                    value, i = args[i], i + 1
                _use(option, value, f"{prefix} {short} {value}", request)
                break
        elif arg.lower() in ("hetjob", "packjob"):
            raise request.error(f"{prefix} {arg}: {SBATCH['--het-job'].effect}")
        else:
            raise request.error(f"{prefix} {arg!r} is not an option: directive lines hold options only")


def _known(name: str, arg: str, table: dict[str, Option], prefix: str, request: Request) -> Option:
    option = table.get(name)
    if option is not None:
        return option
    if prefix == "#GQA" and name in SBATCH:
        raise request.error(f"#GQA {name}: {SBATCH[name].effect}; #GQA takes only options gqa acts on")
    if prefix == "#SBATCH" and name in GQA:
        raise request.error(f"{name} is a gqa option, not sbatch's: write it on a #GQA line")
    near = difflib.get_close_matches(name, [n for n in table if n.startswith("--")], n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else ""
    raise request.error(f"unknown {prefix} option {arg.partition('=')[0]!r}{hint}")


def _use(option: Option, value: str | None, said: str, request: Request) -> None:
    if option.verdict == REFUSED:
        raise request.error(f"{said}: {option.effect}")
    if option.verdict == NOTED:
        request.note(f"{said} has no effect here: {option.effect}")
        return
    assert option.apply is not None
    try:
        option.apply(value, request)
    except SpecError as exc:
        raise request.error(str(exc) if request.variable is None else f"{said}: {exc}") from None


def read_variable(variable: str, option: Option, text: str, request: Request) -> None:
    """One of sbatch's input environment variables (sbatch_env.py), the same as `option`
    written on an #SBATCH line, read as sbatch reads it: a flag is set by an empty value,
    yes or a number other than 0 (any other value leaves it unset); an optional value is
    given unless empty; notes and errors name the variable."""
    if option.takes == FLAG:
        if not _enabled(text):
            return
        value = None
    else:
        value = text if text or option.takes == VALUE else None
    line, request.variable, request.line = request.line, variable, 0
    try:
        _use(option, value, f"{variable}={text}", request)
    finally:
        request.variable, request.line = None, line


def _enabled(text: str) -> bool:
    word = text.strip()
    if not word or word.lower() == "yes":
        return True
    try:
        return int(word) != 0
    except ValueError:
        return False
