"""Inside a Batch job with code: fetch the submitter's directory, check it,
unpack it into a fresh directory and run the job's command there.

    python3 -m gqa.runtime.code [--root WORKDIR] -- ARGV...
    (what a job runs: gqa.models.code.launch_command)

GQA_CODE_URI names the bundle: s3://bucket/code/<sha256 hex>.tar.gz (boto3,
the job role's credentials), or file:///path/<hex>.tar.gz (a shared file
system; the tests). What arrives must hash to the name. Every attempt fetches
afresh: a retry or a resumed spot job runs the code that was submitted, not
what an earlier attempt left behind.

The archive is refused, before anything is written, if a member is an absolute
path, climbs out with `..`, passes through a link, is a link leading out of the
directory, or is anything but a file, a directory or a link (devices, hard
links). The command then runs as this process's child (job_process.py): with
srun, scontrol and squeue on its PATH, Batch's SIGTERM passed on to its
process group, and its exit code the job's, or the first failed srun step's
when it exited 0. Anything that goes wrong before it starts is one line on
stderr and exit code FETCH_FAILED (69); a command that cannot be started
exits 127, as a shell's.

Standard library only (boto3 on first use, like gqa.runtime.s3)."""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from .job_process import run_job

FETCH_FAILED = 69          # gqa.models.code.FETCH_FAILED: the runtime imports nothing else of gqa
URI_ENV = "GQA_CODE_URI"
CHUNK = 1024 * 1024


class CodeError(Exception):
    """The job's code cannot be set up; the message says why, in one line."""


# -- fetching ---------------------------------------------------------------------------------------
def expected_hex(uri: str) -> str:
    """The SHA-256 a bundle's name promises: .../<64 hex>.tar.gz."""
    name = posixpath.basename(urlparse(uri).path)
    digest = name[:-len(".tar.gz")] if name.endswith(".tar.gz") else ""
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise CodeError(f"{URI_ENV}={uri} does not name a bundle (<sha256 hex>.tar.gz)")
    return digest


def fetch(uri: str, into: BinaryIO, *, client: Any = None) -> str:
    """Copy the bundle at `uri` into `into`; return the SHA-256 hex of what was copied."""
    parsed = urlparse(uri)
    digest = hashlib.sha256()
    if parsed.scheme == "file":
        try:
            with open(unquote(parsed.path), "rb") as source:
                _copy(source, into, digest)
        except OSError as exc:
            raise CodeError(f"cannot read the job's code at {uri}: {exc.strerror or exc}") from None
    elif parsed.scheme == "s3":
        body = _s3_body(parsed.netloc, parsed.path.lstrip("/"), uri, client)
        try:
            _copy(body, into, digest)
        except Exception as exc:   # a connection lost mid-read: botocore's and urllib3's own errors
            raise CodeError(f"fetching the job's code from {uri} failed: {type(exc).__name__}: {exc}") from None
    else:
        raise CodeError(f"{URI_ENV}={uri}: only s3:// and file:// sources are known")
    return digest.hexdigest()


def _s3_body(bucket: str, key: str, uri: str, client: Any) -> BinaryIO:
    try:
        if client is None:
            import boto3   # only here: the standard library suffices until S3 is used

            client = boto3.client("s3")
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError as exc:
        raise CodeError(f"fetching the job's code from S3 needs boto3 in the image ({exc})") from None
    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        why = {"NoSuchKey": "it is not there (bundles expire; submit again)",
               "AccessDenied": "access denied (the job role reads only code/ of the checkpoint bucket)"}
        raise CodeError(f"cannot fetch the job's code from {uri}: {why.get(code, code)}") from None
    except BotoCoreError as exc:
        raise CodeError(f"cannot reach S3 for the job's code at {uri}: {type(exc).__name__}") from None


def _copy(source: BinaryIO, into: BinaryIO, digest: Any) -> None:
    while chunk := source.read(CHUNK):
        digest.update(chunk)
        into.write(chunk)


# -- unpacking --------------------------------------------------------------------------------------
def unsafe_member(member: tarfile.TarInfo, links: set[str]) -> str | None:
    """Why a member may not be unpacked, or None. `links`: the links seen before it."""
    name = member.name
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or ".." in parts:
        return f"{name!r} is not a plain relative path"
    if any("/".join(parts[:i]) in links for i in range(1, len(parts))):
        return f"{name!r} lies behind a link"
    if member.issym():
        target = member.linkname
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        if not target or target.startswith("/") or resolved == ".." or resolved.startswith("../"):
            return f"link {name!r} leads out of the directory (to {target!r})"
        return None
    if not (member.isfile() or member.isdir()):
        return f"{name!r} is neither a file, a directory nor a link"
    return None


def unpack(bundle: BinaryIO, dest: str | os.PathLike[str]) -> int:
    """Unpack a checked bundle into `dest` (which exists); returns the members unpacked."""
    try:
        with tarfile.open(fileobj=bundle, mode="r:gz") as tar:
            members: list[tarfile.TarInfo] = []
            links: set[str] = set()
            for member in tar:
                problem = unsafe_member(member, links)
                if problem:
                    raise CodeError(f"the job's code holds an unsafe member: {problem}")
                if member.issym():
                    links.add(member.name)
                members.append(member)
            # the checks above are the rule; the standard library's own filter (3.12, and 3.11.4+) is a second
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:
                tar.extractall(dest, members=members)
            return len(members)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CodeError(f"cannot unpack the job's code: {type(exc).__name__}: {exc}") from None


def in_copy(argv: Sequence[str], root: str | None, copy: str) -> list[str]:
    """Arguments that name the submitter's directory or a path under it, in the copy."""
    if not root:
        return list(argv)
    root = root.rstrip("/") or "/"
    out = []
    for arg in argv:
        if arg == root:
            out.append(copy)
        elif arg.startswith(root + "/") and root != "/":
            out.append(copy + arg[len(root):])
        else:
            out.append(arg)
    return out


def prepare(uri: str, *, parent: str | None = None, client: Any = None) -> str:
    """Fetch, verify and unpack the bundle; the fresh directory it is in."""
    want = expected_hex(uri)
    dest = tempfile.mkdtemp(prefix="gqa-code-", dir=parent)
    try:
        with tempfile.TemporaryFile(dir=parent) as bundle:
            got = fetch(uri, bundle, client=client)
            if got != want:
                raise CodeError(f"the job's code at {uri} has SHA-256 {got}, not the {want} it was submitted as")
            bundle.seek(0)
            unpack(bundle, dest)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def parse(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """[--root DIR] -- ARGV... -> (DIR, ARGV)."""
    args = list(args)
    root = None
    if args[:1] == ["--root"] and len(args) >= 2:
        root, args = args[1], args[2:]
    if args[:1] != ["--"] or len(args) < 2:
        raise CodeError("usage: python3 -m gqa.runtime.code [--root DIR] -- COMMAND [ARGS...]")
    return root, args[1:]


def main(args: Sequence[str] | None = None) -> None:
    """Set up the code and run the command; returns only by exiting, with the job's code."""
    try:
        root, argv = parse(sys.argv[1:] if args is None else args)
        uri = os.environ.get(URI_ENV, "")
        if not uri:
            raise CodeError(f"{URI_ENV} is not set: the job was not given its code")
        copy = prepare(uri)
    except CodeError as exc:
        sys.stderr.write(f"gqa: {exc}\n")
        sys.exit(FETCH_FAILED)
    os.chdir(copy)
    os.environ["PWD"] = copy       # what shells and os.getcwd() callers read as "here"
    argv = in_copy(argv, root, copy)
    sys.exit(run_job(argv, where=f" in the job's code ({Path(copy).name})"))


if __name__ == "__main__":
    main()
