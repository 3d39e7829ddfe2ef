"""Helpers for running the AWS adapters on moto, in-process."""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import boto3

REGION = "us-east-1"


@cache
def session() -> boto3.session.Session:
    """One session for every test client: it loads the service models once
    (a fresh default session per test costs most of a test's time). Clients
    made from it inside `mock_aws()` are served by moto."""
    return boto3.session.Session(region_name=REGION, aws_access_key_id="testing",
                                 aws_secret_access_key="testing")


class SerializedClient:
    """A client whose calls run one at a time across threads.

    moto's in-memory DynamoDB is not thread-safe (a transaction deep-copies a
    table while another thread writes it; ADD is a read-modify-write in Python).
    DynamoDB applies each request atomically; one lock around each call gives
    moto that same per-request atomicity, and nothing more, so concurrent
    stores still interleave between calls as they do against the service."""

    _lock = threading.RLock()

    def __init__(self, client: Any):
        self._client = client

    @property
    def meta(self) -> Any:
        return self._client.meta

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)
        return call
