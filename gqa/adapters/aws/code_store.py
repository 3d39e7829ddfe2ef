"""Code bundles on S3 (gqa.models.code): code/<sha256 hex>.tar.gz in the
checkpoint bucket.

The submitter's CLI stores a bundle once: it looks for the key first and
uploads only when it is absent, or older than REFRESH_DAYS (the bucket expires
bundles KEPT_DAYS after their upload), with the SHA-256 checksum so that S3
refuses bytes that changed on the way. The api function refuses a submission
whose bundle is not there.

A trigger keeps a copy of its job's bundle under gqa-trigger-code/<trigger
id>/, which no lifecycle rule expires (TriggerCode: the api function copies
it there when the trigger is added and deletes it when it is removed); each
burst (the trigger function) copies it back under code/ when the bundle
there is gone or older than REFRESH_DAYS, so the burst's job and its retries
find it as a fresh submission's would. Copies are S3's own (CopyObject):
nothing is read into the function.

Looking is ListObjectsV2 on the key as the prefix, not HeadObject: S3 answers
a HEAD for a missing key with 403 to a caller who may not list the bucket,
and listing is granted only under code/ (an s3:prefix condition, which a HEAD
does not carry), so a listing is the one answer that tells "absent" from
"denied"."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ...models.code import KEPT_DAYS, PREFIX, REFRESH_DAYS, hex_of, key_of, trigger_key_of, uri_of
from ...models.errors import BackendUnavailable, Misconfigured, NotFound
from .errors import Retrying

DAY = 86400.0


@dataclass(frozen=True)
class Stored:
    size: int
    age_days: float


class S3CodeStore:
    def __init__(self, client: Any, bucket: str, *, attempts: int = 5, **retry: Any):
        self.client = client
        self.bucket = bucket
        self.call = Retrying.for_service(client, "S3", attempts=attempts, **retry)

    def uri(self, digest: str) -> str:
        return uri_of(self.bucket, digest)

    def stored(self, digest: str, *, now: float) -> Stored | None:
        """The bundle as S3 holds it, or None."""
        return self._listed(key_of(digest), now)

    def _listed(self, key: str, now: float) -> Stored | None:
        try:
            out = self.call("ListObjectsV2", Bucket=self.bucket, Prefix=key, MaxKeys=1)
        except Misconfigured as exc:
            raise Misconfigured(f"cannot look for the job's code under s3://{self.bucket}/{PREFIX}/: access denied; "
                                f"the caller needs s3:ListBucket there (the deployment's researcher policy "
                                f"grants it)") from exc
        for item in out.get("Contents", []):
            if item["Key"] == key:
                modified: datetime = item["LastModified"]
                return Stored(int(item["Size"]), max(0.0, now - modified.timestamp()) / DAY)
        return None

    def put(self, digest: str, data: bytes) -> None:
        sha = hashlib.sha256(data)
        if sha.hexdigest() != hex_of(digest):
            raise ValueError(f"the bundle's bytes are not {digest}")
        try:
            self.call("PutObject", Bucket=self.bucket, Key=key_of(digest), Body=data, ContentType="application/gzip",
                      ChecksumAlgorithm="SHA256", ChecksumSHA256=base64.b64encode(sha.digest()).decode())
        except Misconfigured as exc:
            raise Misconfigured(f"cannot upload the job's code to s3://{self.bucket}/{PREFIX}/: access denied; "
                                f"the caller needs s3:PutObject there (the deployment's researcher policy "
                                f"grants it)") from exc

    def ensure(self, digest: str, data: bytes, *, now: float | None = None) -> str:
        """Store a bundle unless S3 holds it and will for long enough; what was done:
        "uploaded", "refreshed" (there, but near its expiry) or "present"."""
        now = datetime.now(timezone.utc).timestamp() if now is None else now
        found = self.stored(digest, now=now)
        if found is not None and found.age_days < REFRESH_DAYS:
            return "present"
        self.put(digest, data)
        return "uploaded" if found is None else "refreshed"

    def missing(self, spec: Any, *, again: str = "submit again with gqa submit") -> str | None:
        """Why a spec cannot run for want of its code, or None (the api function's check);
        `again`: what uploads it."""
        if getattr(spec, "code", None) is None:
            return None
        if self.stored(spec.code, now=datetime.now(timezone.utc).timestamp()) is not None:
            return None
        return (f"the job's code {spec.code} is not in s3://{self.bucket}/{PREFIX}/ (bundles expire {KEPT_DAYS} "
                f"days after their upload): {again}, which uploads it")

    # -- a trigger's copy (ports.TriggerCode) -------------------------------------------------------
    def keep(self, trigger_id: str, digest: str) -> None:
        self._copy(key_of(digest), trigger_key_of(trigger_id, digest))

    def ready(self, trigger_id: str, digest: str, *, now: float | None = None) -> str:
        now = datetime.now(timezone.utc).timestamp() if now is None else now
        found = self.stored(digest, now=now)
        kept = trigger_key_of(trigger_id, digest)
        copied = self._listed(kept, now) is not None
        if not copied:
            if found is None:
                raise NotFound(f"neither s3://{self.bucket}/{key_of(digest)} nor the trigger's copy "
                               f"s3://{self.bucket}/{kept} exists")
            self._copy(key_of(digest), kept)   # a trigger added before triggers kept copies: one now
        if found is not None and found.age_days < REFRESH_DAYS:
            return "present"
        self._copy(kept, key_of(digest))
        return "restored" if found is None else "refreshed"

    def release(self, trigger_id: str, digest: str) -> None:
        self.call("DeleteObject", Bucket=self.bucket, Key=trigger_key_of(trigger_id, digest))

    def _copy(self, source: str, key: str) -> None:
        """S3's own copy, which dates the new object now: the lifecycle counts from there."""
        self.call("CopyObject", Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": source})


def location(bucket: str) -> dict[str, Any]:
    """What GET /code answers: where a submitter stores bundles, and for how long they are kept."""
    return {"bucket": bucket, "prefix": f"{PREFIX}/", "kept_days": KEPT_DAYS, "refresh_days": REFRESH_DAYS}


def checked_location(data: Any) -> tuple[str, str]:
    """GET /code's answer as (bucket, prefix)."""
    if not isinstance(data, dict) or not isinstance(data.get("bucket"), str) or data.get("prefix") != f"{PREFIX}/":
        raise BackendUnavailable(f"the gqa API answered GET /code with {data!r}; is the CLI as new as the deployment?")
    return data["bucket"], data["prefix"]
