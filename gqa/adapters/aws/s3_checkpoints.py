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
        # a denied HEAD's answer carries only its status code
        self.call = Retrying.for_service(client, "S3", {"403": Misconfigured}, attempts=attempts, **retry)

    def location(self, job_id: str) -> str:
        return f"s3://{self.bucket}/{self._key(job_id)}"

    def latest(self, job_id: str) -> str | None:
        base = self._key(job_id)
        pointer = self._read(base + POINTER)
        name = pointer.decode("utf-8", "replace").strip() if pointer is not None else ""
        if parse_name(name) is None:
            return None   # no pointer, or one that names no checkpoint
        manifest = f"{base}{name}/{MANIFEST}"
        try:
            # the manifest is written after every file: if it is there, so is the checkpoint
            self.call("HeadObject", Bucket=self.bucket, Key=manifest)
        except NotFound:
            return None
        except Misconfigured as exc:
            self._absent_or_denied(manifest, exc)
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
            self._absent_or_denied(key, exc)
            return None
        return out["Body"].read()

    def _absent_or_denied(self, key: str, denial: Misconfigured) -> None:
        """After S3 denied a GET or HEAD of `key`: returns if the key does not exist, else raises.
        S3 answers a read of a missing key with 403 to a reader whose s3:ListBucket holds only under
        an s3:prefix condition (the dispatch role's), as a GET or HEAD carries no s3:prefix; a
        listing does. "No checkpoint yet" is assumed only when the listing says so: resuming from
        scratch would throw the job's progress away."""
        try:
            out = self.call("ListObjectsV2", Bucket=self.bucket, Prefix=key, MaxKeys=1)
        except Misconfigured:
            pass   # the listing is denied too: the read's denial stands
        else:
            if not any(item["Key"] == key for item in out.get("Contents", [])):
                return
        raise Misconfigured(f"cannot read s3://{self.bucket}/{key}: access denied; the dispatch function's "
                            f"role needs s3:GetObject and s3:ListBucket under {self.prefix}") from denial


def _missing_bucket(exc: NotFound) -> bool:
    return isinstance(exc.__cause__, ClientError) and code_of(exc.__cause__) == "NoSuchBucket"
