"""Checkpoints in S3 (GQA_CHECKPOINT_URI=s3://bucket/prefix/), with the
atomic semantics of LocalStorage:

    s3://bucket/prefix/ckpt-<step>/<files...>        uploaded first
    s3://bucket/prefix/ckpt-<step>/.gqa-manifest.json written once every file is up: the commit
    s3://bucket/prefix/latest                         the pointer, written last

S3 has no rename, so the manifest plays its part: a checkpoint counts as
committed only once its manifest exists, and a single PUT is atomic. A kill
mid-upload leaves files without a manifest (never listed) and `latest` where
it was. Reads follow the manifest, not a listing, so a stray object under a
checkpoint's prefix is never mistaken for part of it.

Several processes of an attempt may save at once. Each first claims its
checkpoint's name with a conditional PUT of `ckpt-<step>/.gqa-claim` (If-None-
Match: *), so no two uploads share a prefix: a name another process claimed
is passed over for the next serial. An upload in progress looks like a killed
one (files, no manifest), so a save sweeps only prefixes whose newest object
is a day old (staging.UNLOCKED_AGE). `latest` moves by a conditional PUT on
the pointer's ETag, so two processes never move it out of order. A store
without conditional writes gets the plain PUTs.

boto3 is imported on first use, so `gqa.runtime` stays importable with the
standard library alone; the job's container needs boto3 only to use S3.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .layout import POINTER, Choose, check_step, parse_name
from .staging import UNLOCKED_AGE

MANIFEST = ".gqa-manifest.json"
CLAIM = ".gqa-claim"
SCHEME = "s3://"
MISSING = ("NoSuchKey", "404", "NotFound")
DENIED = ("AccessDenied", "403")     # a HEAD's answer carries only the status code
LOST_RACE = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")   # a conditional write's
NO_CONDITIONS = ("NotImplemented", "501")   # a store that has no conditional writes
POINTER_TRIES = 20


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
        check_step(step)
        files = sorted(p for p in staged.rglob("*") if p.is_file() and not p.is_symlink())
        relative = [p.relative_to(staged).as_posix() for p in files]
        for own in (MANIFEST, CLAIM):
            if own in relative:
                raise ValueError(f"{own} is gqa's name for the checkpoint's "
                                 f"{'manifest' if own == MANIFEST else 'claim on its name'}; use another file name")
        # a new name each time (ckpt-5, ckpt-5.1, ...): never one `latest` may point at, one a
        # killed upload left files under, nor one another process is uploading to
        taken = set(self._prefixes())
        serial = 0
        while True:
            name = f"ckpt-{step}" if serial == 0 else f"ckpt-{step}.{serial}"
            serial += 1
            if name not in taken and self._claim(f"{self.prefix}{name}/{CLAIM}"):
                break
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

    def update_latest(self, choose: Choose) -> str | None:
        """Point `latest` at what `choose(current, names)` picks (None: leave it), written only
        if the pointer is still the one read (its ETag; none yet: If-None-Match); a move by
        another process in between makes it read and choose again."""
        key = self.prefix + POINTER
        for _ in range(POINTER_TRIES):
            body, etag = self._get_tagged(key)
            current = (body.decode("utf-8").strip() or None) if body is not None else None
            chosen = choose(current, self.names())
            if chosen is None or chosen == current:
                return current
            condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=(chosen + "\n").encode(),
                                       ContentType="text/plain", **condition)
            except Exception as exc:
                code = _code(exc)
                if code in LOST_RACE:
                    continue
                if code not in NO_CONDITIONS:
                    raise
                self.write_latest(chosen)
            return chosen
        raise RuntimeError(f"{SCHEME}{self.bucket}/{key} kept changing while being moved "
                           f"({POINTER_TRIES} tries); the checkpoint is saved, `latest` was left as it was")

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
        except Exception as exc:
            shutil.rmtree(local, ignore_errors=True)
            if _code(exc) in MISSING:
                return None   # deleted while read (pruned by another process): the next candidate
            raise
        except BaseException:
            shutil.rmtree(local, ignore_errors=True)
            raise
        if bucket == self.bucket:
            self._fetched[base] = local
        return local

    # -- S3 helpers ---------------------------------------------------------------------------
    def _get(self, key: str, *, bucket: str | None = None) -> bytes | None:
        return self._get_tagged(key, bucket=bucket)[0]

    def _get_tagged(self, key: str, *, bucket: str | None = None) -> tuple[bytes | None, str | None]:
        """The object's body and ETag; (None, None) where there is none."""
        bucket = bucket or self.bucket
        try:
            out = self.client.get_object(Bucket=bucket, Key=key)
        except Exception as exc:   # botocore is not imported here; judge the error by its code
            code = _code(exc)
            if code in MISSING or (code in DENIED and self._absent(bucket, key)):
                return None, None
            if code in DENIED:
                raise PermissionError(f"cannot read {SCHEME}{bucket}/{key}: access denied; the job's role "
                                      "needs s3:GetObject on it and s3:ListBucket on its prefix") from exc
            raise
        return out["Body"].read(), out.get("ETag")

    def _claim(self, key: str) -> bool:
        """Whether this process now holds `key` (a name's claim): False where another has it."""
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=b"", IfNoneMatch="*")
        except Exception as exc:
            code = _code(exc)
            if code in LOST_RACE:
                return False
            if code not in NO_CONDITIONS:
                raise
            self.client.put_object(Bucket=self.bucket, Key=key, Body=b"")
        return True

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
        for item in self._objects(prefix):
            yield item["Key"]

    def _objects(self, prefix: str) -> Iterator[dict[str, Any]]:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            yield from page.get("Contents", [])

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

    def _sweep(self, now: float | None = None) -> None:
        """Remove what killed uploads left: checkpoint folders without a manifest whose newest
        object is a day old. A younger one may be another process's upload in progress."""
        now = time.time() if now is None else now
        committed = set(self.names())
        for name in self._prefixes():
            if name in committed or parse_name(name) is None:
                continue
            base = f"{self.prefix}{name}/"
            newest = max((item["LastModified"].timestamp() for item in self._objects(base)), default=None)
            if newest is not None and now - newest > UNLOCKED_AGE:
                self._delete_all(base)


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
