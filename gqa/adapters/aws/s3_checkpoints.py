"""Checkpoints on S3, as the control plane sees them: where a job writes
(GQA_CHECKPOINT_URI) and the latest complete checkpoint (GQA_RESUME_FROM).

The layout is gqa.runtime.s3's (the job writes it; this only reads it), so
the pointer and manifest names come from there:

    s3://<bucket>/<prefix>/<job id>/latest                 the pointer, written last
    s3://<bucket>/<prefix>/<job id>/ckpt-<step>/...        a checkpoint's files
    s3://<bucket>/<prefix>/<job id>/ckpt-<step>/.gqa-manifest.json   present once it is complete
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ...models.errors import Misconfigured, NotFound
from ...runtime.s3 import MANIFEST, folder
from ...runtime.layout import POINTER, parse_name
from .errors import Retrying, code_of


class S3Checkpoints:
    def __init__(self, client: Any, bucket: str, prefix: str = "checkpoints", *, attempts: int = 5, **retry: Any):
        self.client = client
        self.bucket = bucket
        self.prefix = folder(prefix)
        self.call = Retrying.for_service(client, "S3", attempts=attempts, **retry)

    def location(self, job_id: str) -> str:
        return f"s3://{self.bucket}/{self._key(job_id)}"

    def latest(self, job_id: str) -> str | None:
        base = self._key(job_id)
        pointer = self._read(base + POINTER)
        name = pointer.decode("utf-8", "replace").strip() if pointer is not None else ""
        if parse_name(name) is None:
            return None   # no pointer, or one that names no checkpoint
        try:
            # the manifest is written after every file: if it is there, so is the checkpoint
            self.call("HeadObject", Bucket=self.bucket, Key=f"{base}{name}/{MANIFEST}")
        except NotFound:
            return None
        return f"s3://{self.bucket}/{base}{name}"

    def _key(self, job_id: str) -> str:
        if not job_id or "/" in job_id:
            raise ValueError(f"not a job id: {job_id!r}")
        return f"{self.prefix}{job_id}/"

    def _read(self, key: str) -> bytes | None:
        try:
            out = self.call("GetObject", Bucket=self.bucket, Key=key)
        except NotFound as exc:
            if _missing_bucket(exc):
                raise   # a missing bucket is a deployment problem, not "no checkpoint yet"
            return None
        except Misconfigured as exc:
            # S3 answers a missing key with 403, not 404, to a reader that may not list the bucket:
            # "no checkpoint yet" and "no right to read it" look the same, so neither may be assumed
            raise Misconfigured(f"cannot read s3://{self.bucket}/{key}: access denied (to a reader without "
                                f"s3:ListBucket on the prefix, S3 denies a key that does not exist); "
                                f"the dispatch function's role needs s3:GetObject and s3:ListBucket under "
                                f"{self.prefix}") from exc
        return out["Body"].read()


def _missing_bucket(exc: NotFound) -> bool:
    return isinstance(exc.__cause__, ClientError) and code_of(exc.__cause__) == "NoSuchBucket"
