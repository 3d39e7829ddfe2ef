"""A job's code on AWS: the submitter's directory as one content-addressed
bundle, and how a Batch job runs its command in it.

    code: sha256:<hex>           the spec's field, set by `gqa submit` on AWS
    s3://<bucket>/code/<hex>.tar.gz    the bundle (the checkpoint bucket)

The name is the SHA-256 of the bundle's bytes, so an unchanged tree is one
object however often it is submitted, and the job checks what it fetched
against its name. The bucket's lifecycle removes a bundle KEPT_DAYS after
its upload; a submitter who finds it older than REFRESH_DAYS uploads it
again, so a submission's bundle lasts at least KEPT_DAYS - REFRESH_DAYS.
A trigger submits long after it was added: it keeps a copy of its bundle
under TRIGGER_PREFIX, which does not expire, and each burst copies it back
under code/ when the one there is gone or older than REFRESH_DAYS.

In the job the command becomes `python3 -c BOOT --root WORKDIR -- ARGV...`:
BOOT imports gqa.runtime.code (the image needs gqa and boto3), which fetches,
verifies and unpacks the bundle into a fresh directory and execs ARGV there,
on every attempt. Pure: the bucket is given, nothing is read here."""

from __future__ import annotations

import re
from typing import Any

from .limits import MiB

PREFIX = "code"                      # the key prefix in the checkpoint bucket
KEPT_DAYS = 30                       # the bucket's lifecycle rule expires a bundle this long after its upload
REFRESH_DAYS = 15                    # a bundle found older than this is uploaded again
DEFAULT_MAX_BYTES = 100 * MiB        # compressed; `gqa submit --code-max-size`
MAX_FILES = 50_000                   # files in one bundle: more is a data set, not code
FETCH_FAILED = 69                    # the job's exit code when its code could not be set up (sysexits' UNAVAILABLE)
URI_ENV = "GQA_CODE_URI"             # where the job fetches its bundle from

# A trigger's own copy of its job's bundle (trigger_key_of): no lifecycle rule expires it, and it is
# deleted with the trigger, so each burst's job finds its code however long the trigger lives.
TRIGGER_PREFIX = "gqa-trigger-code"

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")

# Runs in the job's image: any python3, so it only imports the fetcher and says plainly what is
# missing when the image lacks it (rather than a traceback and exit 1 that reads as the job's own failure).
BOOT = (
    "import sys\n"
    "try:\n"
    "    from gqa.runtime.code import main\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('gqa: this image cannot fetch the job\\'s code (%s): it needs python3 with gqa and "
    "boto3 (pip install \"gqa[aws]\"), or submit with --no-code\\n' % e)\n"
    f"    sys.exit({FETCH_FAILED})\n"
    "main(sys.argv[1:])\n")


def check_digest(value: str) -> str:
    if not DIGEST_RE.match(value):
        raise ValueError(f"must be sha256: and 64 lowercase hex digits, got {value!r}")
    return value


def hex_of(digest: str) -> str:
    return digest.partition(":")[2]


def key_of(digest: str) -> str:
    """The bundle's object key: code/<hex>.tar.gz."""
    return f"{PREFIX}/{hex_of(check_digest(digest))}.tar.gz"


def trigger_key_of(trigger_id: str, digest: str) -> str:
    """The trigger's copy of the bundle: gqa-trigger-code/<trigger id>/<hex>.tar.gz."""
    return f"{TRIGGER_PREFIX}/{trigger_id}/{hex_of(check_digest(digest))}.tar.gz"


def uri_of(bucket: str, digest: str) -> str:
    return f"s3://{bucket}/{key_of(digest)}"


def launch_command(spec: Any) -> list[str]:
    """The command a Batch job runs: the spec's own argv, or, with code, the
    fetcher in front of it. `--root` is the submitter's directory: an argument
    naming a path under it (a script's own path) is read in the unpacked copy."""
    argv = spec.argv()
    if getattr(spec, "code", None) is None:
        return argv
    root = ["--root", spec.workdir] if spec.workdir else []
    return ["python3", "-c", BOOT, *root, "--", *argv]


def local_problem(spec: Any) -> str | None:
    """Why the local queue refuses a spec: a bundle names code that travels to
    AWS; a local job runs in its workdir, so running it would run other code
    than the spec names. An image (`--container-image`) is AWS's too: a local
    job runs on this machine as it is, not in a container."""
    if getattr(spec, "image", None) is not None:
        return (f"image: {spec.image} names a container image, which jobs on AWS run in; the local queue runs "
                "a job on this machine without one: remove image: (or #SBATCH --container-image)")
    if getattr(spec, "code", None) is None:
        return None
    return (f"code: {spec.code} names a code bundle, which jobs on AWS fetch; the local queue runs a job in its "
            f"workdir ({spec.workdir}): remove code: from the spec")
