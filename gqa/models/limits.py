"""How much one job spec may ask of the queue before anything is parsed,
expanded or run. A small input must never cost the daemon much memory or
time, nor yield a job that can never start; the numbers sit far above any
real spec."""

KiB = 1024
MiB = 1024 * KiB

# A YAML job file, or a script's #GQA/#SBATCH header. Real ones are a few KiB;
# PyYAML's pure-Python scanner takes about 0.3 s on the worst 256 KiB.
MAX_SPEC_BYTES = 256 * KiB
# A batch script, kept with its job as submitted (sbatch copies it too). Slurm's default
# max_script_size is 4 MB; as JSON text (control bytes escaped sixfold) a daemon request holds 4 MiB.
MAX_SCRIPT_BYTES = 512 * KiB
MAX_YAML_DEPTH = 32               # collections inside collections
MAX_YAML_NODES = 10_000           # values in a YAML document, every alias counted as what it stands for
MAX_YAML_TEXT = 1 * MiB           # characters of scalars, every alias counted as what it stands for
MAX_NUMBER_CHARS = 64             # a YAML number, a duration or a size, as written
MAX_TASKS = 100_000               # the jobs one array or sweep submission may become
MAX_ARRAY_INDEX = 4_000_000       # Slurm's largest (MaxArraySize at most 4,000,001)
# Settings and durations past these are typing mistakes, and past 2^63 they no longer fit a
# database integer: refused with the bound, not an overflow deep in a write
MAX_DURATION = 36_500 * 86_400    # 100 years, in seconds
MAX_GPU_COUNT = 1_000_000         # a quota or threshold in GPUs
MAX_AMOUNT = 10**12               # dollars, or GPU-hours

# Linux refuses an exec whose argv and environment together exceed about 2 MiB,
# or with any one string over 128 KiB (MAX_ARG_STRLEN). The job also inherits
# the submitter's environment, so a spec gets half of that.
MAX_EXEC_BYTES = 1 * MiB          # command and env together, as exec counts them
MAX_EXEC_STRING_BYTES = 128 * 1024  # one argument, or one NAME=VALUE


def count_text(n: int) -> str:
    """A count for a message: a grid or range from JSON may reach more digits than str(int) writes."""
    return str(n) if n < 10**18 else "more than 10^18"


def size_text(n: int) -> str:
    """A limit in bytes for a message: `256 KiB`, `1 MiB`."""
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n // KiB} KiB" if n % KiB == 0 else f"{n} bytes"
