"""The Manifests port on S3: the key list of a burst too large for the job's
environment, written as a text object (one key a line) that the job reads.
Names come from gqa.models.burst (under gqa-trigger-manifests/, which no
trigger matches); a rewrite after a retried close writes the same text."""

from __future__ import annotations

from typing import Any

from .errors import Retrying


class S3Manifests:
    def __init__(self, client: Any, bucket: str, **retry: Any):
        self.bucket = bucket
        self.call = Retrying.for_service(client, "S3", **retry)

    def write(self, name: str, text: str) -> str:
        self.call("PutObject", Bucket=self.bucket, Key=name, Body=text.encode(),
                  ContentType="text/plain; charset=utf-8")
        return f"s3://{self.bucket}/{name}"
