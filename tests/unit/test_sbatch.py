"""gqa/models/sbatch.py: every sbatch option of the table, each with its own
example; the getopt forms; the quantities read together; --begin and --export;
the README's table against the code's."""

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gqa.models.errors import SpecError
from gqa.models.loader import load_spec, parse_directives, validate
from gqa.models.sbatch import GQA_ONLY, HONOURED, NOTED, OPTIONS, REFUSED, SBATCH
from gqa.models.sbatch_values import begin_time, exported_environment
from gqa.models.spec import Priority

GiB = 1024**3
MiB = 1024**2
NOW = datetime(2026, 12, 2, 10, 30).timestamp()     # local time, as --begin reads it
README = Path(__file__).resolve().parents[2] / "README.md"


def read(text: str, warn=None):
    """The spec a script header describes, and the notes it gave."""
    notes: list[str] = []
    raw = parse_directives(text, source="run.sh", warn=notes.append if warn is None else warn, now=NOW)
    return validate({"command": ["x"], "owner": "alice", **raw}), notes


def field(obj, path: str):
    for part in path.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


# -- one example per row ---------------------------------------------------------------------------

# honoured: the directive and the spec fields it sets
HONOURED_EXAMPLES = {
    "--output": ("-o out-%j.txt", {"output": "out-%j.txt"}),
    "--error": ("--error err-%x.txt", {"error": "err-%x.txt"}),
    "--input": ("-iin.txt", {"input": "in.txt"}),
    "--open-mode": ("--open-mode=A", {"open_mode": "append"}),
    "--chdir": ("-D /data/run", {"workdir": "/data/run"}),
    "--job-name": ("--job-name='bert lr=3e-4'", {"name": "bert lr=3e-4"}),
    "--export": ("--export=ALL,WANDB_MODE=offline", {"export": "ALL,WANDB_MODE", "env": {"WANDB_MODE": "offline"}}),
    "--container-image": ("--container-image=nvcr.io/nvidia/pytorch:24.01-py3",
                          {"image": "nvcr.io/nvidia/pytorch:24.01-py3"}),
    "--gpus": ("-G a100:2", {"resources.gpus": 2, "resources.gpu_type": "a100", "resources.gpus_option": "--gpus"}),
    "--gpus-per-node": ("--gpus-per-node=4", {"resources.gpus": 4, "resources.gpus_option": "--gpus-per-node"}),
    "--gpus-per-task": ("--gpus-per-task=1 -n 3", {"resources.gpus": 3, "resources.gpus_per_task": 1}),
    "--gres": ("--gres=gpu:a100_1g.5gb:2", {"resources.gpus": 2, "resources.gpu_type": "a100_1g.5gb"}),
    "--mem": ("--mem 16G", {"resources.memory": 16 * GiB}),
    "--mem-per-cpu": ("-c 4 --mem-per-cpu=2G", {"resources.memory": 8 * GiB}),
    "--mem-per-gpu": ("--gpus=2 --mem-per-gpu=10G", {"resources.memory": 20 * GiB}),
    "--cpus-per-task": ("-c 8 -n 2", {"resources.cpus": 16}),
    "--cpus-per-gpu": ("--gpus=2 --cpus-per-gpu=6", {"resources.cpus": 12}),
    "--ntasks": ("-n 4", {"resources.tasks": 4}),
    "--ntasks-per-node": ("--ntasks-per-node=8", {"resources.tasks": 8}),
    "--ntasks-per-gpu": ("--gpus=2 --ntasks-per-gpu=2", {"resources.tasks": 4}),
    "--nodes": ("-N 1-1 --gres=gpu:1", {"resources.gpus": 1}),
    "--exclusive": ("--exclusive", {"resources.exclusive": True}),
    "--time": ("-t 1-00:00:00", {"limits.wall_time": 86400}),
    "--time-min": ("--time=4:00:00 --time-min=1:00:00", {"limits.time_min": 3600}),
    "--signal": ("--signal=B:USR1@90", {"limits.signal": "B:USR1@90"}),
    "--dependency": ("-d afterok:12:13", {"after": "afterok:12:13"}),
    "--hold": ("-H", {"hold": True}),
    "--begin": ("--begin=now+1hour", {"begin": NOW + 3600}),
    "--array": ("-a 0-9%2", {"array": "0-9%2"}),
    "--requeue": ("--no-requeue --requeue", {"requeue": True}),           # the later one wins
    "--no-requeue": ("--no-requeue", {"requeue": False}),
    "--nice": ("--nice=5", {"nice": 5}),
    "--qos": ("-q urgent", {"priority": Priority.HIGH}),
    "--account": ("-A vision", {"team": "vision"}),
    "--mail-type": ("--mail-type=BEGIN,TIME_LIMIT_80", {"notify.events": ["begin", "time_limit"]}),
    "--mail-user": ("--mail-type=END --mail-user=ana@example.com", {"notify.to": "ana@example.com"}),
    "--comment": ("--comment='ablation 3'", {"tags.comment": "ablation 3"}),
}

# accepted without effect: a realistic use of each
NOTED_EXAMPLES = {
    "--priority": "--priority=100", "--partition": "-p gpu", "--constraint": "-C a100",
    "--prefer": "--prefer=nvlink", "--cluster-constraint": "--cluster-constraint=east",
    "--reservation": "--reservation=maint", "--nodelist": "-w node[01-02]", "--nodefile": "-F nodes.txt",
    "--exclude": "-x node07", "--mincpus": "--mincpus=8", "--tmp": "--tmp=100G", "--licenses": "-L matlab:1",
    "--wckey": "--wckey=proj", "--profile": "--profile=task", "--acctg-freq": "--acctg-freq=30",
    "--hint": "--hint=nomultithread", "--threads-per-core": "--threads-per-core=1",
    "--cores-per-socket": "--cores-per-socket=16", "--sockets-per-node": "--sockets-per-node=2",
    "--extra-node-info": "-B 2:16:1", "--ntasks-per-core": "--ntasks-per-core=1",
    "--ntasks-per-socket": "--ntasks-per-socket=4", "--core-spec": "-S 2", "--thread-spec": "--thread-spec=2",
    "--distribution": "-m block:cyclic", "--mem-bind": "--mem-bind=local", "--cpu-freq": "--cpu-freq=high",
    "--gpu-bind": "--gpu-bind=closest", "--gpu-freq": "--gpu-freq=high", "--tres-bind": "--tres-bind=gres/gpu:closest",
    "--gres-flags": "--gres-flags=enforce-binding", "--switches": "--switches=1", "--network": "--network=ib",
    "--resv-ports": "--resv-ports", "--segment": "--segment=2", "--contiguous": "--contiguous",
    "--spread-job": "--spread-job", "--use-min-nodes": "--use-min-nodes", "--wait-all-nodes": "--wait-all-nodes=1",
    "--overcommit": "-O", "--oversubscribe": "-s",
    "--get-user-env": "--get-user-env=60L", "--propagate": "--propagate=STACK",
    "--kill-on-invalid-dep": "--kill-on-invalid-dep=yes", "--no-kill": "-k", "--reboot": "--reboot",
    "--delay-boot": "--delay-boot=10", "--power": "--power=level", "--mcs-label": "--mcs-label=team",
    "--extra": "--extra=rack=1",
    "--stepmgr": "--stepmgr", "--oom-kill-step": "--oom-kill-step=1", "--ignore-pbs": "--ignore-pbs",
    "--quiet": "-Q", "--verbose": "-v", "--parsable": "--parsable", "--wait": "-W",
}

REFUSED_EXAMPLES = {
    "--uid": "--uid=0", "--gid": "--gid=0", "--test-only": "--test-only", "--deadline": "--deadline=now+1hour",
    "--clusters": "-M east", "--het-job": "--het-job", "--wrap": "--wrap='python train.py'",
    "--batch": "--batch=a100", "--container": "--container=/opt/bundle", "--container-id": "--container-id=c1",
    "--bb": "--bb='capacity=1G'", "--bbf": "--bbf=bb.conf", "--export-file": "--export-file=env.txt",
    "--gpus-per-socket": "--gpus-per-socket=2", "--tres-per-task": "--tres-per-task=gres/gpu:1",
    "--help": "-h", "--usage": "--usage", "--version": "-V",
}

GQA_EXAMPLES = {
    "--team": ("--team vision", {"team": "vision"}),
    "--priority": ("--priority=low", {"priority": Priority.LOW}),
    "--gpu-type": ("--gpu-type h100", {"resources.gpu_type": "h100"}),
    "--name": ("--name resnet", {"name": "resnet"}),
    "--cpus": ("--cpus 6 -n 3", {"resources.cpus": 6, "resources.tasks": 3}),
    "--retries": ("--retries=3", {"retries.on_error": 3}),
}


def test_every_row_has_an_example_of_its_verdict():
    by_verdict = {v: {o.long for o in OPTIONS if o.verdict == v} for v in (HONOURED, NOTED, REFUSED)}
    assert by_verdict[HONOURED] == set(HONOURED_EXAMPLES)
    assert by_verdict[NOTED] == set(NOTED_EXAMPLES)
    assert by_verdict[REFUSED] == set(REFUSED_EXAMPLES)
    assert {o.long for o in GQA_ONLY} == set(GQA_EXAMPLES)


def _uses(option, example: str) -> bool:
    words = example.split()
    return any(w == n or w.startswith(n + "=") or (len(n) == 2 and w.startswith(n)) for w in words
               for n in option.names)


@pytest.mark.parametrize("long", sorted(HONOURED_EXAMPLES))
def test_an_honoured_option_sets_its_spec_fields(long):
    example, expected = HONOURED_EXAMPLES[long]
    assert _uses(SBATCH[long], example)
    job, notes = read(f"#!/bin/bash\n#SBATCH {example}\npython train.py\n")
    assert notes == []
    for path, value in expected.items():
        assert field(job, path) == value, path


@pytest.mark.parametrize("long", sorted(NOTED_EXAMPLES))
def test_a_noted_option_changes_nothing_and_says_why(long):
    example = NOTED_EXAMPLES[long]
    assert _uses(SBATCH[long], example)
    notes: list[str] = []
    raw = parse_directives(f"#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH {example}\n", source="run.sh",
                           warn=notes.append, now=NOW)
    assert raw == {"resources": {"gpus": 1}}
    assert len(notes) == 1 and notes[0].startswith(f"run.sh:3: #SBATCH {example.split('=')[0]}")
    assert notes[0].endswith(f"has no effect here: {SBATCH[long].effect}")


@pytest.mark.parametrize("long", sorted(REFUSED_EXAMPLES))
def test_a_refused_option_is_an_error_naming_the_line_and_the_reason(long):
    example = REFUSED_EXAMPLES[long]
    assert _uses(SBATCH[long], example)
    with pytest.raises(SpecError) as caught:
        read(f"#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH {example}\n")
    assert caught.value.line == 3
    assert str(caught.value).startswith("run.sh:3: #SBATCH ") and str(caught.value).endswith(SBATCH[long].effect)


@pytest.mark.parametrize("long", sorted(GQA_EXAMPLES))
def test_a_gqa_option_on_a_gqa_line(long):
    example, expected = GQA_EXAMPLES[long]
    job, _ = read(f"#GQA {example}\n")
    for path, value in expected.items():
        assert field(job, path) == value, path


# -- read as getopt reads -----------------------------------------------------------------------

@pytest.mark.parametrize("line, path, value", [
    ("#SBATCH -N 1 -o out-%j.txt", "output", "out-%j.txt"),          # a value after a space, twice
    ("#SBATCH -oout.txt", "output", "out.txt"),
    ("#SBATCH --output out.txt --error=err.txt", "error", "err.txt"),
    ("#SBATCH -Ho x.txt", "hold", True),                                  # grouped short flags, then a value
    ("#SBATCH -Ho x.txt", "output", "x.txt"),
    ("#SBATCH -o -weird-", "output", "-weird-"),                         # the next word, whatever it is
    ("#SBATCH --nice", "nice", 100),                                      # an optional value left out
    ("#SBATCH --nice=-5", "nice", -5),
    ("#SBATCH -c4 -n2", "resources.cpus", 8),
    ("#SBATCH -n 2\n#SBATCH -n 3", "resources.tasks", 3),              # a later line wins
    ("#SBATCH --gres=gpu:2  # two of them", "resources.gpus", 2),
    ("#SBATCH --gres=gpu", "resources.gpus", 1),
    ("#SBATCH --gres=gpu:v100", "resources.gpu_type", "v100"),
    ("#SBATCH --gres=gpu:a100:1,gpu:a100:2", "resources.gpus", 3),     # several gres, one type
    ("#SBATCH --gres=gpu:1g.10gb:1", "resources.gpu_type", "1g.10gb"),  # a MIG profile
    ("#SBATCH --gres=gpu:2", "resources.gpus_option", None),            # SLURM_GPUS* follow the option asked
    ("#SBATCH --gpus-per-node=2\n#SBATCH --gres=gpu:3", "resources.gpus_option", None),
    ("#SBATCH --gpus=2\n#SBATCH --gpus-per-node=3", "resources.gpus_option", "--gpus-per-node"),
    ("#SBATCH --gpus-per-task=a10g:2 -n 2", "resources.gpu_type", "a10g"),
    ("#SBATCH --gpus=4 --gpus-per-task=1 -n 2", "resources.gpus", 4),    # --gpus wins over per task x tasks
    ("#SBATCH --mem-per-cpu=1G -n 3", "resources.memory", 3 * GiB),     # one CPU per task by default
    ("#SBATCH --mem=0 --gres=gpu:1", "resources.memory", None),
    ("#SBATCH --mem=2GB", "resources.memory", 2 * GiB),                 # str_to_mbytes: binary, a B may follow
    ("#SBATCH --mem=2gb", "resources.memory", 2 * GiB),
    ("#SBATCH --mem=512mb", "resources.memory", 512 * MiB),
    ("#SBATCH --mem=1T", "resources.memory", 1024 * GiB),
    ("#SBATCH --mem=1500K", "resources.memory", 2 * MiB),                # K rounds up to whole MiB
    ("#SBATCH --mem=0G --gres=gpu:1", "resources.memory", None),
    ("#SBATCH --time=UNLIMITED", "limits.wall_time", None),
    ("#SBATCH --time=0", "limits.wall_time", None),                     # Slurm: zero imposes no limit
    ("#SBATCH --time=00:00:00", "limits.wall_time", None),              # ... in any of its forms
    ("#SBATCH --time=00", "limits.wall_time", None),
    ("#SBATCH --time=0:00", "limits.wall_time", None),
    ("#SBATCH --time=0-0", "limits.wall_time", None),
    ("#SBATCH --time=0-00:00:00", "limits.wall_time", None),
    ("#SBATCH --time=00:00:01", "limits.wall_time", 60),                # Slurm keeps whole minutes
    ("#SBATCH --time=0-1", "limits.wall_time", 3600),
    ("#SBATCH -t -1", "limits.wall_time", None),
    ("#SBATCH --mail-type=NONE --mail-user=a@b.c", "notify", None),
    ("#SBATCH --mail-type=ALL", "notify.events", ["all"]),
    ("#SBATCH --export=NONE", "export", "NONE"),
    ("#SBATCH --export=EDITOR,ARG1=test", "export", "EDITOR,ARG1"),
    ("#SBATCH --time=30", "resources.gpus", 0),                         # a Slurm script without GPUs has none
    ("#GQA --time=30", "resources.gpus", 1),                            # gqa's default without #SBATCH
    ("#SBATCH --time=30\n#GQA --gpus 2", "resources.gpus", 2),
])
def test_getopt_forms_and_quantities(line, path, value):
    job, _ = read(line + "\npython train.py\n")
    assert field(job, path) == value


@pytest.mark.parametrize("line, wall_time", [
    ("#SBATCH --time=0:10", 60),                                        # MM:SS: a minute, as Slurm rounds up
    ("#SBATCH -t 1:30", 120),
    ("#SBATCH --time=1:00:01", 3660),
    ("#SBATCH --time=0-0:0:30", 60),
    ("#SBATCH --time=2:00", 120),
    ("#SBATCH --time=10", 600),
    ("#SBATCH --time=30s", 30),                                         # gqa's own unit forms keep their seconds
    ("#SBATCH --time=90s", 90),
])
def test_slurm_time_forms_round_up_to_whole_minutes(line, wall_time):
    job, _ = read(line + "\npython train.py\n")
    assert job.limits.wall_time == wall_time


def test_time_min_rounds_up_as_time_does():
    job, _ = read("#SBATCH -t 0:10 --time-min=0:05\npython train.py\n")
    assert (job.limits.wall_time, job.limits.time_min) == (60, 60)   # Slurm: TimeLimit and TimeMin 00:01:00


@pytest.mark.parametrize("text, message, line", [
    ("#SBATCH --partiton=gpu", "unknown #SBATCH option '--partiton'; did you mean --partition?", 1),
    ("#SBATCH -Z", "unknown #SBATCH option '-Z'", 1),
    ("#SBATCH --gres=gpu:1\n#SBATCH --hold=yes", "#SBATCH --hold takes no value", 2),
    ("#SBATCH -o", "#SBATCH option -o needs a value", 1),
    ("#SBATCH --nice 5", "#SBATCH '5' is not an option", 1),              # getopt: an optional value needs '='
    ("#SBATCH hetjob", "#SBATCH hetjob: heterogeneous jobs", 1),
    ("#SBATCH --team=vision", "--team is a gqa option, not sbatch's: write it on a #GQA line", 1),
    ("#GQA --partition=gpu", "#GQA --partition: one machine", 1),
    ("#GQA --gpu=2", "unknown #GQA option '--gpu'; did you mean --gpus?", 1),
    ("#SBATCH -N 2", "gqa runs a job on one machine; --nodes 2 would need 2", 1),
    ("#SBATCH --nodes=2-4", "--nodes 2-4 would need 2", 1),
    ("#SBATCH -n 8 --ntasks-per-node=4", "--ntasks 8 at --ntasks-per-node 4 would need more", 1),
    ("#SBATCH --mem=4G\n#SBATCH --mem-per-cpu=1G", "--mem and --mem-per-cpu together", 2),
    ("#SBATCH --mem-per-gpu=4G --mem-per-cpu=1G", "--mem-per-cpu and --mem-per-gpu together", 1),
    ("#SBATCH -c 2 --cpus-per-gpu=4", "--cpus-per-task and --cpus-per-gpu together", 1),
    ("#SBATCH --gres=gpu:a100:1,gpu:v100:1", "asks for GPUs of 2 types at once (a100, v100)", 1),
    ("#SBATCH --gres=gpu:2,shard:4", "--gres 'shard:4': gqa gives whole GPUs and nothing else", 1),
    ("#SBATCH --mem=lots", "--mem 'lots'", 1),
    ("#SBATCH --mem=1.5G", "--mem '1.5G'", 1),                            # Slurm takes whole numbers only
    ("#SBATCH --mem=2Gi", "--mem '2Gi'", 1),
    ("#SBATCH --mem=2B", "--mem '2B'", 1),
    ("#SBATCH --mem-per-cpu=0", "--mem-per-cpu 0: give a size", 1),
    ("#SBATCH --exclusive=always", "--exclusive=always", 1),
    ("#SBATCH --mail-type=SOMETIMES", "--mail-type 'SOMETIMES'", 1),
    ("#SBATCH --export=NONE,A=1", "NONE takes no variables", 1),
    ("#SBATCH --export=1A", "'1A' is not an environment variable name", 1),
    ("#SBATCH --begin=someday", "--begin 'someday'", 1),
    ("#SBATCH --begin=2026-02-30", "--begin '2026-02-30' is not a date or time", 1),
    ("#SBATCH --gres=gpu:1\n#SBATCH --dependency=afterok:x", "'x' is not a job id", 2),
    ("#SBATCH --time=soon", "invalid duration 'soon'", 1),
    ("#SBATCH --time=1:00:00 --time-min=later", "invalid duration 'later'", 1),
    ("#SBATCH --signal=KILL@60", "not KILL or STOP", 1),
    ("#SBATCH --array=5-1", "invalid array range", 1),
])
def test_bad_directives_name_the_line(text, message, line):
    with pytest.raises(SpecError, match=re.escape(message)) as caught:
        read(text + "\n")
    assert caught.value.line == line


def test_notes_name_the_line_and_what_has_no_effect():
    _, notes = read("#!/bin/sh\n#SBATCH --gres=gpu:1 --mem=0 --exclusive=user\n#SBATCH --mail-user=a@b.c\n")
    assert notes == [
        "run.sh:2: #SBATCH --mem=0 asks for all of a node's memory: the job gets no memory limit",
        "run.sh:2: #SBATCH --exclusive=user: nodes shared only with like jobs have no meaning on one machine; "
        "the job shares it as any job does",
        "run.sh:3: #SBATCH --mail-user without --mail-type sends nothing, as in Slurm"]


def test_begin_needs_the_time_of_submission():
    with pytest.raises(SpecError, match="--begin is read against the time of submission"):
        parse_directives("#SBATCH --begin=now+1hour\n")


# -- --begin --------------------------------------------------------------------------------------

def _at(days: int, hour: int, minute: int = 0, second: int = 0) -> float:
    base = datetime.fromtimestamp(NOW).replace(hour=0, minute=0, second=0, microsecond=0)
    return (base + timedelta(days=days, hours=hour, minutes=minute, seconds=second)).timestamp()


@pytest.mark.parametrize("text, expected", [
    ("now", NOW), ("now+90", NOW + 90), ("now+2minutes", NOW + 120), ("now+1hour", NOW + 3600),
    ("now+3days", NOW + 3 * 86400), ("now+1weeks", NOW + 7 * 86400),
    ("16:00", _at(0, 16)), ("09:15:30", _at(1, 9, 15, 30)),       # 9:15 has passed at 10:30: tomorrow's
    ("4:00 PM", _at(0, 16)), ("10:00am", _at(1, 10)),
    ("midnight", _at(1, 0)), ("noon", _at(0, 12)), ("teatime", _at(0, 16)), ("fika", _at(0, 15)),
    ("elevenses", _at(0, 11)),
    ("today", _at(0, 0)), ("tomorrow", _at(1, 0)),
    ("2027-01-15", datetime(2027, 1, 15).timestamp()),
    ("2027-01-15T08:30", datetime(2027, 1, 15, 8, 30).timestamp()),
    ("2027-01-15T08:30:05", datetime(2027, 1, 15, 8, 30, 5).timestamp()),
    ("12/24", datetime(2026, 12, 24).timestamp()), ("01/05", datetime(2027, 1, 5).timestamp()),
    ("12/24/27", datetime(2027, 12, 24).timestamp()),
])
def test_begin_forms(text, expected):
    assert begin_time(text, NOW) == expected


@pytest.mark.parametrize("text", ["now+1fortnight", "25:00", "13:00 pm", "2026-13-01", "soon", ""])
def test_begin_refuses_what_slurm_would(text):
    with pytest.raises(SpecError):
        begin_time(text, NOW)


# -- --export -------------------------------------------------------------------------------------

ENV = {"PATH": "/usr/bin", "HOME": "/home/ana", "EDITOR": "vi", "SLURM_CONF": "/etc/slurm.conf"}


@pytest.mark.parametrize("export, expected", [
    (None, ENV), ("ALL", ENV), ("ALL,EDITOR", ENV),
    ("NONE", None),
    ("EDITOR", {"EDITOR": "vi", "SLURM_CONF": "/etc/slurm.conf"}),
    ("EDITOR,MISSING", {"EDITOR": "vi", "SLURM_CONF": "/etc/slurm.conf"}),
])
def test_exported_environment(export, expected):
    assert exported_environment(export, dict(ENV)) == expected


def test_exported_environment_without_one_given_is_none():
    assert exported_environment("EDITOR", None) is None


def test_a_spec_export_names_variables_only():
    assert validate({"command": ["x"], "export": "all, editor"}).export is not None
    with pytest.raises(SpecError, match="export names variables; their values go in env"):
        validate({"command": ["x"], "export": "A=1"})


# -- the README lists the table --------------------------------------------------------------------

def readme_rows() -> dict[str, str]:
    """The README's "Slurm scripts" table: each option's long name and its verdict."""
    text = README.read_text()
    section = text[text.index("### Slurm scripts"):]
    section = section[:section.index("\n### ", 1)]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`--"):
            names = re.findall(r"`(-[^`]+)`", cells[0])
            rows[names[0]] = cells[1]
    return rows


def test_the_readme_lists_every_option_with_its_verdict():
    rows = readme_rows()
    assert rows == {o.long: o.verdict for o in OPTIONS}


def test_the_readme_shows_each_short_letter():
    text = README.read_text()
    for option in OPTIONS:
        if option.short:
            assert f"| `{option.long}`, `{option.short}` |" in text, option.long


# -- the command line's resources settle with the script's, as sbatch's own options do ----------

@pytest.mark.parametrize("lines, given, expected", [
    ("#SBATCH -c 2", {"tasks": 4}, {"cpus": 8, "tasks": 4, "gpus": 0}),
    ("#SBATCH -n 8 --ntasks-per-node=8 -c 1", {"tasks": 2}, {"cpus": 2, "tasks": 2, "gpus": 0}),
    ("#SBATCH --gres=gpu:a100:1 --mem-per-gpu=10G", {"gpus": 4}, {"gpus": 4, "gpu_type": "a100",
                                                                   "memory": f"{40 * GiB}B",
                                                                   "memory_option": "--mem-per-gpu"}),
    ("#SBATCH -c 2 --mem-per-cpu=1G", {"cpus": 3}, {"cpus": 3, "memory": f"{3 * GiB}B", "gpus": 0,
                                                    "memory_option": "--mem-per-cpu"}),
    ("#SBATCH -c 2 --mem-per-cpu=1G", {"memory": "5Gi"}, {"cpus": 2, "gpus": 0}),   # the flag's is merged after
    ("#SBATCH --time=30", {"gpus": 2}, {"gpus": 2}),
])
def test_command_line_resources_settle_with_the_directives(lines, given, expected):
    """(given: what gqa submit's own flags asked for)"""
    raw = parse_directives(lines + "\n", now=NOW, given=given)
    assert raw["resources"] == expected


@pytest.mark.parametrize("lines, flags, output", [
    ("#SBATCH --time=5", {}, "slurm-%j.out"),
    ("#SBATCH --array=0-3", {}, "slurm-%A_%a.out"),
    ("#SBATCH -o run-%j.log", {}, "run-%j.log"),
    ("#SBATCH -o run-%j.log", {"array": "0-2"}, "run-%j.log"),
    ("#GQA --gpus 1", {}, "slurm-%j.out"),
    ("", {}, "slurm-%j.out"),                             # no directives: flags only, as `sbatch -c 2 run.sh`
    ("", {"array": "0-2"}, "slurm-%A_%a.out"),            # the array given on the command line
    ("#SBATCH --time=5", {"array": "0-2"}, "slurm-%A_%a.out"),
])
def test_a_batch_script_writes_sbatchs_default_output_file(tmp_path, lines, flags, output):
    (tmp_path / "run.sh").write_text(f"#!/bin/sh\n{lines}\necho hi\n")
    job = load_spec("run.sh", cwd=str(tmp_path), overrides={"owner": "alice", **flags}, now=NOW)
    assert job.output == output


@pytest.mark.parametrize("value, mode", [("append", "append"), ("truncate", "truncate"), ("a", "append"),
                                         ("Trunc", "truncate")])
def test_open_mode_is_read_by_its_first_letter_as_sbatch_reads_it(value, mode):
    assert read(f"#SBATCH --open-mode={value}\n")[0].open_mode == mode


def test_an_unknown_open_mode_is_refused():
    with pytest.raises(SpecError, match="--open-mode 'keep': use append or truncate"):
        read("#SBATCH --open-mode=keep\n")


def test_a_plain_command_keeps_gqas_own_log_only():
    assert load_spec(command=["python", "train.py"], overrides={"owner": "alice", "array": "0-2"}).output is None


def test_an_array_asking_for_mail_without_array_tasks_is_told_it_gets_none():
    _, notes = read("#!/bin/sh\n#SBATCH --array=0-9\n#SBATCH --mail-type=END\n")
    assert notes == ["run.sh:3: #SBATCH --mail-type: an array's tasks are told of only with ARRAY_TASKS (gqa sends "
                     "no notice for the array as a whole)"]
    _, notes = read("#!/bin/sh\n#SBATCH --array=0-9\n#SBATCH --mail-type=END,ARRAY_TASKS\n")
    assert notes == []
