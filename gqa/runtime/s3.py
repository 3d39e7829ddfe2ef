"""Checkpoints in S3 (GQA_CHECKPOINT_URI=s3://bucket/prefix/), with the
atomic semantics of LocalStorage:

    s3://bucket/prefix/ckpt-<step>/<files...>        uploaded first
    s3://bucket/prefix/ckpt-<step>/.gqa-manifest.json written once every file is up: the commit
    s3://bucket/prefix/latest                         the pointer, written last

S3 has no rename, so the manifest plays its part: a checkpoint counts as
committed only once its manifest exists, and a single PUT is atomic. A kill
mid-upload leaves files without a manifest (never listed, swept on the next
save) and `latest` where it was. Reads follow the manifest, not a listing, so
a stray object under a checkpoint's prefix is never mistaken for part of it.

boto3 is imported on first use, so `gqa.runtime` stays importable with the
standard library alone; the job's container needs boto3 only to use S3.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .layout import POINTER, parse_name

MANIFEST = ".gqa-manifest.json"
SCHEME = "s3://"
MISSING = ("NoSuchKey", "404", "NotFound")
DENIED = ("AccessDenied", "403")     # a HEAD's answer carries only the status code


def split_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b` -> ("bucket", "a/b")."""
    if not uri.startswith(SCHEME):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, key = uri[len(SCHEME):].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri!r}")
    return bucket, key


def folder(key: str) -> str:
    """A key prefix that names a folder: '' or ending in one '/'."""
    key = key.strip("/")
    return f"{key}/" if key else ""


class S3Storage:
    """CheckpointStorage on S3. `client` is a boto3 S3 client; by default one
    is made on first use from the environment (the Batch job's role)."""

    def __init__(self, uri: str, *, client: Any = None, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.bucket, key = split_uri(uri)
        self.prefix = folder(key)
        self._client = client
        self._cache_root = Path(cache_dir) if cache_dir is not None else None
        self._fetched: dict[str, Path] = {}   # checkpoint key prefix -> its local copy
        self._swept = False

    def __repr__(self) -> str:
        return f"S3Storage('{SCHEME}{self.bucket}/{self.prefix}')"

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3   # only here: the standard library suffices until S3 is used

            self._client = boto3.client("s3")
        return self._client

    @property
    def cache(self) -> Path:
        """A local folder for staging and fetched checkpoints."""
        if self._cache_root is None:
            self._cache_root = Path(tempfile.mkdtemp(prefix="gqa-ckpt-"))
        self._cache_root.mkdir(parents=True, exist_ok=True)
        return self._cache_root

    # -- writing ------------------------------------------------------------------------------
    def stage(self) -> Path:
        if not self._swept:
            self._sweep()
            self._swept = True
        return Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.cache))

    def commit(self, staged: Path, step: int) -> str:
        if step < 0:
            raise ValueError(f"step must be 0 or more, got {step}")
        files = sorted(p for p in staged.rglob("*") if p.is_file() and not p.is_symlink())
        relative = [p.relative_to(staged).as_posix() for p in files]
        if MANIFEST in relative:
            raise ValueError(f"{MANIFEST} is gqa's name for the checkpoint's manifest; use another file name")
        # a new name each time (ckpt-5, ckpt-5.1, ...): never one `latest` may point at,
        # nor one a killed upload left files under
        taken = set(self._prefixes())
        serial = 0
        while (name := f"ckpt-{step}" if serial == 0 else f"ckpt-{step}.{serial}") in taken:
            serial += 1
        base = f"{self.prefix}{name}/"
        for path, rel in zip(files, relative):
            self.client.upload_file(str(path), self.bucket, base + rel)
        manifest = {"step": step, "files": [{"path": rel, "size": p.stat().st_size} for p, rel in zip(files, relative)]}
        self.client.put_object(Bucket=self.bucket, Key=base + MANIFEST, Body=json.dumps(manifest).encode(),
                               ContentType="application/json")
        # the staged folder is this checkpoint's local copy: fetch() after a save downloads nothing
        self._fetched[base] = staged
        return name

    def discard(self, staged: Path) -> None:
        shutil.rmtree(staged, ignore_errors=True)

    def read_latest(self) -> str | None:
        body = self._get(self.prefix + POINTER)
        name = body.decode("utf-8").strip() if body is not None else ""
        return name or None

    def write_latest(self, name: str) -> None:
        # one PUT replaces the object whole: readers see the old pointer or the new one
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + POINTER, Body=(name + "\n").encode(),
                               ContentType="text/plain")

    def names(self) -> list[str]:
        suffix = "/" + MANIFEST
        return [key[len(self.prefix):-len(suffix)] for key in self._keys(self.prefix + "ckpt-")
                if key.endswith(suffix) and parse_name(key[len(self.prefix):-len(suffix)]) is not None]

    def delete(self, name: str) -> None:
        if parse_name(name) is None:
            raise ValueError(f"not a checkpoint name: {name!r}")
        base = f"{self.prefix}{name}/"
        # the manifest first: a kill mid-delete leaves an uncommitted leftover, never a
        # "committed" checkpoint with files missing
        self.client.delete_object(Bucket=self.bucket, Key=base + MANIFEST)
        self._delete_all(base)
        local = self._fetched.pop(base, None)
        if local is not None:
            shutil.rmtree(local, ignore_errors=True)

    # -- reading ------------------------------------------------------------------------------
    def fetch(self, ref: str) -> Path | None:
        if ref.startswith(SCHEME):
            bucket, key = split_uri(ref)
        else:
            bucket, key = self.bucket, self.prefix + ref
        base = folder(key)
        if parse_name(base.rstrip("/").rsplit("/", 1)[-1]) is None:
            return None   # only committed names count, however the ref got into GQA_RESUME_FROM
        if bucket == self.bucket and base in self._fetched and self._fetched[base].is_dir():
            return self._fetched[base]
        raw = self._get(base + MANIFEST, bucket=bucket)
        if raw is None:
            return None
        local = Path(tempfile.mkdtemp(prefix="fetched-", dir=self.cache))
        try:
            for entry in json.loads(raw)["files"]:
                target = local / entry["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                self.client.download_file(bucket, base + entry["path"], str(target))
        except BaseException:
            shutil.rmtree(local, ignore_errors=True)
            raise
        if bucket == self.bucket:
            self._fetched[base] = local
        return local

    # -- S3 helpers ---------------------------------------------------------------------------
    def _get(self, key: str, *, bucket: str | None = None) -> bytes | None:
        bucket = bucket or self.bucket
        try:
            out = self.client.get_object(Bucket=bucket, Key=key)
        except Exception as exc:   # botocore is not imported here; judge the error by its code
            code = _code(exc)
            if code in MISSING or (code in DENIED and self._absent(bucket, key)):
                return None
            if code in DENIED:
                raise PermissionError(f"cannot read {SCHEME}{bucket}/{key}: access denied; the job's role "
                                      "needs s3:GetObject on it and s3:ListBucket on its prefix") from exc
            raise
        return out["Body"].read()

    def _absent(self, bucket: str, key: str) -> bool:
        """Whether a listing shows no `key`. S3 answers a GET of a missing key with 403 to a reader
        whose s3:ListBucket holds only under an s3:prefix condition (the job role's): a GET carries
        no s3:prefix, a listing does. False when the key is there or the listing is denied too."""
        try:
            out = self.client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        except Exception as exc:
            if _code(exc) in DENIED:
                return False
            raise
        return not any(item["Key"] == key for item in out.get("Contents", []))

    def _keys(self, prefix: str) -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield item["Key"]

    def _prefixes(self) -> Iterator[str]:
        """Names of checkpoint folders with any object in them, committed or not."""
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + "ckpt-", Delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                yield common["Prefix"][len(self.prefix):].rstrip("/")

    def _delete_all(self, prefix: str) -> None:
        batch: list[dict[str, str]] = []
        for key in self._keys(prefix):
            batch.append({"Key": key})
            if len(batch) == 1000:   # DeleteObjects' limit per request
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
                batch = []
        if batch:
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})

    def _sweep(self) -> None:
        """Remove what killed uploads left: checkpoint folders without a manifest.
        One attempt of a job runs at a time, so no live upload is among them."""
        committed = set(self.names())
        for name in self._prefixes():
            if name not in committed and parse_name(name) is not None:
                self._delete_all(f"{self.prefix}{name}/")


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
